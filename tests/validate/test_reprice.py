"""Pricing one validation run's measurements with another profile (speedplan.reprice)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.validate.reprice import load_validation, reprice_verify, verify_errors

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "speedplan" / "data" / "profiles" / "cpu-local"
CAL_CONTEXT = 180.0
CAL_VERIFY_S = 0.2  # well above any profile's priced plain-decode step: the overhead stays positive


def scaled_profile(folder: Path, gemm_factor: float) -> Path:
    """The shipped CPU profile with every GEMM latency multiplied by `gemm_factor`."""
    shutil.copytree(SHIPPED, folder)
    gemm = pd.read_csv(folder / "gemm.csv")
    for col in ("latency_us", "min_us", "p90_us"):
        gemm[col] *= gemm_factor
    gemm.to_csv(folder / "gemm.csv", index=False)
    return folder


def validation_folder(folder: Path, summary_extra: dict | None = None) -> Path:
    """A validation folder: the calibration point itself plus chain and tree verify steps."""
    folder.mkdir(parents=True)
    rows = [("none", 1, 1, CAL_CONTEXT), ("eagle", 16, 8, 200.0), ("ngram", 4, 3, 190.0), ("eagle-tree", 2, 9, 170.0)]
    pd.DataFrame([{"mechanism": m, "batch": b, "verify_tokens": n, "context": c, "pred_t_verify": 0.1, "meas_t_verify": 0.1}
                  for m, b, n, c in rows]).to_csv(folder / "validation.csv", index=False)
    summary = {"hardware": str(SHIPPED), "context": 195, "layer_overhead_us_measured": 100.0,
               "calibration_verify_s": CAL_VERIFY_S, "calibration_context": CAL_CONTEXT, **(summary_extra or {})}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_calibration_point_keeps_its_measured_time_under_any_profile(tmp_path):
    """The host overhead is what the calibration step took beyond the profile's priced ops, so
    the calibration point is predicted as measured whichever profile prices it; a profile with
    twice the GEMM time predicts more for the GEMM-heavy B=16 x 8 verify step."""
    table, summary = load_validation(validation_folder(tmp_path / "v"))
    one = reprice_verify(table, summary, SHIPPED)
    two = reprice_verify(table, summary, scaled_profile(tmp_path / "x2", 2.0))
    assert one.pred_t_verify[0] == pytest.approx(CAL_VERIFY_S, rel=1e-9)
    assert two.pred_t_verify[0] == pytest.approx(CAL_VERIFY_S, rel=1e-9)
    assert two.attrs["layer_overhead_us"] < one.attrs["layer_overhead_us"]
    assert two.pred_t_verify[1] > one.pred_t_verify[1] * 1.1
    assert (one.meas_t_verify == table.meas_t_verify).all()


def test_older_runs_need_the_profile_they_ran_with(tmp_path):
    folder = validation_folder(tmp_path / "v")
    summary = json.loads((folder / "summary.json").read_text())
    del summary["calibration_verify_s"]
    (folder / "summary.json").write_text(json.dumps(summary))
    table, summary = load_validation(folder)
    with pytest.raises(SpeedplanInputError, match="calibration_verify_s"):
        reprice_verify(table, summary, SHIPPED)
    back = reprice_verify(table, summary, SHIPPED, ran_with=SHIPPED)  # the same profile: the stored overhead
    assert back.attrs["layer_overhead_us"] == pytest.approx(100.0)


def test_verify_errors_are_relative_to_the_measurement():
    t = pd.DataFrame({"pred_t_verify": [1.1, 0.8, 1.0], "meas_t_verify": [1.0, 1.0, 1.0]})
    e = verify_errors(t)
    assert e["verify_median_error"] == pytest.approx(0.1) and e["verify_median_ratio"] == pytest.approx(1.0)
    assert e["points"] == 3


def test_cli_reprice_prints_both_and_refuses_bad_folders(cli, tmp_path):
    folder = validation_folder(tmp_path / "v")
    proc = cli("validate", "--reprice", str(folder), "--hardware", str(SHIPPED))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith(f"profile {SHIPPED}: ")  # who measured the profile it reprices with
    lines = [line for line in lines if not line.startswith(("profile ", "warning: "))]
    assert len(lines) == 3 and lines[0].startswith("as run") and lines[1].startswith("repriced")
    assert lines[2].startswith("(as run: the host overhead fitted by least squares")
    assert "4 points" in lines[1]
    missing = cli("validate", "--reprice", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not a validation folder" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    bad = validation_folder(tmp_path / "bad")
    pd.read_csv(bad / "validation.csv").drop(columns="verify_tokens").to_csv(bad / "validation.csv", index=False)
    proc = cli("validate", "--reprice", str(bad))
    assert proc.returncode == 2 and "'verify_tokens'" in proc.stderr
    odd = validation_folder(tmp_path / "odd")
    table = pd.read_csv(odd / "validation.csv").astype({"batch": str})
    table.loc[1, "batch"] = "many"
    table.to_csv(odd / "validation.csv", index=False)
    proc = cli("validate", "--reprice", str(odd))
    assert proc.returncode == 2 and "'batch' needs positive numbers" in proc.stderr and "Traceback" not in proc.stderr
    (odd / "summary.json").write_text(json.dumps({"context": "long", "layer_overhead_us_measured": 1}))
    table.loc[1, "batch"] = "16"
    table.to_csv(odd / "validation.csv", index=False)
    proc = cli("validate", "--reprice", str(odd))
    assert proc.returncode == 2 and "'context' must be a number" in proc.stderr



def test_reprice_names_the_broken_file_and_warns_of_another_cpu(cli, tmp_path):
    """A truncated summary.json read 'not a validation folder (Expecting ...)'; a stored EPYC run
    repriced with a Xeon's profile said nothing of the CPUs (helper review, 2026-12-06)."""
    import json

    folder = validation_folder(tmp_path / "v")
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps({**summary, "cpu": "Some Other CPU (family 1, model 1)"}))
    proc = cli("validate", "--reprice", str(folder), "--hardware", str(SHIPPED))
    assert proc.returncode == 0, proc.stderr
    assert "warning: the stored run ran on 'Some Other CPU (family 1, model 1)'" in proc.stdout
    (folder / "summary.json").write_text(json.dumps(summary)[:40])
    broken = cli("validate", "--reprice", str(folder))
    assert broken.returncode == 2 and f"{folder / 'summary.json'}: malformed JSON" in broken.stderr
    (folder / "validation.csv").write_bytes(b"\x89PNG\x00\x01")
    broken = cli("validate", "--reprice", str(folder))
    assert broken.returncode == 2 and f"{folder / 'validation.csv'}: not a readable CSV" in broken.stderr
