"""EAGLE-1/2 head, chain: D sequential forwards of one decoder layer on [embedding, hidden]
(a 2h→h fuse) and the full lm_head (or a reduced draft vocabulary: `eagle:vocab=N`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanisms.base import Mechanism, parse_options
from speedplan.plan.mechanisms.heads import chain_passes, head_memory_bytes, head_pass, head_spec
from speedplan.specs.model import ModelSpec


@dataclass(frozen=True)
class Eagle(Mechanism):
    name = "eagle"
    default_acceptance = (
        Acceptance.iid(1 - 1 / 3.61, "published"),
        "Spec-Bench leaderboard (A100), Vicuna-7B-v1.3, EAGLE: AL 3.61; alpha = 1 - 1/AL (long-draft limit; "
        "the row used a tree, so this chain alpha is optimistic)",
    )
    options = ("vocab",)
    draft: ModelSpec | None = None  # the head, as a one-layer model of the target's dimensions
    draft_vocab: int | None = None  # the head's output vocabulary when reduced

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context = np.broadcast_arrays(*(np.asarray(x, float) for x in (batch, draft_len, context)))
        step = lambda b, q, ctx: head_pass(cost, self.draft, target, b, q, ctx, tp)
        return chain_passes(step, batch, draft_len, context)

    def draft_forwards(self, draft_len, nodes):
        return np.asarray(draft_len, dtype=float) + 0 * np.asarray(nodes, dtype=float)

    def draft_layers(self) -> int:
        return self.draft.layers

    def draft_logits(self, batch, draft_len, nodes):
        return np.asarray(batch, float) * self.draft_forwards(draft_len, nodes) * self.draft.vocab

    def extra_memory_bytes(self, target, batch, context, tp):
        batch, context = np.broadcast_arrays(np.asarray(batch, float), np.asarray(context, float))
        return head_memory_bytes(self.draft, target, self.draft_vocab, batch, context, tp)

    @classmethod
    def build(cls, arg, target, acceptance, **fields):
        options = parse_options(f"{cls.name}:{arg}", arg, cls.options)
        vocab = options.get("vocab")
        if vocab is not None and not 1 <= vocab <= target.vocab:
            raise SpeedplanInputError(f"mechanism {cls.name}:{arg}: vocab must be in 1..{target.vocab}")
        extra = {k: v for k, v in options.items() if k != "vocab"}
        return cls(*cls.resolve_acceptance(acceptance), draft=head_spec(target, cls.name, vocab),
                   draft_vocab=vocab, **extra, **fields)
