"""`outputs.remove_stale`: which leftover staging folders beside an output folder go (a killed
run's, on this machine) and which stay (a running process's, another machine's, the only copy
of a previous folder, a user's folder that merely looks alike)."""

from __future__ import annotations

import os
import subprocess
import sys

from speedplan import outputs


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # reaped: no process has it (until the kernel hands it out again)


def test_a_dead_runs_staging_folder_goes_and_the_rest_stay(tmp_path):
    out = tmp_path / "report"
    dead, host = _dead_pid(), outputs._host_tag()
    other_host = f"{(int(host, 16) + 1) % 2**32:08x}"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gone = [tmp_path / f".report.speedplan-{dead}-{host}-abc_123"]
        kept = [tmp_path / f".report.speedplan-{live.pid}-{host}-abc_123",  # still running
                tmp_path / f".report.speedplan-{dead}-{other_host}-abc_123",  # another machine's pid
                tmp_path / f".report.speedplan-{dead}-{host}-old-abc_123",  # report/ is missing: the only copy
                tmp_path / f".other.speedplan-{dead}-{host}-abc_123",  # another folder's
                tmp_path / ".report.mine",  # the user's
                tmp_path / f".report.speedplan-{os.getpid()}-{host}-abc_123"]  # this process's own
        for p in gone + kept:
            p.mkdir()
            (p / "meta.json").write_text("{}")
        assert outputs.remove_stale(out) == gone
        assert all(p.is_dir() for p in kept) and not gone[0].exists()
    finally:
        live.kill()
        live.wait()


def test_an_aside_copy_goes_once_the_folder_is_back(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    aside = tmp_path / f".report.speedplan-{_dead_pid()}-{outputs._host_tag()}-old-xyz"
    aside.mkdir()
    assert outputs.remove_stale(out) == [aside] and out.is_dir()


def test_staging_folders_are_named_for_their_process(tmp_path):
    tmp = outputs.staging_folder(tmp_path / "report")
    try:
        assert tmp.name.startswith(f".report.speedplan-{os.getpid()}-{outputs._host_tag()}-")
        assert outputs.remove_stale(tmp_path / "report") == []  # its own process runs
    finally:
        outputs.discard(tmp)
