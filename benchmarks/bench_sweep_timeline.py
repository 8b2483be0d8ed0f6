"""Where `speedplan sweep` on the default spends its whole-process time: stage timestamps of
the console entry point (`speedplan.entry.main`, with its figure worker), median of N runs.

    python benchmarks/bench_sweep_timeline.py            # 5 runs
    python benchmarks/bench_sweep_timeline.py --runs 9

Each run is a fresh interpreter that wraps a few library functions with timestamps (ms since
the wrapper's first line; the interpreter's own start-up, ~20-40 ms, comes before it) as their
modules load, and then runs the entry point as the console script does. The wrapping adds
microseconds and imports nothing the plain run does not. "W:" marks the figure worker, "W2:" the
child it forks to draw in two processes. The runs use bytecode cached under a private prefix, as
an installed speedplan does (`bench_sweep.py` gives the figure without it too), after one untimed
run that writes it; SPEEDPLAN_SERIAL is dropped (every trick on). Prints one line per stage:
median, min and max ms over the runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# (module, function) pairs whose entry and return are stamped
WRAPPED = [
    ("speedplan.plan.sweep", "sweep"),
    ("speedplan.report.html", "send_figures"),
    ("speedplan.plan.engine_plan", "plan_engines"),
    ("speedplan.report.html", "write_report"),
    ("speedplan.report.summary", "render_summary"),
    ("speedplan.report.axes", "warm_up"),
    ("speedplan.entry", "draw_in_two"),  # and FigureWorker.wait, the parent waiting for the worker
]

CHILD = r"""
import os, sys, time
T0 = time.perf_counter()
MAIN = os.getpid()
def mark(what):
    who = "" if os.getpid() == MAIN else "W:" if os.getppid() == MAIN else "W2:"
    os.write(2, f"@@ {(time.perf_counter() - T0) * 1e3:.1f} {who}{what}\n".encode())
def wrap(owner, name):
    f = getattr(owner, name)
    def stamped(*a, **k):
        mark("> " + name)
        try:
            return f(*a, **k)
        finally:
            mark("< " + name)
    setattr(owner, name, stamped)
import importlib.machinery
class Stamper:  # a finder on sys.meta_path (importlib.abc would import typing, tempfile and more first)
    # wraps a module's functions as it is imported, so that nothing is imported earlier than in a plain run
    def find_spec(self, fullname, path, target=None):
        names = [n for m, n in WRAPPED if m == fullname]
        if not names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            for n in names:
                wrap(module, n)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Stamper())
import speedplan.entry as entry
wrap(entry.FigureWorker, "wait")
mark("entry imported")
exit_ = os._exit
def leave(code):
    mark("exit")
    exit_(code)
os._exit = leave
sys.argv = ["speedplan", "sweep", "--out", OUT]
entry.main()
"""


def one_run(out: Path, env: dict) -> dict[str, float]:
    """Stage -> ms of one `speedplan sweep` (the first time each stage was stamped)."""
    code = f"WRAPPED = {WRAPPED!r}\nOUT = {str(out)!r}\n" + CHILD
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"speedplan sweep failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    stamps: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if line.startswith("@@ "):
            _, ms, what = line.split(" ", 2)
            stamps.setdefault(what, float(ms))
    return stamps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs (default 5)")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SPEEDPLAN_SERIAL")}
    with tempfile.TemporaryDirectory() as tmp:
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        one_run(Path(tmp) / "warm", env)  # writes the bytecode
        runs = [one_run(Path(tmp) / f"r{i}", env) for i in range(args.runs)]
    order = {s: i for r in runs for i, s in enumerate(sorted(r, key=r.get))}  # a stage's place in the last run it was in: ties
    stages = sorted({s for r in runs for s in r}, key=lambda s: (statistics.median(r[s] for r in runs if s in r), order[s]))
    print(f"speedplan sweep (default), ms after the wrapper's first line, {args.runs} runs: median [min-max]")
    for stage in stages:
        ms = [r[stage] for r in runs if stage in r]
        print(f"  {statistics.median(ms):7.0f}  [{min(ms):5.0f}-{max(ms):5.0f}]  {stage}")


if __name__ == "__main__":
    main()
