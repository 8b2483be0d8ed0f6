"""Published acceptance defaults agree with themselves and with the rows they name."""

from __future__ import annotations

import pytest

from speedplan.plan.acceptance import Acceptance
from speedplan.plan.defaults import (EAGLE3_LOWER_RANK_SHARE, HEADS, MTP_FIRST, draft_model_default, draft_size_alpha,
                                     head_default, mtp_default, ngram_default)
from speedplan.plan.mechanisms import REGISTRY
from speedplan.plan.sweep import sweep
from speedplan.specs.model import get_model


@pytest.mark.parametrize("row", HEADS, ids=lambda r: f"{r.family}-{r.target}")
def test_each_head_default_reproduces_its_row(row):
    acc = row.acceptance()
    kind, *shape, al = row.fit
    got = acc.tree_al(*shape) if kind == "tree" else acc.chain_al(shape[0])
    assert float(got) == pytest.approx(al, rel=0.005)


def test_eagle3_lower_rank_share_reproduces_the_other_trees_of_its_source():
    """c = 0.682 was fitted to SpecForge #339's largest tree; its other trees (and AngelSlim #163's,
    same target) come within 6% (engine_measurements.csv rows, steps/topk/draft tokens as given)."""
    acc, _ = head_default("eagle3", "qwen3-30b-a3b")
    rows = [((3, 7, 3), 2.20), ((3, 3, 3), 1.99), ((7, 15, 4), 2.52), ((6, 11, 4), 2.42),  # SpecForge #339
            ((3, 7, 2), 2.216), ((4, 15, 4), 2.542), ((7, 63, 10), 3.034)]  # AngelSlim #163
    for (depth, nodes, topk), al in rows:
        assert float(acc.tree_al(depth, nodes, topk)) == pytest.approx(al, rel=0.065), (depth, nodes, topk)


@pytest.mark.parametrize("chain, tree", [("eagle", "eagle-tree"), ("eagle3", "eagle3-tree")])
def test_chain_and_tree_of_one_head_share_one_vector(chain, tree):
    """A family's chain is its tree with one child per level (topk 1): same AL at every depth."""
    r = sweep("llama-3.1-8b", "h100-sxm", [chain, f"{tree}:topk=1"], [1], range(0, 9), tree_nodes=range(1, 9))
    assert r.meta["acceptance"][chain] == r.meta["acceptance"][tree]
    f = r.frame
    c = f[f.mechanism == chain].set_index("draft_len")["acceptance_length"]
    t = f[(f.mechanism == tree) & (f.verify_tokens - 1 == f.draft_len)].set_index("draft_len")["acceptance_length"]
    assert len(t) == 8 and c.loc[t.index].to_numpy() == pytest.approx(t.to_numpy())


def test_family_acceptance_option_reaches_the_tree():
    from speedplan.plan.acceptance_sources import parse_acceptance_options
    from speedplan.plan.mechanisms import MECHANISMS

    opts = parse_acceptance_options(["eagle3:ranks=0.7,0.1"], MECHANISMS)
    r = sweep(mechanisms=["eagle3", "eagle3-tree"], batches=[1], draft_lens=[2], tree_nodes=[2, 4], acceptance=opts)
    sources = r.meta["acceptance"]
    assert all(v.startswith("user: ranks=0.7,0.1") for v in sources.values())  # one vector for the family,
    assert "chain accepts the rank-1 rate 0.7" in sources["eagle3"]  # each member saying how it reads it
    assert "same per-rank rates at every depth" in sources["eagle3-tree"]


def test_a_3b_draft_accepts_more_than_a_1b_draft():
    target = get_model("llama-3.1-8b")
    a1, s1 = draft_model_default(target, get_model("llama-3.2-1b"))
    a3, _ = draft_model_default(target, get_model("llama-3.2-3b"))
    assert a3.positions[0] > a1.positions[0]
    assert "Leviathan" in s1 and "draft's size" in s1
    big = get_model("llama-3.1-70b")
    assert draft_model_default(big, get_model("llama-3.2-1b"))[0].positions[0] < a1.positions[0]


def test_draft_size_rule_goes_through_the_t5_rows():
    for params, alpha in ((60e6, 0.75), (220e6, 0.80), (770e6, 0.82)):
        assert draft_size_alpha(params, 11e9) == pytest.approx(alpha, abs=0.012)


