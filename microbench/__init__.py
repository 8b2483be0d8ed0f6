"""GEMM, attention and small-op microbenchmarks that write speedplan profile folders.

Data flows one way: microbench measures plain shape lists (`microbench.grid`) and writes
`meta.json` + one CSV per op family (`microbench.store`); `speedplan.profile` reads them.
Nothing here imports the planner. Run it as `speedplan bench ...` or `python -m microbench ...`.
"""

__version__ = "0.1.0"
