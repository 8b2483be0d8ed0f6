"""Readers of what engines write: benchmark results, metrics scrapes, logs. Each returns plain
records and names the file, row and field of any problem."""
