"""EAGLE-2 dynamic tree: depth-D expansion, level 1 at 1 token per sequence, levels 2..D over
the top-k frontier, each through the head and lm_head; the target verifies a tree of N nodes
(with a tree mask)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanisms.eagle import Eagle
from speedplan.plan.mechanisms.heads import head_pass


@dataclass(frozen=True)
class EagleTree(Eagle):
    name = "eagle-tree"
    is_tree = True
    default_acceptance = (
        Acceptance.iid(0.564, "published"),
        "Spec-Bench leaderboard (RTX3090), Vicuna-7B-v1.3, EAGLE2: AL 4.36; geometric per-rank alpha 0.564 fitted "
        "to a 60-node, depth-6, top-10 tree (EAGLE-2 defaults)",
    )
    # Settings of the published row the per-rank fit assumes: (AL, depth, nodes, topk); tests check it.
    default_tree_fit = (4.36, 6, 60, 10)
    options = ("topk", "vocab")
    topk: int = 8  # children kept per tree level (the frontier)

    def __post_init__(self) -> None:
        if not 1 <= self.topk <= 64:
            raise SpeedplanInputError(f"mechanism {self.name}: topk must be in 1..64")

    def acceptance_length(self, draft_len, nodes) -> np.ndarray:
        return self.acceptance.tree_al(draft_len, nodes, self.topk)

    def draft_logits(self, batch, draft_len, nodes):
        """Level 1 scores one token per sequence, each later level the top-k frontier."""
        batch, draft_len = np.broadcast_arrays(np.asarray(batch, float), np.asarray(draft_len, float))
        rows = batch * (draft_len > 0) + batch * self.topk * np.maximum(draft_len - 1, 0)
        return rows * self.draft.vocab + 0 * np.asarray(nodes, dtype=float)

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context, nodes = np.broadcast_arrays(
            *(np.asarray(x, float) for x in (batch, draft_len, context, nodes)))
        first = head_pass(cost, self.draft, target, batch, 1, context, tp)
        level = head_pass(cost, self.draft, target, batch, self.topk, context + nodes / 2, tp)
        return first + level.scaled(np.maximum(draft_len - 1, 0))