def test_mtp_decays_and_is_lower_where_a_layer_is_reused():
    v3 = get_model("deepseek-v3")
    acc, source = mtp_default(v3)
    p = acc.position_vector(5)
    assert p[0] == pytest.approx(MTP_FIRST) and all(b < a for a, b in zip(p, p[1:]))
    # the rows it was fitted to: SGLang NextN topk 1, 3- and 4-token windows
    assert float(acc.chain_al(2)) == pytest.approx(2.18, abs=0.005)
    assert float(acc.chain_al(3)) == pytest.approx(2.44, abs=0.005)
    from dataclasses import replace
    three, _ = mtp_default(replace(v3, mtp_layers=3))
    assert three.position_vector(3).tolist() == pytest.approx([MTP_FIRST] * 3)  # own layers: no reuse
    assert float(three.chain_al(4)) > float(acc.chain_al(4))
    assert "DeepSeek-V3" in source


def test_ngram_has_a_no_match_probability_and_verifies_nothing_extra_then():
    acc, _ = ngram_default()
    assert 0 < acc.match < 1
    assert float(acc.chain_al(5)) == pytest.approx(1.66, abs=0.01)  # the TensorRT-LLM row it was fitted to
    ngram = REGISTRY["ngram"](acc, "test")
    assert float(ngram.verify_tokens(5, 6)) == pytest.approx(1 + acc.match * 5)
    f = sweep(mechanisms=["ngram"], batches=[1], draft_lens=[0, 4]).frame
    assert f[f.mechanism == "ngram"].acceptance_length.iloc[0] == pytest.approx(1 + acc.match * sum(
        acc.positions[0] ** i for i in range(1, 5)))


def test_eagle3_default_is_keyed_by_target_and_falls_back_with_a_note():
    _, own = head_default("eagle3", "llama-3.1-8b")
    _, fallback = head_default("eagle3", "qwen3-32b")
    assert "no row for" not in own and "no row for qwen3-32b" in fallback
    assert head_default("eagle3", "qwen3-30b-a3b")[0].positions[0] == pytest.approx(0.4945)
    assert Acceptance.head_ranks(0.5, EAGLE3_LOWER_RANK_SHARE, "x").ranks[1] == pytest.approx(0.25 * 0.682)


def test_gpt_oss_head_default_reproduces_its_other_draft_lengths():
    """Fitted to vLLM PR #32628's K = 8 row; its K = 3..7 rows (per-position acceptance summed:
    AL 2.61, 2.81, 2.93, 3.00, 3.05) come within 6%."""
    acc, source = head_default("eagle3", "gpt-oss-120b")
    assert "no row for" not in source
    for k, al in zip(range(3, 8), (2.61, 2.81, 2.93, 3.00, 3.05)):
        assert float(acc.chain_al(k)) == pytest.approx(al, rel=0.06), k


def test_a_published_target_draft_pair_comes_before_the_size_rule():
    """gpt-oss-120b with its gpt-oss-20b draft: vLLM PR #33318's per-position rates, AL 2.88 at
    K = 3; another pair still gets the draft-size rule."""
    acc, source = draft_model_default(get_model("gpt-oss-120b"), get_model("gpt-oss-20b"))
    assert float(acc.chain_al(3)) == pytest.approx(2.884) and "vllm PR #33318" in source
    _, other = draft_model_default(get_model("llama-3.1-8b"), get_model("llama-3.2-1b"))
    assert "alpha from the draft's size" in other


def test_draft_size_source_says_whether_the_ratio_is_inside_the_fitted_rows():
    """The three T5 rows span draft/target ratios 0.0055-0.07: Llama-3.2-1B drafting for
    Llama-3.1-70B (ratio 0.018) is inside them, for Llama-3.1-8B (0.154) past them (an output
    consistency check of 2026-12-05 found the first called extrapolated)."""
    from speedplan.plan.defaults import draft_model_default
    from speedplan.specs.model import get_model

    inside = draft_model_default(get_model("llama-3.1-70b"), get_model("llama-3.2-1b"))[1]
    past = draft_model_default(get_model("llama-3.1-8b"), get_model("llama-3.2-1b"))[1]
    assert "within their ratios 0.0055-0.07" in inside and "extrapolated" not in inside
    assert "extrapolated past their largest ratio 0.07" in past
