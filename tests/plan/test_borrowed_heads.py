"""A sweep that names no mechanisms compares trained heads like with like: where a target has an
EAGLE-3 row of its own, EAGLE-1/2 (whose only row for it would be Vicuna-7B's) is left out with
the reason, unless the user names it or gives its acceptance. Found in an SGLang user's
walkthrough: qwen3-30b-a3b's plan was an EAGLE-2 tree with a placeholder head, priced with
Vicuna-7B's AL 4.36, over the EAGLE-3 head measured on the target (AL 1.86 at D = 3)."""

from __future__ import annotations

import pytest

import speedplan
from speedplan.plan.acceptance import Acceptance

GRID = dict(batches=[1, 8], draft_lens=[0, 2, 4], tree_nodes=[8])


def _labels(result) -> set[str]:
    return set(result.frame.mechanism) - {"none"}


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "gpt-oss-120b", "glm-4.7-flash"])
def test_a_target_with_its_own_eagle3_row_leaves_borrowed_eagle_out(model):
    r = speedplan.sweep(model, "h200-sxm", **GRID)
    assert {"eagle", "eagle-tree"} <= set(r.meta["skipped"]) and not {"eagle", "eagle-tree"} & _labels(r)
    assert {"eagle3", "eagle3-tree"} <= _labels(r)
    why = r.meta["skipped"]["eagle-tree"]
    assert why.startswith(f"no published acceptance for {model} (the eagle family's row is another target's: ")
    assert "Vicuna-7B-v1.3" in why and "--mechanism eagle-tree" in why


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-8b"])  # both families' own rows; neither's
def test_like_with_like_keeps_every_family(model):
    r = speedplan.sweep(model, "h100-sxm", **GRID)
    assert {"eagle", "eagle-tree", "eagle3", "eagle3-tree"} <= _labels(r)
    assert not {"eagle", "eagle-tree"} & set(r.meta["skipped"])


def test_named_or_given_acceptance_prices_it():
    named = speedplan.sweep("qwen3-30b-a3b", "h200-sxm", mechanisms=["eagle", "eagle3"], **GRID)
    assert {"eagle", "eagle3"} == _labels(named)
    given = speedplan.sweep("qwen3-30b-a3b", "h200-sxm", acceptance={"eagle": Acceptance.iid(0.6, "user: alpha=0.6")},
                            **GRID)
    assert {"eagle", "eagle-tree"} <= _labels(given)  # the family's key reaches its tree too


def test_a_model_whose_own_mtp_is_measured_leaves_borrowed_heads_out():
    """deepseek-v3: the MTP rows were measured on it (AL 2.18 and 2.44), the EAGLE-3 row is
    Llama-3.1-8B's (AL 6.13): a default sweep picked EAGLE-3 on that row at nearly every B, with
    a placeholder head in every launch file (a user walkthrough)."""
    r = speedplan.sweep("deepseek-v3", "h200-sxm", tp=8, **GRID)
    heads = {"eagle", "eagle-tree", "eagle3", "eagle3-tree"}
    assert heads <= set(r.meta["skipped"]) and not heads & _labels(r)
    assert "mtp" in _labels(r)
    assert r.meta["skipped"]["eagle3"].endswith("while mtp has its own; name it (--mechanism eagle3) or give its "
                                                "acceptance (--acceptance eagle3:...) to price it")
    named = speedplan.sweep("deepseek-v3", "h200-sxm", tp=8, mechanisms=["mtp", "eagle3"], **GRID)
    assert {"mtp", "eagle3"} == _labels(named)


def test_mtp_borrowed_from_deepseek_v3_gives_way_to_a_head_measured_on_the_target():
    """glm-4.7-flash's MTP default is DeepSeek-V3's rows (not its own), its EAGLE-3 row its own (SafeAILab/EAGLE PR
    #330): a default sweep planned every engine MTP on DeepSeek-V3's numbers (a review, stop 61)."""
    r = speedplan.sweep("glm-4.7-flash", "h200-sxm", **GRID)
    assert "mtp" not in _labels(r) and {"eagle3", "eagle3-tree"} <= _labels(r)
    assert r.meta["skipped"]["mtp"].startswith("no published acceptance for glm-4.7-flash (the mtp rows are "
                                               "DeepSeek-V3's, ")
    assert "while eagle3 has its own" in r.meta["skipped"]["mtp"]
    assert "mtp" in _labels(speedplan.sweep("glm-4.7-flash", "h200-sxm", mechanisms=["mtp", "eagle3"], **GRID))


def test_a_models_own_mtp_layers_on_a_siblings_rows_outrank_another_targets_head():
    """deepseek-v3.2 ships an MTP layer, measured on DeepSeek-V3; no EAGLE head is published for it: a default sweep
    planned it an EAGLE-3 tree on Llama-3.1-8B's AL 6.13, 3.86x on 8 B200s (a review, stop 61)."""
    r = speedplan.sweep("deepseek-v3.2", "b200", tp=8, **GRID)
    heads = {"eagle", "eagle-tree", "eagle3", "eagle3-tree"}
    assert heads <= set(r.meta["skipped"]) and not heads & _labels(r) and "mtp" in _labels(r)
    assert "while mtp runs the model's own MTP layers (on DeepSeek-V3's rows)" in r.meta["skipped"]["eagle3"]
