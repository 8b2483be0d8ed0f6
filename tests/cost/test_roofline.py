"""The roofline fallback's claims: wave quantisation over SMs, the KV cache read once per
(sequence, KV head) with padded rows costing compute only, the tree mask on the N x N block
only, constants from the fit file with their sources, and a user's own preset JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from speedplan.cost.ops import CostModel, load_cost_model
from speedplan.cost.roofline import _attention_terms, attention_roofline, gemm_roofline, tree_block_us
from speedplan.errors import SpeedplanInputError
from speedplan.specs.fallback import fit_names, get_fit
from speedplan.specs.hardware import PRESET_DIR, get_hardware

ROOT = Path(__file__).resolve().parents[2]
H100 = get_hardware("h100-sxm")


def test_gemm_steps_when_tiles_cross_a_multiple_of_the_sm_count():
    """⌈M / tile_m⌉ · ⌈N / tile_n⌉ tiles on 132 SMs: one more tile past a full wave costs a
    whole wave in the compute-bound regime; inside a wave, M changes nothing."""
    g = get_fit(H100.roofline_fit).gemm_for("bf16")
    n = g.tile_n * H100.sm_count  # one row of tiles fills the machine exactly
    k = 16384
    m = np.array([1, g.tile_m, g.tile_m + 1, 2 * g.tile_m, 2 * g.tile_m + 1]) + 2048  # one M range, past 2048
    lat, compute = gemm_roofline(H100, m, n, k, "bf16")
    assert compute.all()
    assert lat[0] == pytest.approx(lat[1]) and lat[2] == pytest.approx(lat[3])  # same waves: same time
    assert lat[2] > lat[1] * 1.02 and lat[4] > lat[3] * 1.02  # one more wave
    waves = np.ceil(np.ceil(m / g.tile_m) * np.ceil(n / g.tile_n) / H100.sm_count)
    assert np.diff(waves).tolist() == [0, 1, 0, 1]


def test_kv_cache_is_read_once_and_padded_rows_cost_compute_only():
    """G = 8 query heads per KV head: q up to 16 fits one 128-row tile; at q = 17 a second tile
    doubles the compute but not the bytes read (the KV cache is read once)."""
    t_c, t_m, nbytes, ctas = _attention_terms(H100, 8, np.array([1, 16, 17]), 32768, 64, 8, 128, "bf16")
    assert t_c[0] == pytest.approx(t_c[1]) and t_c[2] == pytest.approx(2 * t_c[1])  # padded rows: compute
    kv_bytes = 8 * 8 * 32768 * 128 * 2 * 2
    assert nbytes[0] == pytest.approx(kv_bytes + 2 * 8 * 64 * 1 * 128 * 2)
    assert nbytes[2] - nbytes[0] == pytest.approx(2 * 8 * 64 * 16 * 128 * 2)  # only Q and O grow
    assert ctas.tolist() == [64, 64, 128]
    lat, compute = attention_roofline(H100, 8, np.array([1, 16, 17]), 32768, 64, 8, 128, "causal", "bf16")
    assert not compute[:2].any() and lat[1] == pytest.approx(lat[0], rel=0.01)  # one tile: the decode call's time
    assert lat[2] > lat[1]  # the second tile's compute, not a second read of 1 GB of KV cache


def test_tree_mask_costs_extra_on_the_n_by_n_block_only():
    nodes = np.array([16, 16, 16, 64])
    prefix = np.array([1024, 8192, 65536, 8192])
    chain, _ = attention_roofline(H100, 4, nodes, prefix + nodes, 32, 8, 128, "causal", "bf16")
    tree, _ = attention_roofline(H100, 4, nodes, prefix + nodes, 32, 8, 128, "tree", "bf16")
    extra = tree - chain
    assert extra[0] == pytest.approx(extra[1]) == pytest.approx(extra[2])  # the prefix length does not matter
    assert extra[3] > 3.9 * extra[0]  # N x N grows with N
    assert extra == pytest.approx(tree_block_us(H100, 4, nodes, 32, 8, 128, "bf16"))
    assert extra[2] < 0.01 * chain[2]  # small next to the prefix's attention


def test_fit_constants_state_what_they_were_fitted_to():
    doc = json.loads((ROOT / "speedplan/specs/presets/fallback/roofline-fit.json").read_text())
    assert {"all", "without-h100-sxm", "without-h200-sxm", "without-b200"} <= set(doc["fits"]) == set(fit_names())
    for name, f in doc["fits"].items():
        assert f["fitted_to"] and f["residual"], name
        if name != "all":
            assert f["held_out"] not in f["fitted_to"] and set(f["held_out_error"]) >= {"gemm_bf16", "decode_attention"}
    for path in PRESET_DIR.glob("*.json"):
        data = json.loads(path.read_text())
        if data.get("roofline_fit"):
            assert data["sm_count"]["source"] and data["sm_count"]["value"] > 0, path


def test_users_own_preset_json_is_priced_by_the_fallback(tmp_path):
    data = json.loads((PRESET_DIR / "mi300x.json").read_text())
    data["name"] = "my-gpu"
    path = tmp_path / "my-gpu.json"
    path.write_text(json.dumps(data))
    cost = load_cost_model(str(path))
    assert cost.hardware.name == "my-gpu" and cost.profile is None and cost.origin == "datasheet"
    assert cost.gemm([1, 4096], 4096, 4096, "bf16").source.tolist() == ["roofline", "roofline"]
    del data["sm_count"]
    path.write_text(json.dumps(data))
    with pytest.raises(SpeedplanInputError, match="sm_count"):
        load_cost_model(str(path))
    path.write_text("{")
    with pytest.raises(SpeedplanInputError, match="malformed JSON"):
        load_cost_model(str(path))
    data = json.loads((PRESET_DIR / "mi300x.json").read_text())  # absurd values (accepted until 2026-12-03)
    for key, value, word in (("compute_efficiency", 5, "in \\(0, 1\\]"), ("name", "", "name is empty; say what the device is called")):
        path.write_text(json.dumps({**data, key: value if key == "name" else {"value": value, "source": "x"}}))
        with pytest.raises(SpeedplanInputError, match=word):
            load_cost_model(str(path))


def test_sweep_takes_a_preset_file_and_bad_ones_exit_2(tmp_path):
    data = json.loads((PRESET_DIR / "mi300x.json").read_text())
    data["roofline_fit"] = "nope"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    r = subprocess.run([sys.executable, "-m", "speedplan.cli", "sweep", "--hardware", str(bad), "--out",
                        str(tmp_path / "r")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "roofline_fit" in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()


def test_fallback_alone_answers_where_nothing_was_measured():
    cost = CostModel(get_hardware("l40s"))
    op = cost.attention(8, 4, 4096, 32, 8, 128, "causal", "bf16")
    assert op.source.item() == "roofline" and not op.out_of_range.any()


@pytest.mark.parametrize("name", ["a100-80gb", "l40s", "h100-sxm", "h200-sxm", "b200", "mi300x"])
def test_the_fitted_gemm_roofline_never_beats_the_datasheet_peak(name):
    """The fit's compute efficiencies run far above 1 where the fitted chips' memory term explained a
    bucket (8.76 at M 256-512): on the A100 (ridge 153 FLOP/byte) GEMMs were priced at up to 321
    TFLOP/s, above its 312 TFLOP/s peak (a report walkthrough, 2026-12-05)."""
    from speedplan.specs.hardware import get_hardware

    hw = get_hardware(name)
    m = np.repeat(2.0 ** np.arange(0, 15), 3)
    n, k = np.tile([4096.0, 14336.0, 28672.0], 15), np.tile([4096.0, 4096.0, 8192.0], 15)
    for dtype in ("bf16", "fp8"):
        if not hw.peak_flops_per_s.get(dtype):
            continue
        lat, _ = gemm_roofline(hw, m, n, k, dtype)
        assert np.all(2 * m * n * k / (lat * 1e-6) <= hw.peak_flops_per_s[dtype] * (1 + 1e-9))
