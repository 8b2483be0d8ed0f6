"""Profile and bench inputs an audit of 2026-12-04 refused with the wrong message or took
wrongly: a meta.json with a byte-order mark, `--device tpu`, `--min-time-ms 0`, a grid `@0`."""

from __future__ import annotations

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
