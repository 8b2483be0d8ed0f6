"""speedplan.profile: validation, lookup rules, leave-one-out check of measured (GPU-style) profiles."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from speedplan.cost.ops import load_cost_model
from speedplan.errors import SpeedplanInputError
from speedplan.specs.hardware import get_hardware
from speedplan.profile.load import load_profile
from speedplan.profile.tools import leave_one_out
from speedplan.cost.roofline import attention_sol_us, elementwise_sol_us, gemm_sol_us

ROOT = Path(__file__).resolve().parents[2]
META = {"device_name": "synthetic", "date": "2026-01-01T00:00:00+00:00", "microbench_version": "test",
        "grid": ["synthetic"], "versions": {}, "complete": True, "origin": "measured"}


def write_csv(path: Path, rows: list[dict]) -> None:
    cols = list(rows[0])
    path.write_text(",".join(cols) + "\n" + "".join(",".join(str(r[c]) for c in cols) + "\n" for r in rows))


def synthetic_profile(folder: Path, preset: str = "h100-sxm", dtype: str = "bf16", gemm_factor=lambda m: 1.25) -> Path:
    """A 'measured' profile whose latencies are the preset's speed of light times a known factor
    (a constant utilisation: what the lookup interpolates)."""
    hw = get_hardware(preset)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").write_text(json.dumps({**META, "hardware_preset": preset}))
    ms = [1, 2, 4, 8, 16, 32, 63, 64, 65, 127, 128, 129, 256, 511, 512, 513, 1024, 2048]
    rows = [{"m": m, "n": n, "k": k, "dtype": dtype,
             "latency_us": float(gemm_sol_us(hw, m, n, k, dtype)) * gemm_factor(m)}
            for n, k in [(4096, 4096), (14336, 4096), (4096, 14336)] for m in ms]
    write_csv(folder / "gemm.csv", rows)
    rows = []
    for mask in ("causal", "tree"):
        for b in (1, 4, 16):
            for q in (1, 2, 4, 8):
                for kv in (1024, 4096, 16384):
                    if mask == "tree" and q == 1:
                        continue
                    lat = float(attention_sol_us(hw, b, q, kv, 32, 8, 128, dtype)) * 1.5
                    rows.append({"batch": b, "q_len": q, "kv_len": kv, "num_heads": 32, "num_kv_heads": 8,
                                 "head_dim": 128, "mask": mask, "dtype": dtype,
                                 "latency_us": lat * (1.4 if mask == "tree" else 1.0)})
    write_csv(folder / "attention.csv", rows)
    write_csv(folder / "elementwise.csv", [
        {"op": "scale", "numel": n, "hidden": 4096, "dtype": dtype, "nbytes": 4 * n,
         "latency_us": float(elementwise_sol_us(hw, 4 * n)) * 2} for n in (4096, 65536, 2**20, 2**24)])
    write_csv(folder / "floors.csv", [{"op": "launch", "graph": 0, "dtype": dtype, "latency_us": 5.0},
                                      {"op": "launch", "graph": 1, "dtype": dtype, "latency_us": 2.5}])
    return folder


def test_exact_hits_come_back_as_measured(tmp_path):
    p = load_profile(synthetic_profile(tmp_path / "p"))
    m = np.array([1, 64, 65, 512])
    lat, how = p.gemm_lookup(m, 4096, 4096, "bf16")
    sol = gemm_sol_us(get_hardware("h100-sxm"), m, 4096, 4096, "bf16")
    assert np.allclose(lat, sol * 1.25, rtol=1e-12) and (how == "measured").all()  # the CSV's values
    assert p.origin == "measured" and p.source_label == "profile"


def test_hardware_takes_measured_floor_not_a_whole_call_tree_ratio(tmp_path):
    """The graph-replay floor replaces the preset's; the tree/causal ratio of whole calls is not
    the N x N block's penalty (the preset's stays; measured tree rows answer tree queries)."""
    hw = load_profile(synthetic_profile(tmp_path / "p")).hardware
    assert hw.kernel_floor_us == 2.5  # graph-replay floor preferred over the eager 5.0
    assert hw.tree_mask_penalty == get_hardware("h100-sxm").tree_mask_penalty
    assert hw.origin == "profile" and "kernel_floor_us" in hw.notes


def test_utilisation_is_interpolated_between_measured_neighbours(tmp_path):
    """Utilisation u = SOL / latency, log u linear in log M: halfway (in log M) between two
    measured points, u is their geometric mean; the latency is this point's SOL over it."""
    hw = get_hardware("h100-sxm")
    folder = synthetic_profile(tmp_path / "p", gemm_factor=lambda m: {256: 2.0, 511: 1.0}.get(m, 1.25))
    p = load_profile(folder)
    m = np.sqrt(256 * 511)
    lat, how = p.gemm_lookup(np.array([m]), 4096, 4096, "bf16")
    u = np.sqrt((1 / 2.0) * (1 / 1.0))
    assert how[0] == "interpolated"
    assert lat[0] == pytest.approx(gemm_sol_us(hw, m, 4096, 4096, "bf16") / u, rel=1e-9)


