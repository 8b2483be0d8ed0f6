"""EAGLE-3 dynamic tree: the EAGLE-3 head (eagle3.py) expanded over a top-k frontier, level 1
from the pass over the 1 + D verified tokens of each sequence (with the fc over the target's
hidden states), levels 2..D at topk tokens; the target verifies N nodes with a tree mask.
Acceptance is the `eagle3` family's one per-rank vector. SGLang `EAGLE3` with topk > 1,
TensorRT-LLM `Eagle3` with use_dynamic_tree."""

from __future__ import annotations

from dataclasses import dataclass


from speedplan.plan.mechanisms.base import TopkTree
from speedplan.plan.mechanisms.eagle3 import Eagle3
from speedplan.plan.mechanisms.heads import eagle3_pass


@dataclass(frozen=True)
class Eagle3Tree(TopkTree, Eagle3):
    name = "eagle3-tree"
    usage = "eagle3-tree[:topk=K,vocab=N,config=PATH]"  # the spec --mechanism reads: any of the options, comma-separated after one colon
    family = "eagle3"
    topk: int = 8  # children kept per tree level (the frontier)

    def one_pass(self, cost, target, batch, q_len, context, tp, first):
        return eagle3_pass(cost, self._head(target), batch, q_len, context, tp, first,
                           lm_head_rows=batch if first else None)
