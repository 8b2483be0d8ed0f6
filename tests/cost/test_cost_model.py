"""The checks the planner issue lists for the cost model."""

import numpy as np
import pytest

from speedplan.cost.ops import CostModel, OpCost, load_cost_model
from speedplan.cost.forward import forward_cost
from speedplan.specs.hardware import get_hardware
from speedplan.specs.model import get_model
from speedplan.plan.sweep import sweep


def test_opcost_is_one_type_with_provenance():
    cost = load_cost_model("h100-sxm")
    op = cost.gemm(np.array([1, 8, 4096]), 4096, 4096, "bf16")
    assert isinstance(op, OpCost)
    assert list(op.source) == ["roofline"] * 3
    assert list(op.bound) == ["memory", "memory", "compute"]


def test_tile_quantisation_along_m():
    cost = load_cost_model("h100-sxm")
    big = cost.gemm(np.array([4097, 4160, 4161]), 8192, 8192, "bf16").latency_us
    assert big[0] == pytest.approx(big[1])  # same 64-row tile count
    assert big[2] > big[1]


def test_llama8b_h100_b1_verify_up_to_8_tokens_costs_one_step():
    cost = load_cost_model("h100-sxm")
    m = get_model("llama-3.1-8b")
    base = forward_cost(cost, m, 1, 1, 4096).total_s
    for q in range(2, 9):
        assert forward_cost(cost, m, 1, q, 4096).total_s == pytest.approx(base, rel=0.10)


def _first_compute_bound_batch(draft_len: int) -> int:
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle"], range(1, 600), [draft_len], contexts=[1])
    rows = r.frame[(r.frame.draft_len == draft_len)].sort_values("batch")
    return int(rows[rows.bound == "compute"].batch.iloc[0])


def test_compute_bound_batch_at_d7_is_one_eighth_of_d0():
    b0, b7 = _first_compute_bound_batch(0), _first_compute_bound_batch(7)
    assert 64 < b0 < 600
    assert abs(b7 - b0 / 8) <= 1.0  # integer batches: within one of B0/8


@pytest.mark.parametrize("model", ["llama-3.1-70b", "llama-3.1-8b", "qwen3-30b-a3b"])
def test_attention_steps_at_multiples_of_128_in_g_times_q(model):
    """Long context, attention-dominated: verifying is free up to D = 128/G − 1, then the
    attention cost steps each time G·(1+D) crosses a multiple of 128."""
    m = get_model(model)
    cost = load_cost_model("h100-sxm")
    g = m.group_size
    q = np.arange(1, 4 * 128 // g + 1)
    attn = cost.attention(64, q, 131072, m.heads, m.kv_heads, m.head_dim, "causal", "bf16").latency_us
    tiles = np.ceil(g * q / 128)
    start = 128 // g - 1  # the largest free D
    assert np.allclose(attn[: start + 1], attn[0], rtol=1e-3)
    assert attn[start + 1] > attn[start] * 1.5
    for t in np.unique(tiles):  # flat within a tile count, rising across
        assert np.ptp(attn[tiles == t]) <= 1e-3 * attn[tiles == t].max()
    assert np.all(np.diff([attn[tiles == t][0] for t in np.unique(tiles)]) > 0)
    if m.moe is not None:
        return  # an MoE forward also grows with tokens: more distinct experts are touched
    # and it shows through the whole forward pass where attention dominates
    fwd = forward_cost(cost, m, 4, q, 131072).total_s  # few sequences: GEMMs stay memory-bound
    assert fwd[start] == pytest.approx(fwd[0], rel=0.03)
    assert fwd[start + 1] > fwd[start] * 1.2


def test_tree_mask_is_its_own_term():
    cost = load_cost_model("h100-sxm")
    m = get_model("llama-3.1-8b")
    chain = forward_cost(cost, m, 8, 16, 4096)
    tree = forward_cost(cost, m, 8, 16, 4096, mask="tree")
    assert float(chain.tree_mask_s) == 0.0 and float(tree.tree_mask_s) > 0
    assert float(tree.total_s - chain.total_s) == pytest.approx(float(tree.tree_mask_s))


def test_moe_distinct_experts_grow_with_tokens():
    cost = load_cost_model("h100-sxm")
    m = get_model("mixtral-8x7b")
    t = forward_cost(cost, m, np.array([1, 1, 1, 64]), np.array([1, 2, 4, 1]), 1024).gemm_s
    assert t[0] < t[1] < t[2]  # 2 of 8 experts per token: more tokens touch more experts
    assert t[3] < 4.5 * t[0]  # all 8 touched: at most 4x the weight bytes of one token's 2


def test_tensor_parallel_adds_allreduce_and_cuts_gemm():
    cost = load_cost_model("h100-sxm")
    m = get_model("llama-3.1-70b")
    one = forward_cost(cost, m, 8, 4, 4096, tp=1)
    four = forward_cost(cost, m, 8, 4, 4096, tp=4)
    assert float(one.comm_s) == 0.0 and float(four.comm_s) > 0
    assert float(four.gemm_s) == pytest.approx(float(one.gemm_s) / 4, rel=0.1)


class _ProfileStub:
    """A profile that measured GEMMs only (attention and elementwise fall back)."""

    source_label = "profile"
    origin = "measured"

    def __init__(self):
        self.hardware = get_hardware("h100-sxm")

    def gemm_latency_us(self, m, n, k, dtype):
        return np.full(np.shape(m), 7.0)

    def attention_latency_us(self, *args):
        return np.full(np.shape(args[0]), np.nan)

    def elementwise_latency_us(self, nbytes, dtype):
        return np.full(np.shape(nbytes), np.nan)


def test_profile_answers_first_and_says_so():
    cost = CostModel(get_hardware("h100-sxm"), _ProfileStub())
    g = cost.gemm([1, 2], 4096, 4096, "bf16")
    assert list(g.latency_us) == [7.0, 7.0] and list(g.source) == ["profile", "profile"]
    a = cost.attention(1, 1, 4096, 32, 8, 128, "causal", "bf16")
    assert a.source.item() == "roofline"
    r = sweep("llama-3.1-8b", cost, ["eagle"], [1, 8], [0, 2])
    assert set(r.frame.cost_source) == {"mixed"}
    assert r.meta["cost_origin"] == "measured"
