"""Profile and bench inputs an audit of 2026-12-04 refused with the wrong message or took
wrongly: a meta.json with a byte-order mark, `--device tpu`, `--min-time-ms 0`, a grid `@0`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from speedplan.cli.app import run
from speedplan.errors import SpeedplanInputError
from speedplan.profile.grid import run_bench
from speedplan.profile.load import load_profile
from tests.profile.test_profile import synthetic_profile


def test_a_meta_json_with_a_byte_order_mark_is_read(tmp_path):
    """It was "malformed JSON (Unexpected UTF-8 BOM ...)"; every other reader skips the mark."""
    folder = synthetic_profile(tmp_path / "p")
    meta = folder / "meta.json"
    meta.write_text("\ufeff" + meta.read_text(), encoding="utf-8")
    assert load_profile(folder).meta["hardware_preset"] == "h100-sxm"
    meta.write_bytes(b"\xff{")  # not UTF-8 at all: still one line naming the file
    with pytest.raises(SpeedplanInputError, match=r"meta\.json: cannot read"):
        load_profile(folder)


def _refused(args: list[str], capsys, words: str, out) -> None:
    assert run(args) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and not out.exists(), err


def test_bench_names_the_device_it_cannot_measure(tmp_path, capsys):
    """`--device tpu` was refused as "--hardware-preset cpu-local: describes a CPU; --device cuda
    measures a GPU": the preset check took every device but cpu for cuda."""
    out = tmp_path / "b"
    _refused(["bench", "--device", "tpu", "--out", str(out)], capsys, "--device must be cpu or cuda, got 'tpu'", out)


@pytest.mark.parametrize("value", [0, -5])
def test_bench_refuses_a_timing_budget_that_is_not_positive(tmp_path, value):
    """0 was taken for "not given" (`min_time_ms or default`) while -5 was refused."""
    with pytest.raises(SpeedplanInputError, match=f"--min-time-ms must be > 0 and under a minute, got {value}"):
        run_bench(["tiny"], "cpu", str(tmp_path / "b"), min_time_ms=value, progress=False)
    assert not (tmp_path / "b").exists()


def test_a_grid_tp_of_0_names_the_grid_value(tmp_path, capsys):
    """It said "--tp must be >= 1", an option `profile roofline` does not have."""
    out = tmp_path / "r"
    _refused(["profile", "roofline", "--grid", "model:llama-3.1-8b@0", "--hardware", "h100-sxm", "--out", str(out)],
             capsys, "grid 'model:llama-3.1-8b@0': TP after '@' must be >= 1, got 0", out)


# `profile check --json-out PATH`: a PATH that cannot be written is refused before the
# leave-one-out (seconds on a shipped profile, minutes on a large one), not after it.

@pytest.fixture
def counted_check(monkeypatch):
    """The leave-one-out replaced by a stub that counts its calls."""
    import speedplan.profile.tools as tools

    calls = []

    def stub(path):
        calls.append(path)
        return {"profile": str(path), "origin": "measured", "median_error": 0.01, "p90_error": 0.02, "points": 3, "families": {}}

    monkeypatch.setattr(tools, "leave_one_out", stub)
    return calls


def _check_refused(tmp_path, capsys, counted_check, json_out, words: str) -> None:
    folder = synthetic_profile(tmp_path / "p")
    before = sorted(p for p in tmp_path.rglob("*"))
    assert run(["profile", "check", str(folder), "--json-out", str(json_out)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert counted_check == []  # refused before the work
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing written


def test_json_out_an_existing_folder_is_refused_first(tmp_path, capsys, counted_check):
    (tmp_path / "dir").mkdir()
    _check_refused(tmp_path, capsys, counted_check, tmp_path / "dir", "is a folder; give a file name")


def test_json_out_below_a_file_is_refused_first(tmp_path, capsys, counted_check):
    (tmp_path / "afile").write_text("x")
    _check_refused(tmp_path, capsys, counted_check, tmp_path / "afile" / "c.json", "is a file, not a folder")


def test_json_out_below_a_broken_link_is_refused_first(tmp_path, capsys, counted_check):
    """mkdir failed on the link ("cannot write (File exists)") once the leave-one-out had run."""
    (tmp_path / "dang").symlink_to(tmp_path / "nowhere")
    _check_refused(tmp_path, capsys, counted_check, tmp_path / "dang" / "sub" / "c.json",
                   f"{tmp_path / 'dang'} is a broken symbolic link")


def test_json_out_in_a_folder_os_access_calls_unwritable_is_refused_first(tmp_path, capsys, counted_check,
                                                                          monkeypatch):
    import os

    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro else real(p, mode, **kw))
    _check_refused(tmp_path, capsys, counted_check, ro / "new" / "c.json", "(permission denied)")


def test_json_out_where_no_file_can_be_made_is_refused_first(tmp_path, capsys, counted_check, monkeypatch):
    """A read-only file system or access rules os.access does not see: a real file is tried first."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)
    _check_refused(tmp_path, capsys, counted_check, tmp_path / "c.json", "cannot write (Permission denied)")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes in a read-only folder")
def test_json_out_in_a_read_only_folder_is_refused_first(tmp_path, capsys, counted_check):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        _check_refused(tmp_path, capsys, counted_check, ro / "c.json", "permission denied")
    finally:
        ro.chmod(0o755)


def test_json_out_makes_missing_folders_and_writes_once(tmp_path, capsys, counted_check):
    """A missing parent is made, as every writer makes it; the file comes whole, nothing beside it."""
    folder = synthetic_profile(tmp_path / "p")
    out = tmp_path / "new" / "sub" / "c.json"
    assert run(["profile", "check", str(folder), "--json-out", str(out)]) == 0
    assert len(counted_check) == 1 and json.loads(out.read_text())["points"] == 3
    assert [p.name for p in out.parent.iterdir()] == ["c.json"]


def test_a_json_out_that_fails_at_the_end_leaves_nothing_half_written(tmp_path, capsys, counted_check, monkeypatch):
    """The file was written in place: a failure on the way left a truncated file; the folders made
    for it stayed."""
    folder = synthetic_profile(tmp_path / "p")
    kept = tmp_path / "kept.json"
    kept.write_text('{"median_error": 0.1}\n')  # a previous check result (--json-out keeps any other file)

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    before = sorted(p for p in tmp_path.rglob("*"))
    for out in (kept, tmp_path / "new" / "sub" / "c.json"):
        assert run(["profile", "check", str(folder), "--json-out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"--json-out {out}: cannot write (No space left on device)" in err and err.count("\n") == 1, err
    assert sorted(p for p in tmp_path.rglob("*")) == before  # no temporary file, no folder made
    assert kept.read_text() == '{"median_error": 0.1}\n'


def test_json_out_onto_one_of_the_profiles_tables_is_refused_first(tmp_path, capsys, counted_check):
    """Only meta.json was protected: --json-out p/gemm.csv wrote JSON over the table the check reads."""
    folder = synthetic_profile(tmp_path / "p")
    table = next(f for f in sorted(folder.iterdir()) if f.suffix == ".csv")
    text = table.read_text()
    assert run(["profile", "check", str(folder), "--json-out", str(table)]) == 2
    err = capsys.readouterr().err
    assert "is one of the input files" in err and err.count("\n") == 1
    assert counted_check == [] and table.read_text() == text
