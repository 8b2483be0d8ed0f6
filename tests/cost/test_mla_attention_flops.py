"""Absorbed MLA attention is priced with its own query width: the latent is read once as K and V
(288 + 288 of `attention_shape`), but each query row scores 576 wide and writes 512, so a row
does 2 · 576 + 2 · 512 = 2,176 FLOPs per key, and FlashMLA packs rows into 64-row blocks.
Before, the rows did 4 · 288 = 1,152 (1.9x too few) in 128-row tiles."""

from __future__ import annotations

import numpy as np
import pytest

from speedplan.cost.attention_shape import attention_qo_head_dim, attention_shape
from speedplan.cost.forward import forward_cost
from speedplan.cost.ops import CostModel
from speedplan.cost.roofline import MLA_TILE_M, _attention_terms, attention_sol_us
from speedplan.specs.hardware import DTYPE_BYTES, get_hardware
from speedplan.specs.model import get_model

H100 = get_hardware("h100-sxm")
DSV3 = get_model("deepseek-v3")


def test_mla_query_width_is_half_of_score_plus_output_width():
    assert attention_qo_head_dim(DSV3) == (576 + 512) / 2
    assert attention_shape(DSV3, 8) == (16, 1, 288)  # the bytes shape is unchanged
    assert attention_qo_head_dim(get_model("llama-3.1-8b")) is None


def test_flops_and_query_bytes_follow_the_query_width_and_the_mla_block():
    b, kv = 4, 8192
    q = np.array([1, 4, 5, 16])  # G = 16 heads per rank at TP 8: 16, 64, 80, 256 rows
    heads, kvh, hd = attention_shape(DSV3, 8)
    qo = attention_qo_head_dim(DSV3)
    t_c, t_m, nbytes, _ = _attention_terms(H100, b, q, kv, heads, kvh, hd, "bf16", qo)
    rows = np.ceil(heads * q / MLA_TILE_M) * MLA_TILE_M
    assert rows.tolist() == [64, 64, 128, 256]
    flops = b * rows * kv * (2 * 576 + 2 * 512)
    assert t_c == pytest.approx(flops / H100.peak_flops_per_s["bf16"] * 1e6)
    per_row_bytes = (576 + 512) * DTYPE_BYTES["bf16"]  # one query in, one output out per head
    assert nbytes == pytest.approx(b * kv * 576 * 2 + b * heads * q * per_row_bytes)
    # without the query width: the old pricing (128-row tiles of 4 · 288)
    t_c_old, t_m_old, _, _ = _attention_terms(H100, b, q, kv, heads, kvh, hd, "bf16")
    assert t_c[-1] / t_c_old[-1] == pytest.approx(2176 / 1152)  # 256 rows: a whole number of tiles either way
    assert t_m[0] == pytest.approx(t_m_old[0], rel=0.01)  # the latent's bytes dominate decode: unchanged


class _FlatProfile:
    """A profile that answers every attention query 100 µs (the shape it was asked is recorded)."""

    source_label, origin = "profile", "measured"

    def __init__(self):
        self.asked = []

    def attention_lookup(self, batch, q_len, kv_len, heads, kv_heads, head_dim, mask, dtype):
        self.asked.append((float(np.max(heads)), float(np.max(kv_heads)), float(np.max(head_dim))))
        shape = np.broadcast_shapes(*(np.shape(a) for a in (batch, q_len, kv_len)))
        return np.full(shape, 100.0), np.full(shape, "measured")


def test_a_measured_answer_pays_for_the_flops_the_shape_left_out():
    """The profile is asked the (heads, 1, 288) shape, and its answer is scaled by the speed of
    light of the real rows over that shape's: 1 where memory-bound, above 1 where the real
    rows are compute-bound."""
    prof = _FlatProfile()
    cost = CostModel(H100, prof)
    heads, kvh, hd = attention_shape(DSV3, 1)  # TP 1: 128 heads, compute-bound already at q = 1 in bf16
    qo = attention_qo_head_dim(DSV3)
    b, kv = np.array([1, 1]), 16384
    q = np.array([1, 8])
    op = cost.attention(b, q, kv, heads, kvh, hd, "causal", "bf16", qo_head_dim=qo)
    assert prof.asked[-1] == (128.0, 1.0, 288.0)
    ratio = attention_sol_us(H100, b, q, kv, heads, kvh, hd, "bf16", qo) / attention_sol_us(H100, b, q, kv, heads, kvh, hd, "bf16")
    assert op.latency_us == pytest.approx(100.0 * ratio)
    assert ratio[1] == pytest.approx(2176 / 1152, rel=0.02)  # 1,024 rows: compute-bound both ways
    plain = cost.attention(b, q, kv, heads, kvh, hd, "causal", "bf16")
    assert plain.latency_us == pytest.approx([100.0, 100.0])  # no query width: the profile's answer as is


def test_deepseek_verify_attention_grows_with_the_real_flops_where_compute_bound():
    """The forward pass passes the query width: a 16-token verify at TP 1 (2,048 rows per
    sequence) costs 2176 / 1152 of what the old shape priced on a datasheet roofline, and a
    one-token decode at TP 8 (16 rows, memory-bound) about the same."""
    cost = CostModel(get_hardware("h100-sxm"))
    heads, kvh, hd = attention_shape(DSV3, 1)
    fwd = forward_cost(cost, DSV3, np.array([8.0]), np.array([16.0]), np.array([8192.0]), tp=1)
    assert DSV3.kv_dtype == "bf16"  # an FP8 checkpoint's KV cache, as the engines keep it
    old = cost.attention(8.0, 16.0, 8192.0 + 16, heads, kvh, hd, "causal", "bf16")
    per_layer = fwd.attention_s[0] * 1e6 / DSV3.attention_layers
    assert per_layer > 1.5 * float(old.latency_us)
    heads8, kvh8, hd8 = attention_shape(DSV3, 8)
    dec = forward_cost(cost, DSV3, np.array([8.0]), np.array([1.0]), np.array([8192.0]), tp=8)
    old8 = cost.attention(8.0, 1.0, 8193.0, heads8, kvh8, hd8, "causal", "bf16")
    assert dec.attention_s[0] * 1e6 / DSV3.attention_layers == pytest.approx(float(old8.latency_us), rel=0.05)
