"""The issue-6 campaign script runs end to end on CPU with a tiny grid (--dry-run)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def test_campaign_dry_run(tmp_path):
    r = subprocess.run(["bash", "microbench/campaign.sh", "--dry-run", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    measured = json.loads((tmp_path / "profile-measured" / "meta.json").read_text())
    derived = json.loads((tmp_path / "profile-derived" / "meta.json").read_text())
    assert measured["complete"] is True and measured["origin"] == "measured"
    assert derived["origin"] == "derived" and derived["hardware_preset"] == "cpu-local"  # on a GPU: h100-sxm
    check = json.loads((tmp_path / "profile-check.json").read_text())
    assert check["points"] > 20 and 0 <= check["median_error"] <= check["p90_error"]
    assert "campaign done" in r.stdout
    assert r.stdout.count("leave-one-out median") == 1  # step 4 prints its text and saves the JSON in one run
    # step 4: the runtime's verify step timed against the profile's prediction
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["points"] == 2 * 3 * 2  # B {1,2} x D {0,1,3} x context {64,128}
    for key in ("step_time_median_error", "step_time_p90_error", "al_median_error", "speedup_median_error", "max_regret"):
        assert key in summary
    assert 0 <= summary["step_time_median_error"] < 10
    # step 5: priced again from the profile just measured (first) and the shipped one
    assert summary["hardware"] == str(tmp_path / "profile-measured")
    assert set(summary["by_profile"]) == {str(tmp_path / "profile-measured"), "cpu-local"}
    assert summary["by_profile"]["cpu-local"]["step_time_median_error"] != summary["step_time_median_error"]
    table = (tmp_path / "verify_timing.csv").read_text().splitlines()
    assert table[0] == "batch,draft_len,context,pred_t_verify,meas_t_verify,mode,pred_t_verify_cpu_local" and len(table) == 13


def test_gpu_grid_measures_each_elementwise_point_once():
    """Two models' grids can meet at one (op, dtype, numel) with different hidden sizes; a profile
    looks elementwise ops up by bytes, so the grid keeps one (on the H200 both were measured and
    the profile would not load)."""
    import collections

    from speedplan.profile.grid import build_grid

    grid = build_grid(["gpu"], "cuda", dtypes=["bf16", "fp16"])
    counts = collections.Counter((p.op, p.dtype, p.numel) for p in grid.elementwise)
    assert counts and max(counts.values()) == 1
    assert {p.hidden for p in grid.elementwise if p.numel == 2**27} == {4096}  # the first (smaller) kept


def test_verify_timing_prices_the_slots_the_step_reads():
    """On CUDA the step attends over its whole cache (context + q + 1 rounded up to 16 slots);
    on CPU over the prefix and the new tokens."""
    from speedplan.validate.gpu_timing import attended

    assert attended(8192, 2, "cuda") == 8208 and attended(8192, 2, "cpu") == 8194
    assert attended(1024, 15, "cuda") == 1040


def test_reprice_bad_input_is_one_line_and_exit_2(tmp_path):
    """A folder without a timing table, or an unknown --hardware: one line, exit 2, nothing written."""
    import shutil
    import sys

    missing = subprocess.run([sys.executable, "-m", "speedplan.validate.gpu_timing", "--reprice", str(tmp_path / "none"),
                              "--hardware", "h200-sxm"], cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 2 and "no verify_timing.csv" in missing.stderr and "Traceback" not in missing.stderr
    folder = tmp_path / "v"
    shutil.copytree(ROOT / "reports" / "validation-h200", folder, ignore=shutil.ignore_patterns("profile-*"))
    before = (folder / "summary.json").read_text()
    bad = subprocess.run([sys.executable, "-m", "speedplan.validate.gpu_timing", "--reprice", str(folder),
                          "--hardware", "tpu-v9"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown hardware" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert (folder / "summary.json").read_text() == before


def test_a_cut_short_measuring_run_reprices_on_its_own_device(tmp_path, monkeypatch):
    """The measuring run writes model, dtype and device before it measures, so --reprice of a
    run cut short (its table so far, no results) prices on that device, not on a default of cuda."""
    import pandas as pd

    import speedplan.validate.gpu_timing as gt

    real_run = gt.run

    def cut_short(grid, hardware, device, progress, save):
        def save_then_stop(table):
            save(table)
            if len(table) == 3:
                raise KeyboardInterrupt  # the run is killed after three points
        return real_run(grid, hardware, device, progress=progress, save=save_then_stop)

    monkeypatch.setattr(gt, "run", cut_short)
    with pytest.raises(KeyboardInterrupt):
        gt.main(["--dry-run", "--out", str(tmp_path)])
    monkeypatch.setattr(gt, "run", real_run)
    left = json.loads((tmp_path / "summary.json").read_text())
    assert left["device"] == "cpu" and left["points"] == 0
    assert gt.main(["--reprice", str(tmp_path), "--hardware", "cpu-local"]) == 0  # --device left at its default, cuda
    again = json.loads((tmp_path / "summary.json").read_text())
    assert again["device"] == "cpu" and again["points"] == 3 and again["model"] == gt.DRY_GRID.model
    table = pd.read_csv(tmp_path / "verify_timing.csv")
    on_cpu = gt.predict(table, gt.DRY_GRID.model, gt.DRY_GRID.dtype, "cpu-local", "cpu")[0]
    assert table["pred_t_verify"].tolist() == pytest.approx(on_cpu.tolist())  # priced on the CPU's spans
