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
