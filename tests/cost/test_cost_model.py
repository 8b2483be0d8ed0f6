"""The checks the planner issue lists for the cost model. `ROOFLINE` is the H100 priced by the
fallback alone (what hardware without measurements gets); `load_cost_model("h100-sxm")` uses
the shipped measured profile (AIConfigurator's vLLM 0.24 tables)."""

import csv
from dataclasses import replace

import numpy as np
import pytest

from speedplan.cost.ops import PROFILE_DIR, CostModel, OpCost, load_cost_model
from speedplan.cost.forward import forward_cost
from speedplan.cost.predict import predict_ops
from speedplan.specs.hardware import get_hardware
from speedplan.specs.model import get_model
from speedplan.plan.sweep import sweep

ROOFLINE = CostModel(get_hardware("h100-sxm"))


def test_opcost_is_one_type_with_provenance():
    op = ROOFLINE.gemm(np.array([1, 8, 4096]), 4096, 4096, "bf16")
    assert isinstance(op, OpCost)
    assert list(op.source) == ["roofline"] * 3 and not op.out_of_range.any()
    assert list(op.bound) == ["memory", "memory", "compute"]
    measured = load_cost_model("h100-sxm").gemm(np.array([1, 8, 4096]), 4096, 4096, "bf16")
    assert list(measured.source) == ["profile"] * 3


