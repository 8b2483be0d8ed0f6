"""SIGTERM (`kill`, `timeout`, a cancelled CI job) while a command writes its folder: the
command stops as on Ctrl-C, its staging folder is removed, and it says so in one line."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# `speedplan sweep` whose last step (moving the finished folder into place) waits a minute: the
# SIGTERM arrives while the hidden staging folder beside --out is complete but not yet moved.
_SLOW_SWEEP = """
import sys, time
import speedplan.report.folder as folder
folder.move_into_place = lambda tmp, out: time.sleep(60)
from speedplan.cli.app import run
sys.exit(run(["sweep", "--out", sys.argv[1]]))
"""


def _staged(parent: Path) -> list[Path]:
    return [p for p in parent.iterdir() if p.name.startswith(".out.")]


def test_sigterm_removes_the_staging_folder_and_exits_143(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_SWEEP, str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any((p / "meta.json").exists() for p in _staged(tmp_path)):  # written, not yet moved
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the sweep never reached its last step"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "speedplan: terminated (SIGTERM); unfinished outputs removed"
    assert "Traceback" not in err
    assert not _staged(tmp_path) and not out.exists()


def test_the_previous_sigterm_handler_is_restored():
    from speedplan.cli.app import run

    mine = lambda signum, frame: None  # noqa: E731
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        assert run(["engines"]) == 0
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_second_sigterm_does_not_interrupt_the_clean_up():
    """The first SIGTERM raises where the command is and ignores SIGTERM from then on, so that
    a supervisor repeating its signal cannot cut the staging folder's removal short (`run`
    puts the previous handler back when the command has ended)."""
    from speedplan.cli.app import Terminated, _terminate

    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(Terminated):
            _terminate(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_sigkilled_sweeps_staging_folder_goes_with_the_next_run_into_the_same_folder(tmp_path):
    """SIGKILL runs no clean-up: the complete but unmoved staging folder stays, named for the
    dead process; the next sweep into the same --out removes it and writes its own."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_SWEEP, str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not any((p / "meta.json").exists() for p in _staged(tmp_path)):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=60)
    left = _staged(tmp_path)
    assert len(left) == 1 and f".out.speedplan-{proc.pid}-" in left[0].name  # named for the killed run
    again = subprocess.run([sys.executable, "-m", "speedplan.cli", "sweep", "--out", str(out), "--batch", "1,4",
                            "--draft-len", "0-2"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert not _staged(tmp_path) and (out / "sweep.csv").is_file()


def test_ctrl_c_says_so_in_one_line_and_removes_the_staging_folder(tmp_path):
    """Typer turned Ctrl-C into a silent exit 130: the folder went, but nothing said so."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_SWEEP, str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not any((p / "meta.json").exists() for p in _staged(tmp_path)):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "speedplan: interrupted (Ctrl-C); unfinished outputs removed"
    assert not _staged(tmp_path) and not out.exists()


def test_bench_says_what_it_keeps_when_stopped(tmp_path):
    """bench appends each point as it completes and resumes from them: a stop keeps its folder,
    and the line said 'unfinished outputs removed'."""
    from speedplan.cli import app

    folder = tmp_path / "prof"
    try:
        app.keep_on_stop(folder)
        assert app._stopped("terminated (SIGTERM)") == "speedplan: terminated (SIGTERM); nothing was measured yet"
        folder.mkdir()
        (folder / "meta.json").write_text("{}")
        assert app._stopped("x").endswith(f"nothing was measured yet ({folder} holds its settings)")
        (folder / "gemm.csv").write_text("m,n,k\n")
        assert app._stopped("interrupted (Ctrl-C)") == (f"speedplan: interrupted (Ctrl-C); what was measured so far "
                                                         f"is kept in {folder}: the same command resumes")
    finally:
        app._kept.clear()
    assert app._stopped("x") == "speedplan: x; unfinished outputs removed"
