"""EAGLE-2 dynamic tree on an EAGLE-1/2 head: depth-D expansion, level 1 from the pass over
the 1 + D verified tokens of each sequence, levels 2..D over the top-k frontier, each through
the head and lm_head; the target verifies a tree of N nodes (with a tree mask). Its acceptance
is the `eagle` family's one per-rank vector. SGLang `EAGLE` with topk > 1; vLLM 0.33 and
TensorRT-LLM cannot run it."""

from __future__ import annotations

from dataclasses import dataclass


from speedplan.plan.mechanisms.base import TopkTree
from speedplan.plan.mechanisms.eagle import Eagle
from speedplan.plan.mechanisms.heads import head_pass


@dataclass(frozen=True)
class EagleTree(TopkTree, Eagle):
    name = "eagle-tree"
    usage = "eagle-tree[:topk=K,vocab=N,config=PATH]"  # the spec --mechanism reads: any of the options, comma-separated after one colon
    family = "eagle"
    topk: int = 8  # children kept per tree level (the frontier)

    def one_pass(self, cost, target, batch, q_len, context, tp, first):
        return head_pass(cost, self.draft, target, batch, q_len, context, tp, lm_head_rows=batch if first else None)
