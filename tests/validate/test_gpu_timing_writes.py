"""`python -m speedplan.validate.gpu_timing --out DIR` writes its files whole (rendered, then renamed
into place), refuses bad input before anything is written, and writes nothing until its first
point is measured; a run cut short keeps its table so far (the campaign reprices it). The timing
itself needs a GPU: these tests replace `run` (the timing) and keep the writing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

import speedplan.validate.gpu_timing as gt
from speedplan.errors import SpeedplanInputError

WHAT = {"torch": "test", "python": "3", "device_name": "test-cpu"}


def _table(n: int) -> pd.DataFrame:
    rows = [{"batch": 1, "draft_len": d, "context": 64, "meas_t_verify": 0.01 * (1 + d), "mode": "eager"}
            for d in range(n)]
    return pd.DataFrame(rows, columns=["batch", "draft_len", "context", "meas_t_verify", "mode"])


@pytest.fixture
def fake(monkeypatch):
    """`run` replaced: it saves after each of `points` points and returns the table with a
    summary, or raises `fail` after `fail_after` of them; its calls are recorded."""
    state = {"points": 3, "fail": None, "fail_after": 0, "calls": []}

    def run(grid, hardware, device, progress=print, save=None):
        state["calls"].append((grid, hardware, device))
        for n in range(1, state["points"] + 1):
            if state["fail"] is not None and n > state["fail_after"]:
                raise state["fail"]
            save(_table(n))
        if state["fail"] is not None:
            raise state["fail"]
        table = _table(state["points"])
        table.insert(3, "pred_t_verify", table.meas_t_verify * 1.1)
        return table, {"points": len(table), "hardware": hardware, "step_time_median_error": 0.1,
                       "step_time_p90_error": 0.1, "device": "overwritten"}

    monkeypatch.setattr(gt, "run", run)
    monkeypatch.setattr(gt, "_device_facts", lambda device: dict(WHAT))
    return state


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_run_writes_the_table_and_summary_whole(tmp_path, fake):
    out = tmp_path / "new" / "v"
    assert gt.main(["--dry-run", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["summary.json", "verify_timing.csv"]  # no temporary file left
    summary = json.loads((out / "summary.json").read_text())
    assert summary["points"] == 3 and summary["device"] == "cpu" and summary["measured"] == WHAT
    assert summary["model"] == gt.DRY_GRID.model and "note" not in summary
    table = pd.read_csv(out / "verify_timing.csv")
    assert len(table) == 3 and "pred_t_verify" in table
    mask = os.umask(0)
    os.umask(mask)
    assert (out / "summary.json").stat().st_mode & 0o777 == 0o666 & ~mask  # as a plain open makes it


@pytest.mark.parametrize("make, out, words", [
    (lambda t: (t / "afile").write_text("x"), "afile", "exists and is not a folder"),
    (lambda t: (t / "afile").write_text("x"), "afile/v", "is a file, not a folder"),
    (lambda t: (t / "dang").symlink_to(t / "nowhere"), "dang/v", "is a broken symbolic link"),
])
def test_an_out_that_cannot_be_written_is_refused_before_the_run(tmp_path, fake, make, out, words):
    make(tmp_path)
    before = _files(tmp_path)
    with pytest.raises(SpeedplanInputError, match=words) as e:
        gt.main(["--dry-run", "--out", str(tmp_path / out)])
    assert "\n" not in str(e.value)
    assert fake["calls"] == [] and _files(tmp_path) == before and not (tmp_path / "nowhere").exists()


def test_an_out_where_no_file_can_be_made_is_refused_before_the_run(tmp_path, fake, monkeypatch, capsys):
    """A read-only file system, or a folder root may write in but this user may not: a real file
    is tried first. Through the module's entry point: exit 2, one line."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)
    monkeypatch.setattr(sys, "argv", ["gpu_timing", "--dry-run", "--out", str(tmp_path / "v")])
    assert gt._main() == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'v' / 'summary.json'}: cannot write (Permission denied)" in err and err.count("\n") == 1
    assert fake["calls"] == [] and list(tmp_path.iterdir()) == []


def test_a_run_that_fails_before_its_first_point_leaves_the_folder_as_it_was(tmp_path, fake):
    """The summary that says "measuring" was written before anything was built: a bad --hardware
    (or a crash building the model) left it over the previous run's results."""
    out = tmp_path / "v"
    assert gt.main(["--dry-run", "--out", str(out)]) == 0
    before = _files(tmp_path)
    fake.update(points=0, fail=SpeedplanInputError("unknown hardware 'tpu-v9'"))
    with pytest.raises(SpeedplanInputError, match="unknown hardware"):
        gt.main(["--dry-run", "--out", str(out)])
    assert _files(tmp_path) == before
    fresh = tmp_path / "fresh"
    with pytest.raises(SpeedplanInputError):
        gt.main(["--dry-run", "--out", str(fresh)])
    assert not fresh.exists()


def test_a_run_cut_short_keeps_whole_files_of_what_it_measured(tmp_path, fake):
    out = tmp_path / "v"
    fake.update(points=3, fail=KeyboardInterrupt(), fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        gt.main(["--dry-run", "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == ["summary.json", "verify_timing.csv"]
    left = json.loads((out / "summary.json").read_text())
    assert left["points"] == 0 and left["device"] == "cpu" and "measuring" in left["note"]
    assert len(pd.read_csv(out / "verify_timing.csv")) == 2


def test_a_write_that_fails_leaves_the_previous_files_whole(tmp_path, fake, monkeypatch, capsys):
    """The files were written in place: a full disk left a truncated table or summary."""
    out = tmp_path / "v"
    assert gt.main(["--dry-run", "--out", str(out)]) == 0
    before = _files(tmp_path)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    monkeypatch.setattr(sys, "argv", ["gpu_timing", "--dry-run", "--out", str(out)])
    assert gt._main() == 2
    err = capsys.readouterr().err
    assert "cannot write (No space left on device)" in err and err.count("\n") == 1
    assert _files(tmp_path) == before  # no temporary file beside them either


def test_reprice_writes_its_files_whole(tmp_path, monkeypatch):
    folder = tmp_path / "v"
    folder.mkdir()
    _table(3).to_csv(folder / "verify_timing.csv", index=False)
    (folder / "summary.json").write_text(json.dumps({"model": gt.DRY_GRID.model, "dtype": "fp32", "device": "cpu",
                                                     "points": 0}))
    before = _files(tmp_path)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "replace", full)
        with pytest.raises(SpeedplanInputError, match="--reprice .*cannot write"):
            gt.main(["--reprice", str(folder), "--hardware", "cpu-local"])
    assert _files(tmp_path) == before
    assert gt.main(["--reprice", str(folder), "--hardware", "cpu-local"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["summary.json", "verify_timing.csv"]
    assert json.loads((folder / "summary.json").read_text())["points"] == 3


def test_device_cuda_without_cuda_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setattr(gt, "run", lambda *a, **k: pytest.fail("run was called"))
    with pytest.raises(SpeedplanInputError, match="--device cuda: torch sees no CUDA device"):
        gt.main(["--device", "cuda", "--out", str(tmp_path / "v")])
    assert list(tmp_path.iterdir()) == []
