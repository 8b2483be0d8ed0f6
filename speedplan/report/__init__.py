"""A sweep's report folder: CSV and JSON files, serving configs, `report.html` and its figures."""