def test_interpolation_respects_tile_steps(tmp_path):
    """Compute-bound M between 513 and 1024 (measured): within one 64-row tile (513..576) the
    answer stays on the step's level instead of following a line from 513 to 1024."""
    p = load_profile(synthetic_profile(tmp_path / "p"))
    m = np.array([530.0, 560.0, 576.0, 600.0])
    lat, how = p.gemm_lookup(m, 14336, 4096, "bf16")
    assert (how == "interpolated").all()
    assert np.ptp(lat[:3]) / lat[0] < 0.005 and lat[3] > lat[2] * 1.05  # flat within a tile, step at 577
    ends, _ = p.gemm_lookup(np.array([513.0, 1024.0]), 14336, 4096, "bf16")
    straight = ends[0] + (ends[1] - ends[0]) * (m[:3] - 513) / (1024 - 513)
    assert abs(straight[0] - lat[0]) / lat[0] > 0.02 or abs(straight[1] - lat[1]) / lat[1] > 0.02


def test_shapes_between_measured_ones_interpolate_and_outside_is_marked(tmp_path):
    """(8192, 4096) lies between measured shapes along N; (8192, 8192) needs the corner
    (14336, 14336) that was not measured (its nearest shape stands in: transferred); M beyond
    the measured range and K below it are extrapolated."""
    hw = get_hardware("h100-sxm")
    p = load_profile(synthetic_profile(tmp_path / "p"))
    m = np.array([8.0, 8.0, 4096.0, 8.0])
    n = np.array([8192, 8192, 8192, 8192])
    k = np.array([4096, 8192, 4096, 2048])
    lat, how = p.gemm_lookup(m, n, k, "bf16")
    assert how.tolist() == ["interpolated", "transferred", "extrapolated", "extrapolated"]
    assert np.allclose(lat, gemm_sol_us(hw, m, n, k, "bf16") * 1.25)  # the one utilisation carried everywhere
    lat, how = p.attention_lookup(np.array([2, 64]), np.array([3, 8]), np.array([2048, 4096]), 32, 8, 128,
                                  np.array(["tree", "causal"]), "bf16")
    assert how.tolist() == ["interpolated", "extrapolated"]
    corners, _ = p.attention_lookup(np.array([1, 1, 4, 4] * 2), np.array([2, 4] * 4), np.array([1024] * 4 + [4096] * 4),
                                    32, 8, 128, "tree", "bf16")
    assert corners.min() < lat[0] < corners.max()  # between the measured batches, q_lens and kv_lens


def test_unmeasured_dtype_is_nan_and_cost_model_falls_back(tmp_path):
    folder = synthetic_profile(tmp_path / "p")
    p = load_profile(folder)
    assert np.isnan(p.gemm_latency_us(np.array([4.0]), 4096, 4096, "fp8")).all()
    cost = load_cost_model(folder)
    assert cost.gemm([4, 4], 4096, 4096, "bf16").source.tolist() == ["profile", "profile"]
    assert cost.gemm([4], 4096, 4096, "fp8").source.tolist() == ["roofline"]


def test_lookup_of_ten_thousand_points_is_fast(tmp_path):
    p = load_profile(synthetic_profile(tmp_path / "p"))
    rng = np.random.default_rng(0)
    n = 10_000
    m = rng.integers(1, 4096, n).astype(float)
    t0 = time.perf_counter()
    g = p.gemm_latency_us(m, rng.choice([4096, 6144, 14336], n), 4096, "bf16")
    a = p.attention_latency_us(rng.integers(1, 256, n), rng.integers(1, 16, n), rng.integers(512, 32768, n),
                               32, 8, 128, rng.choice(["causal", "tree"], n), "bf16")
    e = p.elementwise_latency_us(rng.integers(1000, 10**8, n).astype(float), "bf16")
    elapsed = time.perf_counter() - t0
    assert np.isfinite(g).all() and np.isfinite(a).all() and np.isfinite(e).all()
    assert elapsed < 0.3, f"{elapsed:.3f} s"


