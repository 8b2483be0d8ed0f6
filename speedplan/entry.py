"""The `speedplan` console script, and every speed trick it plays: they live here and nowhere else.

Library callers get the plain serial path: `speedplan.report.write_outputs(result, out)` draws
the figures in its own process, one after another, and returns normally. The console script
plays five tricks so that `speedplan sweep` on the default finishes in about a second as a
whole process on a 2-core machine (what each buys was measured with
`benchmarks/bench_speed_tricks.py`, which turns them off one at a time; see benchmarks/README.md):

1. **Figure worker forked first.** Before Typer or pandas is imported, `main` forks a worker
   that imports matplotlib (about half a second) on the other core while the parent parses
   the command line and sweeps. The parent later sends it what the figures show as plain
   arrays (`report.data.figure_set`, pickled through a pipe), so the worker never imports pandas.
2. **Drawing in two processes.** The worker forks once more and draws two of the five figures
   in the child (matplotlib spends about 50 ms per axes here).
3. **No garbage collector** in the sweep and its worker, and in `speedplan calibrate`: short-lived
   processes whose garbage is arrays, not cycles; the collector's passes cost about a fifth of the
   matplotlib import (and about 0.1 s of a 20-row calibration's ~2 s).
4. **`os._exit` after flushing**: tearing down pandas and numpy takes about 0.1 s, and nothing
   is left to clean up (a report folder is complete before the command returns).
5. **pandas without pyarrow.** Where pyarrow is installed (speedplan's `aic` and `test` extras),
   `import pandas` (3.x) imports it too, about 0.1 s; `speedplan sweep` and `speedplan calibrate`
   read and write CSV and JSON only, so their processes hide pyarrow from pandas, which then keeps strings in
   Python objects. The sweep's files are the same byte for byte either way (diffed, 2026-12-04).

Each falls back: where fork is missing (Windows, macOS) no worker starts, and a worker that
fails or dies leaves the parent to draw the figures itself. `SPEEDPLAN_SERIAL=1` turns all
five off; `SPEEDPLAN_SERIAL=worker,split,gc,exit,arrow` turns off the ones named (benchmarks and
debugging).
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

_OFF = {t.strip() for t in os.environ.get("SPEEDPLAN_SERIAL", "").split(",") if t.strip() not in ("", "0")}
OFF = {"worker", "split", "gc", "exit", "arrow"} if _OFF & {"1", "all"} else _OFF  # the tricks turned off


def main() -> None:
    """Console entry point: run the command line, then leave with its exit status."""
    argv = sys.argv[1:]
    short = argv[:1] in (["sweep"], ["calibrate"])  # short-lived, reading and writing CSV and JSON only
    if short and "gc" not in OFF:
        gc.disable()  # trick 3
    if short and "arrow" not in OFF and "pyarrow" not in sys.modules:
        sys.modules["pyarrow"] = None  # trick 5: `import pyarrow` now fails, and pandas goes without it
    if "worker" not in OFF:
        start_early(argv)  # trick 1
    from speedplan.cli.app import run

    try:
        code = run()
    finally:
        cancel_unclaimed()
    sys.stdout.flush()
    sys.stderr.flush()
    if "exit" in OFF:
        sys.exit(code)
    os._exit(code)  # trick 4


# ---- trick 1: the figure worker ------------------------------------------------------------
@dataclass
class FigureWorker:
    """Handle on a started worker: its pid and the write end of its job pipe. The report
    calls `submit` once, then `wait`; `cancel` stops it."""

    pid: int
    job_fd: int
    sent: bool = False
    reaped: bool = False

    def submit(self, figures, out_dir: Path, caption: str) -> None:
        """Send one drawing job: a `report.figures.FigureSet` to draw into `out_dir`."""
        payload = pickle.dumps((figures, Path(out_dir), caption), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            with os.fdopen(self.job_fd, "wb") as pipe:
                pipe.write(payload)
            self.sent = True
        except OSError:  # the worker died: wait() reports failure and the caller draws
            pass

    def wait(self) -> bool:
        """Wait for the worker to finish; True if it drew every figure it was sent."""
        if not self.sent:
            self.cancel()
            return False
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return False
        finally:
            self.reaped = True
        return status == 0

    def cancel(self) -> None:
        """Stop the worker (the command failed or drew nothing) and reap it."""
        if self.reaped:
            return
        self.reaped = True
        if not self.sent:
            try:
                os.close(self.job_fd)
            except OSError:
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


_early: FigureWorker | None = None  # started by `main`, claimed by the sweep command


def start_early(argv: list[str]) -> None:
    """Start a worker before Typer parses the command line (that takes ~0.1 s) when the
    command is `sweep` and help is not asked for; `claim()` hands it to the command."""
    global _early
    if _early is None and argv[:1] == ["sweep"] and not {"--help", "-h"} & set(argv):
        _early = start()


def claim() -> FigureWorker | None:
    """The worker `start_early` started, if any (the console script's sweep); None otherwise,
    and the report then draws in-process."""
    global _early
    worker, _early = _early, None
    return worker


def cancel_unclaimed() -> None:
    """Stop an early worker that no command claimed (the command line was wrong)."""
    global _early
    if _early is not None:
        _early.cancel()
        _early = None


def _fork() -> int | None:
    """os.fork() where it exists and is safe enough (POSIX, not macOS); None otherwise."""
    if not hasattr(os, "fork") or sys.platform == "darwin":
        return None
    try:
        return os.fork()
    except OSError:
        return None


def start() -> FigureWorker | None:
    """Fork a worker; None where fork is unavailable."""
    read_fd, write_fd = os.pipe()
    pid = _fork()
    if pid is None:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:
        os.close(write_fd)
        os._exit(_serve(read_fd))  # a forked child must never run the parent's exit path
    os.close(read_fd)
    return FigureWorker(pid, write_fd)


def _serve(read_fd: int) -> int:
    """The worker's whole life: import matplotlib, wait for one job, draw it. Returns the exit status."""
    try:
        if "gc" not in OFF:
            gc.disable()  # trick 3
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl-C must not print here
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401  (the import is the point)
        from matplotlib.figure import Figure  # noqa: F401

        from speedplan.report import axes

        axes.warm_up()  # font loading and first-draw setup, while the parent still works
        with os.fdopen(read_fd, "rb") as pipe:
            payload = pipe.read()
        if not payload:  # the parent closed the pipe: no job
            return 0
        figures, out_dir, caption = pickle.loads(payload)
        paths = draw_in_two(figures, out_dir, caption)
        return 0 if all(p.exists() for p in paths) else 1
    except BaseException:
        return 1


# ---- trick 2: drawing in two processes -----------------------------------------------------
# Split by measured drawing time in a fresh process (the first figure pays for colour maps and
# glyph caches): heatmap and best D here, the other three in the child.
_HERE = ("heatmap", "best_d")


def draw_in_two(figures, out_dir: Path, caption: str) -> list[Path]:
    """`report.figures.draw_figures` split over this process and a forked child; what the
    child fails to draw is drawn here. Returns every figure's path."""
    from speedplan.report.axes import caption_pixels
    from speedplan.report.figures import FIGURES, draw_figures, figure_paths

    theirs = [n for n in FIGURES if n not in _HERE]
    caption_pixels(caption)  # drawn once, before the fork, for both processes
    child = _fork() if "split" not in OFF else None
    if child == 0:
        try:
            draw_figures(figures, out_dir, caption, names=theirs)
            os._exit(0)
        except BaseException:
            os._exit(1)
    draw_figures(figures, out_dir, caption, names=_HERE if child else tuple(FIGURES))
    if child:
        _, status = os.waitpid(child, 0)
        if status != 0 or not all((Path(out_dir) / FIGURES[n]).exists() for n in theirs):
            draw_figures(figures, out_dir, caption, names=theirs)
    return figure_paths(out_dir)


if __name__ == "__main__":
    # `python -m speedplan.entry`: run the package module's main, not this __main__ copy's, so
    # that the sweep command (which imports speedplan.entry) finds the worker started here
    from speedplan.entry import main as _main

    _main()
