"""speedplan.profile: roofline and derived profiles, `speedplan profile check`, CPU-style
profiles (affine latencies, slow spells, elementwise floors) and who measured a profile."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.errors import SpeedplanInputError
from speedplan.specs.hardware import get_hardware
from speedplan.profile.dense import ANSWERS
from speedplan.profile.load import load_profile
from speedplan.profile.tools import derive_profile, leave_one_out, write_roofline_profile
from speedplan.cost.roofline import gemm_roofline
from tests.profile.test_profile import META, ROOT, synthetic_profile, write_csv

def test_roofline_profile_is_marked_and_answers_the_roofline(tmp_path):
    from microbench.grid import tiny_grid

    out = write_roofline_profile("h200-sxm", tiny_grid("bf16"), tmp_path / "h200")
    p = load_profile(out)
    assert (p.origin, p.source_label) == ("datasheet-roofline", "roofline")
    assert "not measured" in (out / "README.md").read_text()
    m = np.array([1.0, 3.0, 100.0])
    assert np.allclose(p.gemm_latency_us(m, 256, 128, "bf16"), gemm_roofline(get_hardware("h200-sxm"), m, 256, 128, "bf16")[0])


def test_derived_profile_scales_by_roofline_ratio(tmp_path):
    src = synthetic_profile(tmp_path / "h200", preset="h200-sxm")
    out = derive_profile(src, "h100-sxm", tmp_path / "h100")
    p, s = load_profile(out), load_profile(src)
    assert (p.origin, p.source_label, p.hardware.name, p.hardware.origin) == ("derived", "profile", "h100-sxm", "derived")
    # not the source's "measured"; the source's own label says who measured it (a synthetic bench folder)
    assert p.origin_label == f"derived by roofline ratio from {s.origin_label} h200-sxm"
    assert s.origin_label.startswith("measured (speedplan bench, ") and s.origin_label.endswith(")")
    ratio = p.gemm_latency_us(np.array([1.0]), 4096, 4096, "bf16") / s.gemm_latency_us(np.array([1.0]), 4096, 4096, "bf16")
    assert ratio[0] == pytest.approx(4.8 / 3.35, rel=0.01)  # memory-bound: bandwidth ratio
    big = p.gemm_latency_us(np.array([512.0]), 14336, 4096, "bf16") / s.gemm_latency_us(np.array([512.0]), 14336, 4096, "bf16")
    assert big[0] == pytest.approx(1.0, rel=0.01)  # compute-bound: same peak


def test_a_cpu_profile_is_not_derived_for_a_gpu_nor_a_gpu_one_for_a_cpu(tmp_path):
    """derive carries each shape's efficiency to a sibling chip; a CPU's kernels are not a GPU's."""
    with pytest.raises(SpeedplanInputError, match="a CPU profile cannot be derived for h100-sxm"):
        derive_profile(ROOT / "speedplan/data/profiles/cpu-local", "h100-sxm", tmp_path / "a")
    with pytest.raises(SpeedplanInputError, match="GPU profile cannot be derived for cpu-local"):
        derive_profile(synthetic_profile(tmp_path / "h200", preset="h200-sxm"), "cpu-local", tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cli_profile_check_json(tmp_path):
    folder = synthetic_profile(tmp_path / "p")
    result = CliRunner().invoke(app, ["profile", "check", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {"median_error", "p90_error", "points"} <= set(data) and data["points"] > 100
    # --json-out: the same result in a file, the text on the terminal (one leave-one-out, not two)
    saved = tmp_path / "sub" / "check.json"
    result = CliRunner().invoke(app, ["profile", "check", str(folder), "--json-out", str(saved)])
    assert result.exit_code == 0, result.output
    assert json.loads(saved.read_text()) == data
    assert result.output.startswith(f"{folder} (") and "leave-one-out median" in result.output
    refused = CliRunner().invoke(app, ["profile", "check", str(folder), "--json-out", str(tmp_path)])
    assert isinstance(refused.exception, SpeedplanInputError) and "--json-out" in str(refused.exception)


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    folder = synthetic_profile(tmp_path / "p")
    (folder / "gemm.csv").write_text("m,n\n")
    for args in (["profile", "check", str(folder)],
                 ["bench", "--device", "cpu", "--grid", "model:no-such-model", "--out", str(tmp_path / "new")],
                 ["bench", "--device", "cpu", "--threads", "0", "--out", str(tmp_path / "new")]):
        r = subprocess.run([sys.executable, "-m", "speedplan.cli", *args], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "new").exists()  # no half-written output folder


def affine_cpu_profile(folder: Path) -> Path:
    """A 'measured' cpu-local profile whose latencies are a fixed cost plus a slope (what CPU
    kernels look like: latency is not proportional to the roofline), on the quick grid's axes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").write_text(json.dumps({**META, "hardware_preset": "cpu-local", "device_name": "affine"}))
    ms = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128]
    write_csv(folder / "gemm.csv", [
        {"m": m, "n": n, "k": k, "dtype": "fp32", "latency_us": 20 + n * k * 4 / 16e3 * (1 + 0.02 * m)}
        for n, k in [(576, 576), (1536, 576), (576, 1536)] for m in ms])
    rows = []
    for mask in ("causal", "tree"):
        for b in (1, 2, 4, 8, 16):
            for q in range(1, 9):
                for kv in (64, 128, 256, 512, 1024, 2048):
                    if mask == "tree" and q == 1:
                        continue
                    lat = (15 + 4 * q) * b ** 0.9 + 0.05 * b * kv * (1 + 0.3 * q)
                    rows.append({"batch": b, "q_len": q, "kv_len": kv, "num_heads": 9, "num_kv_heads": 3,
                                 "head_dim": 64, "mask": mask, "dtype": "fp32", "latency_us": lat})
    write_csv(folder / "attention.csv", rows)
    tokens = [1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512]
    write_csv(folder / "elementwise.csv", [
        {"op": op, "numel": 576 * t, "hidden": 576, "dtype": "fp32", "nbytes": 8 * 576 * t,
         "latency_us": c + 8 * 576 * t / 10e3} for op, c in (("rmsnorm", 9.0), ("scale", 2.5)) for t in tokens])
    write_csv(folder / "floors.csv", [{"op": "launch", "graph": 0, "dtype": "fp32", "latency_us": 2.4}])
    return folder


def test_leave_one_out_reproduces_a_smooth_cpu_profile_within_one_percent(tmp_path):
    """Fixed cost + slope latencies (not proportional to the roofline, as CPU kernels are) on
    the CPU quick grid's axes: leave-one-out stays well under 1% (p90 under 1%), where
    measured CPU profiles show 1-5% median: what the check reports there is measurement
    noise, not interpolation error. Snapping to the nearest grid point would be >10% off."""
    folder = affine_cpu_profile(tmp_path / "p")
    result = leave_one_out(folder)
    assert result["median_error"] < 0.005 and result["p90_error"] < 0.01, result
    families = result["families"]
    assert families["gemm"]["median_error"] < 0.005 and families["gemm"]["p90_error"] < 0.01, families["gemm"]
    assert families["attention"]["median_error"] < 0.005 and families["attention"]["p90_error"] < 0.005, families
    assert families["elementwise"]["median_error"] < 0.01, families["elementwise"]
    p = load_profile(folder)
    lat, how = p.attention_lookup(np.array([3, 6]), np.array([3, 5]), np.array([181, 1448]), 9, 3, 64, "causal", "fp32")
    truth = (15 + 4 * np.array([3, 5])) * np.array([3, 6]) ** 0.9 + 0.05 * np.array([3, 6]) * np.array([181, 1448]) * (
        1 + 0.3 * np.array([3, 5]))
    assert (how == "interpolated").all() and np.allclose(lat, truth, rtol=0.03), (lat, truth)
    low, _ = p.attention_lookup(np.array([2, 4]), np.array([3, 5]), np.array([128, 1024]), 9, 3, 64, "causal", "fp32")
    high, _ = p.attention_lookup(np.array([4, 8]), np.array([3, 5]), np.array([256, 2048]), 9, 3, 64, "causal", "fp32")
    assert (low < 0.9 * truth).all() and (high > 1.1 * truth).all()  # measured corners are far off: it interpolates


def test_a_block_shifted_by_a_slow_spell_is_predicted_from_its_own_level(tmp_path):
    """Each (batch, kv_len) block of the affine profile moved by its own factor (0.75-1.35, what a
    slow spell does to a block that microbench measures together): a left-out point takes
    its block's level from the block's other points and its shape along kv_len from its own
    series, so leave-one-out stays near the unshifted profile's error; interpolating along
    kv_len alone would carry the neighbouring blocks' factors (median 17%, p90 38% here)."""
    folder = affine_cpu_profile(tmp_path / "p")
    path = folder / "attention.csv"
    rows = list(csv.DictReader(path.open()))
    rng = np.random.default_rng(0)
    factor = {(b, kv): rng.uniform(0.75, 1.35) for b in (1, 2, 4, 8, 16) for kv in (64, 128, 256, 512, 1024, 2048)}
    for r in rows:
        r["latency_us"] = float(r["latency_us"]) * factor[(int(r["batch"]), int(r["kv_len"]))]
    write_csv(path, rows)
    attention = leave_one_out(folder)["families"]["attention"]
    assert attention["median_error"] < 0.005 and attention["p90_error"] < 0.005, attention
    p = load_profile(folder)  # measured points still come back as measured
    lat, _ = p.attention_lookup(np.array([2.0]), np.array([3.0]), np.array([512.0]), 9, 3, 64, "tree", "fp32")
    measured = [float(r["latency_us"]) for r in rows if (r["batch"], r["q_len"], r["kv_len"], r["mask"]) == ("2", "3", "512", "tree")]
    assert lat[0] == pytest.approx(measured[0])


def test_elementwise_below_the_smallest_size_keeps_its_latency(tmp_path):
    p = load_profile(affine_cpu_profile(tmp_path / "p"))
    small = 8 * 576.0  # the smallest measured size, in bytes
    lat, how = p.table("elementwise").lookup(np.array([small / 8, small, small * 1e4]), "fp32", op="scale")
    assert lat[0] == pytest.approx(lat[1]) and ANSWERS[how[0]] == "extrapolated"  # the fixed cost holds below
    assert lat[2] > 100 * lat[1]  # above, the bandwidth holds


def test_a_table_profile_check_cannot_check_is_named(tmp_path):
    """A gemm.csv of one row dropped out of `profile check` in silence (an audit of 2026-12-04)."""
    import shutil

    from speedplan.profile.tools import leave_one_out

    folder = tmp_path / "p"
    shutil.copytree(Path(__file__).resolve().parents[2] / "speedplan" / "data" / "profiles" / "cpu-local", folder)
    lines = (folder / "gemm.csv").read_text().splitlines()
    (folder / "gemm.csv").write_text("\n".join(lines[:2]) + "\n")
    result = leave_one_out(folder)
    assert "gemm" not in result["families"] and "not checked: gemm" in result["note"]


def test_a_profile_is_derived_for_a_chip_of_its_own_vendor_only(tmp_path):
    """profile derive took an H100 profile to an MI300X as a "sibling chip" (audit of 2026-12-04)."""
    from speedplan.errors import SpeedplanInputError
    from speedplan.profile.tools import derive_profile

    h100 = Path(__file__).resolve().parents[2] / "speedplan" / "data" / "profiles" / "h100-sxm"
    with pytest.raises(SpeedplanInputError, match=r"an NVIDIA GPU profile cannot be derived for mi300x \(an AMD GPU\)"):
        derive_profile(h100, "mi300x", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_bench_profile_says_who_measured_it(tmp_path):
    """`--hardware cpu-local` printed "measured cpu-local": a `speedplan bench` folder has no
    origin_label, so its label is built from its meta (an audit of 2026-12-04)."""
    from speedplan.cost.ops import PROFILE_DIR, latency_origin
    from speedplan.profile.load import origin_label

    meta = json.loads((PROFILE_DIR / "cpu-local" / "meta.json").read_text())
    assert "origin_label" not in meta
    assert origin_label(meta) == f"measured (speedplan bench, {meta['device_name']}, {meta['date'][:10]})"
    assert load_profile(PROFILE_DIR / "cpu-local").origin_label == origin_label(meta)
    assert latency_origin("cpu-local").startswith(origin_label(meta))
    assert origin_label({"origin": "measured", "origin_label": "measured (AIConfigurator 0.12, vLLM 0.24 kernels)"}
                        ).startswith("measured (AIConfigurator")
    assert origin_label({"origin": "datasheet-roofline"}) == "datasheet-roofline"
    # an import without a label is not credited to speedplan bench
    assert origin_label({"origin": "measured", "source": {"package": "x"}, "device_name": "H100"}) == "measured"