def test_leave_one_out_is_small_on_a_smooth_profile(tmp_path):
    result = leave_one_out(synthetic_profile(tmp_path / "p"))
    assert result["points"] > 100, result
    gemm = result["families"]["gemm"]  # efficiency is smooth along M here: interpolation recovers it
    assert result["median_error"] < 0.01 and gemm["median_error"] < 0.01 and gemm["p90_error"] < 0.05
    shared = synthetic_profile(tmp_path / "q", gemm_factor=lambda m: 1.0 + (m % 3))  # steps in every shape
    assert leave_one_out(shared)["families"]["gemm"]["median_error"] < 0.01  # carried over from the other shape
    gemm = tmp_path / "q" / "gemm.csv"  # the same steps in one shape only: LOO cannot see them
    rows = list(csv.DictReader(gemm.open()))
    for r in rows:
        if r["n"] == "14336":
            r["latency_us"] = float(r["latency_us"]) / (1.0 + int(r["m"]) % 3)
    write_csv(gemm, rows)
    assert leave_one_out(tmp_path / "q")["families"]["gemm"]["median_error"] > 0.1


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "gemm.csv").write_text("m,n,dtype,latency_us\n1,2,bf16,3\n"), "gemm.csv: missing column 'k'"),
    (lambda f: (f / "gemm.csv").write_text("m,n,k,dtype,latency_us\n1,2,3,bf16,-4\n"), "gemm.csv: column 'latency_us' line 2"),
    (lambda f: (f / "gemm.csv").write_text("m,n,k,dtype,latency_us\n1,2,1e300,bf16,4\n"), "column 'k' line 2: '1e.300' is not a positive whole number up to 1e.15"),
    (lambda f: (f / "attention.csv").write_text((f / "attention.csv").read_text().replace("tree", "star", 1)), "attention.csv: column 'mask'"),
    (lambda f: (f / "attention.csv").write_text((f / "attention.csv").read_text().replace(",32,8,", ",32,6,", 1)),
     "attention.csv: column 'num_kv_heads' line 2: 6 does not divide num_heads 32"),
    (lambda f: (f / "meta.json").write_text(json.dumps({**META, "hardware_preset": "h100-sxm", "complete": False})), "'complete' is false"),
    (lambda f: (f / "meta.json").write_text(json.dumps({**META, "hardware_preset": "nope"})), "field 'hardware_preset'"),
    (lambda f: (f / "gemm.csv").unlink(), "gemm.csv: missing"),
    (lambda f: (f / "meta.json").write_text("{"), "meta.json: malformed JSON"),
    (lambda f: (f / "moe.csv").write_text("tokens,hidden,inter,experts,topk,tp,ep,dtype,distribution,latency_us\n"
                                          "1,2048,768,128,8,1,1,bf16,balanced,oops\n"), "moe.csv: column 'latency_us' line 2"),
])
def test_malformed_profiles_are_refused_naming_file_and_column(tmp_path, damage, message):
    folder = synthetic_profile(tmp_path / "p")
    damage(folder)
    with pytest.raises(SpeedplanInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_profile(folder)


def test_one_point_measured_twice_with_two_latencies_is_refused_naming_both_lines(tmp_path):
    """Which of two latencies of one point a grid holds would depend on row order: the first
    lookup that builds the grid, and `profile check`, refuse it naming both lines. The same
    latency twice (a file merged from two copies) is kept."""
    folder = synthetic_profile(tmp_path / "p")
    gemm = folder / "gemm.csv"
    lines = gemm.read_text().splitlines()
    gemm.write_text("\n".join(lines + [lines[1]]) + "\n")  # line 2 again, same latency
    assert load_profile(folder).gemm_lookup(np.array([1]), 4096, 4096, "bf16")[1][0] == "measured"
    m, n, k, dtype, lat = lines[1].split(",")
    gemm.write_text("\n".join(lines + [lines[1], f"{m},{n},{k},{dtype},{2 * float(lat)}"]) + "\n")
    message = (f"gemm.csv: lines 2 and {len(lines) + 2} measure one point (m=1, n=4096, k=4096, dtype=bf16) with "
               f"different latency_us ({float(lat):g} and {2 * float(lat):g}); keep one")
    with pytest.raises(SpeedplanInputError, match=re.escape(message)):
        load_profile(folder).gemm_lookup(8, 4096, 4096, "bf16")
    with pytest.raises(SpeedplanInputError, match=re.escape(message)):
        leave_one_out(folder)
    r = subprocess.run([sys.executable, "-m", "speedplan.cli", "sweep", "--hardware", str(folder), "--out",
                        str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_moe_series_interpolate_in_log_tokens_and_scale_beyond_the_largest(tmp_path):
    """One fused-MoE series measured at 1, 4 and 16 tokens: a node comes back as measured, 2
    tokens as the geometric mean of 1 and 4 (a power law between nodes), 64 tokens as the
    16-token latency × 4 (compute-bound beyond the table, marked), another TP as NaN."""
    folder = synthetic_profile(tmp_path / "p")
    key = {"hidden": 2048, "inter": 768, "experts": 128, "topk": 8, "tp": 4, "ep": 1, "dtype": "bf16"}
    write_csv(folder / "moe.csv", [{"tokens": t, **key, "distribution": d, "latency_us": lat}
                                   for t, lat in ((1, 20.0), (4, 45.0), (16, 120.0))
                                   for d, lat in (("balanced", lat), ("power_law_1.01", 3 * lat))])
    p = load_profile(folder)
    args = [key[k] for k in ("hidden", "inter", "experts", "topk", "tp", "ep", "dtype")]
    lat, how = p.moe_lookup(np.array([1.0, 2.0, 16.0, 64.0]), *args)
    assert lat == pytest.approx([20.0, (20.0 * 45.0) ** 0.5, 120.0, 480.0], rel=1e-12)
    assert list(how) == ["measured", "interpolated", "measured", "extrapolated"]
    args[4] = 8
    lat, how = p.moe_lookup(np.array([1.0]), *args)
    assert np.isnan(lat).all() and list(how) == ["none"]
    lat, outside = load_cost_model(folder).moe(np.array([4.0, 64.0]), *[key[k] for k in key])
    assert lat == pytest.approx([45.0, 480.0], rel=1e-12) and list(outside) == [False, True]
