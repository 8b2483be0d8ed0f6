"""Medusa: one forward of K heads (a ResBlock h×h and its own lm_head each) proposes a tree
that the target verifies with a tree mask."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.cost.forward import ForwardCost
from speedplan.plan.defaults import head_default
from speedplan.plan.mechanisms.base import Mechanism, parse_options

MAX_HEADS = 8  # heads whose weights are kept in memory


@dataclass(frozen=True)
class Medusa(Mechanism):
    name = "medusa"
    usage = "medusa[:topk=K]"  # the spec `speedplan sweep --mechanism` reads
    is_tree = True
    topk: int = 8
    vocab: int = 0  # the target's vocabulary, which every head scores

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len = np.broadcast_arrays(np.asarray(batch, float), np.asarray(draft_len, float))
        h, v = target.hidden, target.vocab
        res = cost.gemm(batch, h, h, target.dtype)
        head = cost.gemm(batch, v, h, target.dtype)
        zero = np.zeros_like(batch)
        return ForwardCost(
            gemm_s=(res.latency_us + head.latency_us) * 1e-6 * draft_len, attention_s=zero, tree_mask_s=zero,
            comm_s=zero, elementwise_s=zero, gemm_flops=2 * batch * (h * h + v * h) * draft_len,
            gemm_bytes=(h * h + v * h) * target.dtype_bytes * draft_len, gemm_compute_bound_s=zero,
            profile_share=np.where(res.from_profile & head.from_profile, 1.0, 0.0),
            out_of_range_share=np.where(res.out_of_range | head.out_of_range, 1.0, 0.0))

    def draft_forwards(self, draft_len, nodes):
        """All heads run in one pass over the last hidden state."""
        return (np.asarray(draft_len, dtype=float) > 0) + 0 * np.asarray(nodes, dtype=float)

    def draft_layers(self) -> int:
        return 1  # each head is one ResBlock

    def draft_rows(self, batch, draft_len, nodes):
        """Every head scores one position for every sequence."""
        return np.asarray(batch, float) * np.asarray(draft_len, float) + 0 * np.asarray(nodes, float)

    def draft_logits(self, batch, draft_len, nodes):
        return self.draft_rows(batch, draft_len, nodes) * self.vocab

    def extra_memory_bytes(self, target, batch, context, tp, window_pool=None):  # a head: no sliding layers
        batch, _ = np.broadcast_arrays(np.asarray(batch, float), np.asarray(context, float))
        h, v = target.hidden, target.vocab
        return np.zeros_like(batch) + (h * h + v * h) * target.dtype_bytes * MAX_HEADS

    @classmethod
    def default(cls, target):
        return head_default("medusa", target.name)

    @classmethod
    def skip_by_default(cls, target):
        return ("no serving engine runs Medusa at the versions speedplan emits for (docs/serving.md); "
                "name it (--mechanism medusa) to price it anyway")

    @classmethod
    def build(cls, arg, target, acceptance):
        options = parse_options(f"{cls.name}:{arg}", arg, ("topk",))
        return cls(*cls.resolve_acceptance(acceptance, target), **options, vocab=target.vocab)
