"""EAGLE-2 dynamic tree on an EAGLE-1/2 head: depth-D expansion, level 1 at 1 token per
sequence, levels 2..D over the top-k frontier, each through the head and lm_head; the target
verifies a tree of N nodes (with a tree mask). Its acceptance is the `eagle` family's one
per-rank vector. SGLang `EAGLE` with topk > 1; vLLM 0.33 and TensorRT-LLM cannot run it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.plan.mechanisms.base import tree_rows
from speedplan.plan.mechanisms.eagle import Eagle
from speedplan.plan.mechanisms.heads import head_pass


@dataclass(frozen=True)
class EagleTree(Eagle):
    name = "eagle-tree"
    family = "eagle"
    is_tree = True
    options = ("topk", "vocab")
    topk: int = 8  # children kept per tree level (the frontier)

    def draft_logits(self, batch, draft_len, nodes):
        return tree_rows(batch, draft_len, self.topk) * self.draft_shape().vocab + 0 * np.asarray(nodes, dtype=float)

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context, nodes = np.broadcast_arrays(
            *(np.asarray(x, float) for x in (batch, draft_len, context, nodes)))
        first = head_pass(cost, self.draft, target, batch, 1, context, tp)
        level = head_pass(cost, self.draft, target, batch, self.topk, context + nodes / 2, tp)
        return first + level.scaled(np.maximum(draft_len - 1, 0))
