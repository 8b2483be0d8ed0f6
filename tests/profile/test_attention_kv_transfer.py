"""Attention transferred across KV heads reads the nearest configuration at the equivalent
batch b · kvh / kvh_c (`speedplan.profile.attention`; evidence:
benchmarks/bench_attention_kv_heads.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from speedplan.cost.ops import load_cost_model
from speedplan.cost.roofline import attention_sol_us, prefill_sol_us
from speedplan.profile.load import load_profile
from speedplan.specs.hardware import get_hardware

PROFILES = Path(__file__).resolve().parents[2] / "speedplan" / "data" / "profiles"
GPUS = ("h100-sxm", "h200-sxm", "b200")
KV = (512, 4096, 32768)


@pytest.fixture(scope="module", params=GPUS)
def profile(request):
    return load_profile(PROFILES / request.param)


def test_mha_decode_is_priced_near_its_kv_bandwidth():
    """Phi-3-mini (32 heads, 32 KV heads, head_dim 96) at batch 1, 4096 tokens: 50.3 MB of KV.
    Read at one 8-KV-head configuration's batch-1 utilisation it cost 50.6 µs on H100 (3.4x
    the 15.0 µs bandwidth ideal); at the equivalent batch 4 (32 (sequence, KV head) problems,
    as the measured kernels at batch × KV heads = 32 run) it costs ~30 µs."""
    for gpu, before in (("h100-sxm", 50.55), ("h200-sxm", 47.90), ("b200", 32.00)):
        cm = load_cost_model(gpu)
        hw = get_hardware(gpu)
        ideal = 32 * 96 * 2 * 2 * 4096 / hw.hbm_bytes_per_s * 1e6
        lat = float(cm.attention(1, 1, 4096, 32, 32, 96, "causal", "bf16").latency_us)
        assert lat < before / 1.5, gpu
        assert ideal < lat < 2.5 * ideal, (gpu, lat, ideal)
        # more KV heads still cost more, and no more than in proportion
        lats = [float(cm.attention(1, 1, 4096, 32, k, 96, "causal", "bf16").latency_us) for k in (8, 16, 32)]
        assert lats[0] < lats[1] < lats[2] <= 4 * lats[0] + 1e-9


def test_an_exact_configuration_is_answered_as_measured(profile):
    """Llama-3.1-8B's own shape (32, 8, 128) is measured: the rule leaves it alone."""
    rows = profile.tables["attention"]
    sel = ((np.asarray(rows["num_heads"]) == 32) & (np.asarray(rows["num_kv_heads"]) == 8)
           & (np.asarray(rows["head_dim"]) == 128) & (np.asarray(rows["dtype"]).astype(str) == "bf16"))
    b, kv, lat = (np.asarray(rows[c], float)[sel] for c in ("batch", "kv_len", "latency_us"))
    got, how = profile.attention_lookup(b, 1, kv, 32, 8, 128, "causal", "bf16")
    np.testing.assert_allclose(got, lat, rtol=1e-9)
    assert set(how.tolist()) == {"measured"}


