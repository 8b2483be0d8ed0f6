"""An independent draft model with the target's tokenizer: D sequential draft forwards at
B tokens each (the first absorbs the bonus token), its own weights and KV cache."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.cost.forward import forward_cost
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanisms.base import Mechanism
from speedplan.plan.mechanisms.heads import chain_passes
from speedplan.specs.model import ModelSpec, get_model

# The target's usual small sibling, used when the spec names no draft ("draft-model").
DEFAULT_DRAFT_FOR = {"llama-3.1-8b": "llama-3.2-1b", "llama-3.1-70b": "llama-3.2-1b", "llama-3.1-405b": "llama-3.2-1b",
                     "qwen3-32b": "qwen3-8b", "qwen3-235b-a22b": "qwen3-8b"}


@dataclass(frozen=True)
class DraftModel(Mechanism):
    name = "draft-model"
    default_acceptance = (
        Acceptance.iid(0.75, "published"),
        "Leviathan et al. 2023 Tab.2, T5-XXL/T5-small, EnDe, T=0: alpha 0.75",
    )
    draft: ModelSpec | None = None

    @property
    def label(self) -> str:
        return f"draft-model:{self.draft.name}"

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context = np.broadcast_arrays(*(np.asarray(x, float) for x in (batch, draft_len, context)))
        step = lambda b, q, ctx: forward_cost(cost, self.draft, b, q, ctx, 1, lm_head_rows=b)
        return chain_passes(step, batch, draft_len, context)

    def draft_forwards(self, draft_len, nodes):
        return np.asarray(draft_len, dtype=float) + 0 * np.asarray(nodes, dtype=float)

    def draft_layers(self) -> int:
        return self.draft.layers

    def draft_logits(self, batch, draft_len, nodes):
        return np.asarray(batch, float) * self.draft_forwards(draft_len, nodes) * self.draft.vocab

    def extra_memory_bytes(self, target, batch, context, tp):
        batch, context = np.broadcast_arrays(np.asarray(batch, float), np.asarray(context, float))
        return self.draft.weight_bytes() + batch * context * self.draft.kv_bytes_per_token()

    @classmethod
    def cannot_run(cls, target):
        if target.name not in DEFAULT_DRAFT_FOR:
            return "no preset draft for this model; pass draft-model:MODEL"
        return None

    @classmethod
    def build(cls, arg, target, acceptance):
        if not arg:
            if target.name not in DEFAULT_DRAFT_FOR:
                raise SpeedplanInputError(f"draft-model: no preset draft for {target.name}; pass draft-model:MODEL")
            arg = DEFAULT_DRAFT_FOR[target.name]
        draft = get_model(arg)
        if draft.vocab != target.vocab:
            raise SpeedplanInputError(
                f"draft {draft.name} has vocab {draft.vocab}, target {target.name} has {target.vocab}: "
                "a draft model must share the target's tokenizer"
            )
        return cls(*cls.resolve_acceptance(acceptance), draft=draft)
