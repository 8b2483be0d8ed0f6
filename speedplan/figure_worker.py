"""A forked process that imports matplotlib while the sweep is still being computed.

`speedplan sweep` spends about 0.5 s importing matplotlib and 0.4 s of CPU drawing five PNGs.
Started at the top of the command, the worker pays the matplotlib import on the second core
while the parent imports pandas and runs the sweep; it then receives what the figures show as
plain arrays (`report_figures.FigureSet`, pickled through a pipe, so the worker never imports
pandas) and draws them, itself split over two processes by `report_figures.draw_figures`. The
parent writes the CSV files and report.html meanwhile and waits.

Falls back cleanly: where fork is missing (Windows, macOS) `start()` returns None, and a worker
that fails or dies leaves the parent to draw the figures itself. The worker never prints and
leaves with `os._exit`, so it runs none of the parent's exit handlers.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FigureWorker:
    """Handle on a started worker: its pid and the write end of its job pipe."""

    pid: int
    job_fd: int
    sent: bool = False
    reaped: bool = False

    def submit(self, figures, out_dir: Path, caption: str) -> None:
        """Send one drawing job: a `report_figures.FigureSet` to draw into `out_dir`."""
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
        """Stop the worker (the sweep failed) and reap it."""
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


_early: FigureWorker | None = None  # started by the console entry point, claimed by `sweep`


def start_early(argv: list[str]) -> None:
    """Start a worker before Typer even parses the command line (that takes ~0.1 s) when the
    command is `sweep` and help is not asked for; `claim()` hands it to the command."""
    global _early
    if _early is None and argv[:1] == ["sweep"] and not {"--help", "-h"} & set(argv):
        _early = start()


def claim() -> FigureWorker | None:
    """The worker `start_early` started, else a new one (None where fork is unavailable)."""
    global _early
    worker, _early = _early, None
    return worker if worker is not None else start()


def cancel_unclaimed() -> None:
    """Stop an early worker that no command claimed (the command line was wrong)."""
    global _early
    if _early is not None:
        _early.cancel()
        _early = None


def start() -> FigureWorker | None:
    """Fork the worker (POSIX only); None where fork is unavailable or unsafe."""
    if not hasattr(os, "fork") or sys.platform == "darwin":
        return None
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:
        os.close(write_fd)
        os._exit(_serve(read_fd))
    os.close(read_fd)
    return FigureWorker(pid, write_fd)


def _serve(read_fd: int) -> int:
    """The worker's whole life: import, wait for one job, draw it. Returns the exit status."""
    try:
        gc.disable()  # a short life with no cycles worth collecting: ~20% off the matplotlib import
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl-C must not print here
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401  (the import is the point)
        from matplotlib.figure import Figure  # noqa: F401

        from . import report_axes, report_figures

        report_axes.warm_up()  # font loading and first-draw setup, while the parent still works
        with os.fdopen(read_fd, "rb") as pipe:
            payload = pipe.read()
        if not payload:  # the parent closed the pipe: no job
            return 0
        figures, out_dir, caption = pickle.loads(payload)
        paths = report_figures.draw_figures(figures, out_dir, caption)
        return 0 if all(p.exists() for p in paths) else 1
    except BaseException:
        return 1
