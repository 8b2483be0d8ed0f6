"""Verification attention derived from decode (q = 1) and causal prefill (q = L) tables: exact
at both ends, the KV-read-once bound below, the worked number of speedplan.profile.verify."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speedplan.cost.roofline import attention_sol_us
from speedplan.profile.load import load_profile
from speedplan.profile.verify import bridge_weight, causal_work, verify_latency_us
from speedplan.specs.hardware import get_hardware

META = {"device_name": "synthetic", "date": "2026-01-01T00:00:00+00:00", "microbench_version": "test",
        "grid": ["synthetic"], "versions": {}, "complete": True, "origin": "measured", "hardware_preset": "h100-sxm"}
BATCHES, LENS = (1, 8, 64), (16, 64, 256, 1024, 4096)


def decode_us(b, L):
    return 10.0 + 0.004 * b * L


def prefill_us(b, L):
    return 10.0 + 2e-5 * b * L * L


def decode_profile(folder, prefill=True, prefill_lens=LENS):
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps(META))
    (folder / "gemm.csv").write_text("m,n,k,dtype,latency_us\n1,1024,1024,bf16,3\n2,1024,1024,bf16,3\n")
    rows = [f"{b},1,{L},32,8,128,causal,bf16,{decode_us(b, L)}" for b in BATCHES for L in LENS]
    (folder / "attention.csv").write_text("batch,q_len,kv_len,num_heads,num_kv_heads,head_dim,mask,dtype,latency_us\n"
                                          + "\n".join(rows) + "\n")
    if prefill:
        rows = [f"{b},{L},32,8,128,bf16,{prefill_us(b, L)}" for b in BATCHES for L in prefill_lens]
        (folder / "prefill.csv").write_text("batch,seq_len,num_heads,num_kv_heads,head_dim,dtype,latency_us\n"
                                            + "\n".join(rows) + "\n")
    return load_profile(folder)


def test_bridge_weight_runs_from_decode_to_prefill():
    assert bridge_weight(1, 4096) == 0.0 and bridge_weight(4096, 4096) == 1.0
    assert causal_work(4, 8192) == 4 * 8192 - 6
    w = bridge_weight(np.array([2, 4, 8, 16]), 8192)
    assert np.all(np.diff(w) > 0) and w[1] == pytest.approx((32762 - 8192) / (33558528 - 8192))


def test_worked_number_of_the_docstring():
    """H100, (32, 8, 128), b = 8, q = 4, L = 8192: 100.5 µs decode, ~7,200 µs prefill -> 105.7 µs."""
    t = verify_latency_us(100.5, 100.5 + 7100, 100.5, 4, 8192)
    assert t == pytest.approx(105.7, abs=0.05)


def test_verification_is_exact_at_both_ends_and_between_them(tmp_path):
    p = decode_profile(tmp_path / "p")
    b, L = 8, 1024
    one, how1 = p.attention_lookup(b, 1, L, 32, 8, 128, "causal", "bf16")
    assert how1.item() == "measured" and one.item() == pytest.approx(decode_us(b, L))
    full, how = p.attention_lookup(b, L, L, 32, 8, 128, "causal", "bf16")
    assert how.item() == "derived" and full.item() == pytest.approx(prefill_us(b, L))
    q = np.array([2, 4, 8, 16, 64])
    mid, how = p.attention_lookup(b, q, L, 32, 8, 128, "causal", "bf16")
    expect = decode_us(b, L) + bridge_weight(q, L) * (prefill_us(b, L) - decode_us(b, L))
    assert np.allclose(mid, expect) and (how == "derived").all()


def test_verification_past_the_prefill_tables_lengths_says_extrapolated(tmp_path):
    """Decode measured to L = 4096, prefill only to 1024: a verify call at L = 4096 reads its
    extra rows' cost off an extrapolated prefill, and says so; within both tables it is derived."""
    p = decode_profile(tmp_path / "p", prefill_lens=LENS[:-1])
    _, how = p.attention_lookup(8, 4, np.array([1024, 4096]), 32, 8, 128, "causal", "bf16")
    assert how.tolist() == ["derived", "extrapolated"]
    _, how1 = p.attention_lookup(8, 1, 4096, 32, 8, 128, "causal", "bf16")
    assert how1.item() == "measured"  # decode alone needs no prefill


def test_without_prefill_the_kv_read_once_bound_answers(tmp_path):
    """No prefill table: q·G rows in the decode call's tile cost what decode costs; past the tile
    the padded rows' compute over the decode call's own utilisation."""
    p = decode_profile(tmp_path / "p", prefill=False)
    hw = get_hardware("h100-sxm")
    lat, how = p.attention_lookup(8, np.array([1, 16, 32, 128]), 4096, 32, 8, 128, "causal", "bf16")
    u = attention_sol_us(hw, 8, 1, 4096, 32, 8, 128, "bf16") / decode_us(8, 4096)
    assert lat == pytest.approx(attention_sol_us(hw, 8, np.array([1, 16, 32, 128]), 4096, 32, 8, 128, "bf16") / u)
    assert lat[2] < 1.04 * lat[0]  # G·q = 4·32 = 128 rows: one tile; only Q and O grow
    assert lat[3] > 1.5 * lat[2]  # four tiles: their rows' compute outgrows the one read of the cache
    assert how.tolist() == ["measured", "derived", "derived", "derived"]


def test_a_tree_without_tree_measurements_adds_the_block_term(tmp_path):
    p = decode_profile(tmp_path / "p")
    chain, _ = p.attention_lookup(8, 16, np.array([1024, 4096]), 32, 8, 128, "causal", "bf16")
    tree, how = p.attention_lookup(8, 16, np.array([1024, 4096]), 32, 8, 128, "tree", "bf16")
    assert (how == "derived").all()
    assert tree - chain == pytest.approx([tree[0] - chain[0]] * 2) and tree[0] > chain[0]  # prefix-independent