@pytest.mark.parametrize("shape, source", [((64, 16, 128), (32, 8, 128)), ((48, 16, 96), (24, 8, 128))])
def test_equivalent_batch_consistency(profile, shape, source):
    """kvh = 16 at batch 1 is the kvh_c = 8 configuration at batch 2, scaled by the ratio of
    their speeds of light (the same G; head_dim 96 against 128 for the second)."""
    hw = profile.hardware
    for kv in KV:
        lat, how = profile.attention_lookup(1, 1, kv, *shape, "causal", "bf16")
        ref, ref_how = profile.attention_lookup(2, 1, kv, *source, "causal", "bf16")
        scale = attention_sol_us(hw, 1, 1, kv, *shape, "bf16") / attention_sol_us(hw, 2, 1, kv, *source, "bf16")
        assert float(lat) == pytest.approx(float(ref) * float(scale), rel=1e-9)
        assert str(how) == "transferred" and str(ref_how) == "measured"
        p_lat, _ = profile.prefill_lookup(1, kv // 8, *shape, "bf16")
        p_ref, _ = profile.prefill_lookup(2, kv // 8, *source, "bf16")
        p_scale = prefill_sol_us(hw, 1, kv // 8, *shape, "bf16") / prefill_sol_us(hw, 2, kv // 8, *source, "bf16")
        assert float(p_lat) == pytest.approx(float(p_ref) * float(p_scale), rel=1e-9)


def test_equivalent_batch_beyond_the_grid_is_marked_extrapolated(profile):
    """Phi-3 at batch 1024 reads an 8-KV-head configuration at batch 4096 (measured to 2048 at
    128 tokens; longer contexts stop at smaller batches, AIConfigurator's memory staircase);
    (14 heads, 7 KV heads) at batch 1 reads (24, 8) at batch 7/8: below the grid, the decode
    holds batch 1's latency."""
    _, how = profile.attention_lookup(np.array([1, 512, 1024]), 1, 128, 32, 32, 96, "causal", "bf16")
    assert how.tolist() == ["transferred", "transferred", "extrapolated"]
    lat, how = profile.attention_lookup(1, 1, 4096, 14, 7, 128, "causal", "bf16")
    ref, _ = profile.attention_lookup(1, 1, 4096, 24, 8, 128, "causal", "bf16")
    assert str(how) == "extrapolated"
    assert float(lat) == pytest.approx(float(ref), rel=2e-3)  # SOL(14, 7) / SOL(24, 8) / (7/8) = 0.9995
    p_lat, p_how = profile.prefill_lookup(1, 4096, 14, 7, 128, "bf16")
    p_ref, _ = profile.prefill_lookup(1, 4096, 24, 8, 128, "bf16")
    assert str(p_how) == "extrapolated" and 0.5 * float(p_ref) < float(p_lat) <= float(p_ref)


def test_arrays_and_scalars_agree(profile):
    """One call over many points (a sweep) answers each point as a scalar call does, both on
    one head shape (the fast path) and on mixed shapes and q_len (split per configuration)."""
    b = np.array([1, 1, 3, 7, 64, 300, 1024, 4096], float)  # (14, 7) at batch 1: below the grid
    kv = np.array([100, 4096, 65536, 9000, 2048, 512, 1024, 300], float)
    lat, how = profile.attention_lookup(b, 1, kv, 32, 32, 96, "causal", "bf16")
    for i in range(len(b)):
        one, one_how = profile.attention_lookup(b[i], 1, kv[i], 32, 32, 96, "causal", "bf16")
        assert float(lat[i]) == pytest.approx(float(one), rel=1e-12) and how[i] == str(one_how)
    heads = np.array([32, 14, 64, 48, 32, 24, 40, 32])
    kvh = np.array([32, 7, 16, 16, 8, 8, 8, 32])
    hd = np.array([96, 128, 128, 96, 128, 128, 128, 96])
    q = np.array([1, 1, 4, 1, 2, 1, 3, 8])
    lat, how = profile.attention_lookup(b, q, kv, heads, kvh, hd, "causal", "bf16")
    p_lat, p_how = profile.prefill_lookup(b, kv, heads, kvh, hd, "bf16")
    for i in range(len(b)):
        one, one_how = profile.attention_lookup(b[i], q[i], kv[i], heads[i], kvh[i], hd[i], "causal", "bf16")
        assert float(lat[i]) == pytest.approx(float(one), rel=1e-12) and how[i] == str(one_how)
        one, one_how = profile.prefill_lookup(b[i], kv[i], heads[i], kvh[i], hd[i], "bf16")
        assert float(p_lat[i]) == pytest.approx(float(one), rel=1e-12) and p_how[i] == str(one_how)
