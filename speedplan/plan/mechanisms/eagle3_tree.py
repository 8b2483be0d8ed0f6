"""EAGLE-3 dynamic tree: the EAGLE-3 head (eagle3.py) expanded over a top-k frontier, level 1
at 1 token per sequence (with the fc over the target's hidden states), levels 2..D at topk
tokens; the target verifies N nodes with a tree mask. Acceptance is the `eagle3` family's one
per-rank vector. SGLang `EAGLE3` with topk > 1, TensorRT-LLM `Eagle3` with use_dynamic_tree."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.plan.mechanisms.base import tree_rows
from speedplan.plan.mechanisms.eagle3 import Eagle3
from speedplan.plan.mechanisms.heads import eagle3_pass


@dataclass(frozen=True)
class Eagle3Tree(Eagle3):
    name = "eagle3-tree"
    family = "eagle3"
    is_tree = True
    options = ("topk", "vocab")
    topk: int = 8  # children kept per tree level (the frontier)

    def draft_logits(self, batch, draft_len, nodes):
        return tree_rows(batch, draft_len, self.topk) * self.draft_shape().vocab + 0 * np.asarray(nodes, dtype=float)

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context, nodes = np.broadcast_arrays(
            *(np.asarray(x, float) for x in (batch, draft_len, context, nodes)))
        first = eagle3_pass(cost, self._head(target), batch, 1, context, tp, True)
        level = eagle3_pass(cost, self._head(target), batch, self.topk, context + nodes / 2, tp, False)
        return first + level.scaled(np.maximum(draft_len - 1, 0))