def test_shipped_h100_profile_prices_a_measured_point_as_measured():
    rows = list(csv.DictReader((PROFILE_DIR / "h100-sxm" / "gemm.csv").open()))
    row = rows[len(rows) // 3]
    cost = load_cost_model("h100-sxm")
    assert cost.origin == "measured (AIConfigurator 0.12, vLLM 0.24 kernels)"
    op = cost.gemm(float(row["m"]), float(row["n"]), float(row["k"]), row["dtype"])
    assert op.latency_us.item() == pytest.approx(float(row["latency_us"]), rel=1e-12)
    assert op.source.item() == "profile" and not op.out_of_range.item()
    _, how = cost.profile.gemm_lookup(float(row["m"]), float(row["n"]), float(row["k"]), row["dtype"])
    assert how.item() == "measured"
    attn = next(csv.DictReader((PROFILE_DIR / "h100-sxm" / "attention.csv").open()))
    lat, how = cost.profile.attention_lookup(*(float(attn[c]) for c in ("batch", "q_len", "kv_len", "num_heads",
                                                                          "num_kv_heads", "head_dim")), "causal", attn["dtype"])
    assert how.item() == "measured" and lat.item() == pytest.approx(float(attn["latency_us"]), rel=1e-12)


def test_points_outside_the_measured_range_are_marked_in_predict_ops():
    """M = 65,536 lies beyond the largest measured M (32,768); batch 4096 beyond the largest
    measured decode batch (2048): each comes back with out_of_range = 1, the others 0."""
    rows = [{"op": "gemm", "m": "64", "n": "4096", "k": "4096", "dtype": "bf16"},
            {"op": "gemm", "m": "65536", "n": "4096", "k": "4096", "dtype": "bf16"},
            {"op": "attention", "batch": "8", "q_len": "1", "kv_len": "4096", "num_heads": "32", "num_kv_heads": "8",
             "head_dim": "128", "mask": "causal", "dtype": "bf16"},
            {"op": "attention", "batch": "4096", "q_len": "1", "kv_len": "4096", "num_heads": "32", "num_kv_heads": "8",
             "head_dim": "128", "mask": "causal", "dtype": "bf16"}]
    out = predict_ops(load_cost_model("h100-sxm"), rows)
    assert [r["out_of_range"] for r in out] == [0, 1, 0, 1]
    assert {r["source"] for r in out} == {"profile"}
    assert [r["out_of_range"] for r in predict_ops(ROOFLINE, rows)] == [0, 0, 0, 0]  # nothing measured: nothing outside


def test_forward_cost_carries_the_share_priced_out_of_range():
    cost = load_cost_model("h100-sxm")
    m = get_model("llama-3.1-8b")
    inside = forward_cost(cost, m, 8, 1, 4096)
    outside = forward_cost(cost, m, 1024, 1, 65536)  # beyond the measured decode staircase
    assert 0 <= float(inside.out_of_range_share) < 0.1  # the lm_head's N = 128,256 is beyond the 65,536 measured
    assert float(outside.out_of_range_share) > 0.5
    both = inside + outside
    assert float(inside.out_of_range_share) < float(both.out_of_range_share) < float(outside.out_of_range_share)


def test_llama8b_h100_b1_verify_up_to_8_tokens_costs_one_step():
    cost = load_cost_model("h100-sxm")
    m = get_model("llama-3.1-8b")
    base = forward_cost(cost, m, 1, 1, 4096).total_s
    for q in range(2, 9):
        assert forward_cost(cost, m, 1, q, 4096).total_s == pytest.approx(base, rel=0.10)


def _first_compute_bound_batch(draft_len: int) -> int:
    """On the plain datasheet roofline (one compute/memory crossing per GEMM shape); the fitted
    fallback's wave steps leave Llama-3.1-8B's pass at a 0.50 compute share from M = 385 to 444,
    so its crossing of the sweep's "more than half" rule is a knife edge, not a property of M."""
    plain = CostModel(replace(get_hardware("h100-sxm"), roofline_fit=""))
    r = sweep("llama-3.1-8b", plain, ["eagle"], range(1, 600), [draft_len], contexts=[1])
    rows = r.frame[(r.frame.draft_len == draft_len)].sort_values("batch")
    return int(rows[rows.bound == "compute"].batch.iloc[0])


def test_compute_bound_batch_at_d7_is_one_eighth_of_d0():
    b0, b7 = _first_compute_bound_batch(0), _first_compute_bound_batch(7)
    assert 64 < b0 < 600
    assert abs(b7 - b0 / 8) <= 1.0  # integer batches: within one of B0/8


@pytest.mark.parametrize("model", ["llama-3.1-70b", "llama-3.1-8b", "qwen3-30b-a3b"])
def test_long_context_verification_reads_the_kv_cache_once(model):
    """Long context, attention-dominated: the G·(1+D) rows of one KV head share tiles, the
    cache is read once whatever the tile count, so verification costs the decode call until the
    padded rows' compute outgrows the read; no step at the first tile boundary."""
    m = get_model(model)
    g = m.group_size
    q = np.arange(1, 128 // g + 2)  # up to one row past the first 128-row tile
    attn = ROOFLINE.attention(4, q, 131072, m.heads, m.kv_heads, m.head_dim, "causal", "bf16")
    one_tile = slice(0, 128 // g)
    assert (attn.bound[one_tile] == "memory").all()
    assert np.allclose(attn.latency_us[one_tile], attn.latency_us[0], rtol=0.02)  # only Q and O grow
    # the second tile costs its rows' compute (fitted at prefill's efficiency), not a second read
    assert attn.bound[-1] == "compute" and attn.latency_us[-1] < 2 * attn.latency_us[0]
    if m.moe is not None:
        return  # an MoE forward also grows with tokens: more distinct experts are touched
    fwd = forward_cost(ROOFLINE, m, 4, q[one_tile], 131072).total_s  # few sequences: GEMMs stay memory-bound
    assert fwd[-1] == pytest.approx(fwd[0], rel=0.06)  # (their fitted efficiency differs a little by M range)


def test_tree_mask_is_its_own_term():
    cost = ROOFLINE
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


def _without_moe_table(cost: CostModel) -> CostModel:
    from speedplan.profile.load import build_profile

    p = cost.profile
    return CostModel(cost.hardware, build_profile(p.path, p.meta, {k: v for k, v in p.tables.items() if k != "moe"}))


def _moe_rows(hidden, inter, tp):
    rows = [r for r in csv.DictReader((PROFILE_DIR / "h100-sxm" / "moe.csv").open())
            if (int(r["hidden"]), int(r["inter"]), int(r["tp"]), int(r["ep"]), r["dtype"], r["distribution"])
            == (hidden, inter, tp, 1, "bf16", "balanced")]
    return {int(r["tokens"]): float(r["latency_us"]) for r in rows}


def test_moe_layers_are_priced_from_the_measured_fused_kernel():
    """Qwen3-30B-A3B at TP 4 on H100: one token routes to 8 distinct experts under any
    routing, so each of the 48 MoE layers costs exactly the measured fused kernel at 1 token,
    in place of the two grouped GEMMs; the kernel's own SiLU is no longer charged apart."""
    cost = load_cost_model("h100-sxm")
    bare = _without_moe_table(cost)
    m = get_model("qwen3-30b-a3b")
    e = m.moe
    measured = _moe_rows(m.hidden, e.expert_intermediate, 4)
    gemms = _grouped_expert_gemms_us(bare, m, np.array([1.0]), 4).item()
    with_table, without = forward_cost(cost, m, 1, 1, 1024, tp=4), forward_cost(bare, m, 1, 1, 1024, tp=4)
    assert (float(with_table.gemm_s) - float(without.gemm_s)) * 1e6 == pytest.approx(
        m.moe_layers * (measured[1] - gemms), rel=1e-9)
    assert float(with_table.elementwise_s) < float(without.elementwise_s)
    assert measured[1] > 1.5 * gemms  # the fused kernel's fixed cost the GEMMs alone miss


def _grouped_expert_gemms_us(cost: CostModel, m, tokens: np.ndarray, tp: int) -> np.ndarray:
    """One MoE layer's routed experts as two grouped GEMMs under random routing (µs)."""
    e = m.moe
    touched = e.num_experts * (1 - (1 - e.top_k / e.num_experts) ** tokens)
    rows = tokens * e.top_k / touched
    return (cost.gemm(rows, 2 * e.expert_intermediate // tp * touched, m.hidden, "bf16").latency_us
            + cost.gemm(rows, m.hidden * touched, e.expert_intermediate // tp, "bf16").latency_us)


def test_moe_random_routing_takes_off_the_experts_balanced_routing_adds():
    """The table routes every token's experts to distinct experts ("balanced"); 16 tokens ×
    8 of 128 touch all 128 there, about 82 under random routing. The priced layer lies
    between the measured 1-token and 16-token kernels; at 512 tokens every expert is touched
    either way and the price is the measured kernel's."""
    cost = load_cost_model("h100-sxm")
    m = get_model("qwen3-30b-a3b")
    measured = _moe_rows(m.hidden, m.moe.expert_intermediate, 4)
    bare = _without_moe_table(cost)
    t = np.array([1.0, 16.0, 512.0])
    swapped = (forward_cost(cost, m, t, 1, 1024, tp=4).gemm_s - forward_cost(bare, m, t, 1, 1024, tp=4).gemm_s) * 1e6
    layer = swapped / m.moe_layers + _grouped_expert_gemms_us(bare, m, t, 4)
    assert layer[0] == pytest.approx(measured[1], rel=1e-9)
    assert measured[1] < layer[1] < 0.85 * measured[16]
    assert layer[2] == pytest.approx(measured[512], rel=0.01)
    lat, outside = cost.moe(t, m.hidden, m.moe.expert_intermediate, m.moe.num_experts, m.moe.top_k, 4, 1, "bf16")
    assert list(lat) == pytest.approx([measured[1], measured[16], measured[512]], rel=1e-12) and not outside.any()
    assert forward_cost(cost, m, t, 1, 1024, tp=4).profile_share.min() > 0.85


def test_a_moe_series_the_profile_lacks_falls_back_to_grouped_gemms():
    """The shipped H100 table holds no DeepSeek-V3 experts: its layers price as before."""
    cost = load_cost_model("h100-sxm")
    m = get_model("deepseek-v3")
    e = m.moe
    assert np.isnan(cost.moe([1.0], m.hidden, e.expert_intermediate, e.num_experts, e.top_k, 8, 1, m.dtype)[0]).all()
    a, b = forward_cost(cost, m, 8, 4, 1024, tp=8), forward_cost(_without_moe_table(cost), m, 8, 4, 1024, tp=8)
    assert float(a.total_s) == float(b.total_s)
    assert ROOFLINE.moe([1.0], 2048, 768, 128, 8, 1, 1, "bf16") == (None, None)


def test_moe_measured_with_skewed_routing_is_priced_as_measured(tmp_path):
    """The same Qwen3-30B-A3B series relabelled as AIConfigurator's power-law routing
    (`import-aic --moe-routing power_law_1.2`): no conversion to random routing, so each MoE
    layer at 16 tokens costs the table's value, where the balanced table is priced lower."""
    import shutil

    folder = tmp_path / "h100-power-law"
    shutil.copytree(PROFILE_DIR / "h100-sxm", folder)
    text = (folder / "moe.csv").read_text().replace(",balanced,", ",power_law_1.2,")
    (folder / "moe.csv").write_text(text)
    skewed, balanced = load_cost_model(folder), load_cost_model("h100-sxm")
    assert (skewed.moe_routing, balanced.moe_routing) == ("power_law_1.2", "balanced")
    assert ROOFLINE.moe_routing == "balanced"
    m = get_model("qwen3-30b-a3b")
    measured = _moe_rows(m.hidden, m.moe.expert_intermediate, 4)
    bare = _without_moe_table(balanced)
    t = np.array([16.0])
    moe_s = lambda cost: (forward_cost(cost, m, t, 1, 1024, tp=4).gemm_s - forward_cost(bare, m, t, 1, 1024, tp=4).gemm_s).item()
    layer_skewed = moe_s(skewed) * 1e6 / m.moe_layers + _grouped_expert_gemms_us(bare, m, t, 4).item()
    layer_balanced = moe_s(balanced) * 1e6 / m.moe_layers + _grouped_expert_gemms_us(bare, m, t, 4).item()
    assert layer_skewed == pytest.approx(measured[16], rel=1e-9)
    assert layer_balanced < 0.85 * layer_skewed


def test_a_moe_table_of_two_skewed_routings_is_refused(tmp_path):
    import shutil

    from speedplan.errors import SpeedplanInputError

    folder = tmp_path / "mixed"
    shutil.copytree(PROFILE_DIR / "h100-sxm", folder)
    lines = (folder / "moe.csv").read_text().splitlines()
    body = [l.replace(",balanced,", ",power_law_1.2,") for l in lines[1:]]
    body += [l.replace(",power_law_1.2,", ",power_law_1.01,") for l in body]
    (folder / "moe.csv").write_text("\n".join([lines[0], *body]) + "\n")
    with pytest.raises(SpeedplanInputError, match="power_law_1.01, power_law_1.2 without 'balanced'") as e:
        forward_cost(load_cost_model(folder), get_model("qwen3-30b-a3b"), 1, 1, 1024, tp=4)
    assert str(e.value).startswith(f"{folder / 'moe.csv'}: routings")  # the folder is named, not only the file


def test_sliding_window_layers_read_at_most_the_window():
    """A model whose every layer attends within 4096 tokens (Mistral-7B-v0.1's layout) prices
    attention at 32k context as at the window (plus the verified tokens), and the sweep fits
    more sequences in memory; below the window nothing changes."""
    cost = load_cost_model("h100-sxm")
    full = get_model("llama-3.1-8b")
    local = replace(full, window=4096, window_layers=full.layers)
    at = lambda m, ctx: forward_cost(cost, m, 16, 4, ctx, 1).attention_s.item()
    assert at(local, 2048) == pytest.approx(at(full, 2048))
    assert at(local, 32768) == pytest.approx(at(full, 4096 - 1), rel=1e-6)  # 4 queries read 4096 + 3 keys
    assert at(local, 32768) < 0.25 * at(full, 32768)
    fits = lambda m: sweep(m, "h100-sxm", ["eagle3"], [64, 128], [0, 2], contexts=[32768]).frame.query("feasible")
    assert len(fits(full)) < len(fits(local))


def test_a_forward_without_its_lm_head_is_short_of_exactly_that_gemm():
    """`lm_head=False` (a drafter's forward that only updates its KV cache) leaves out the lm_head
    GEMM and nothing else."""
    cost = load_cost_model("h100-sxm")
    model = get_model("llama-3.2-1b")
    full = forward_cost(cost, model, 64, 1, 2048, 1)
    bare = forward_cost(cost, model, 64, 1, 2048, 1, lm_head=False)
    lm_head = cost.gemm(64.0, float(model.vocab), float(model.hidden), model.dtype).latency_us * 1e-6
    assert float(full.gemm_s - bare.gemm_s) == pytest.approx(float(lm_head), rel=1e-9)
    assert float(full.attention_s) == float(bare.attention_s) and lm_head > 0
