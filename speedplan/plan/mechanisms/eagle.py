"""EAGLE-1/2 head, chain: D sequential forwards of one decoder layer on [embedding, hidden]
(a 2h→h fuse) and the target's full lm_head (or a reduced draft vocabulary: `eagle:vocab=N`;
a head's config.json: `eagle:config=PATH`). vLLM `method: eagle`, SGLang `EAGLE`; TensorRT-LLM's
PyTorch backend runs EAGLE-3 heads only."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from speedplan.errors import SpeedplanInputError, clipped
from speedplan.plan.defaults import head_default, head_positions
from speedplan.plan.mechanisms.base import ChainDrafting, Mechanism, parse_options
from speedplan.plan.mechanisms.heads import chain_passes, head_memory_bytes, head_pass, head_spec
from speedplan.specs.model import ModelSpec, get_model


@dataclass(frozen=True)
class Eagle(ChainDrafting, Mechanism):
    name = "eagle"
    usage = "eagle[:vocab=N,config=PATH]"  # the spec --mechanism reads: any of the options, comma-separated after one colon
    options = ("vocab",)
    text_options = ("config",)
    draft: ModelSpec | None = None  # the head, as a one-layer model of the target's dimensions
    draft_vocab: int | None = None  # the head's output vocabulary when reduced
    positions: tuple[int, str] | None = None  # what the head holds: its config's, else the published head's

    def drafter_positions(self):
        return self.positions

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context = np.broadcast_arrays(*(np.asarray(x, float) for x in (batch, draft_len, context)))
        step = lambda b, q, ctx, first: head_pass(cost, self.draft, target, b, q, ctx, tp, lm_head_rows=b)
        return chain_passes(step, batch, draft_len, context)

    def upkeep_cost(self, cost, target, batch, context, tp, logits):
        return head_pass(cost, self.draft, target, batch, 1, context, tp, lm_head=logits)

    def drafter_key(self):
        return ("head", replace(self.draft, name=""))  # a chain and its tree name one head apart

    def draft_shape(self):
        return self.draft

    def extra_memory_bytes(self, target, batch, context, tp, window_pool=None):  # a head: no sliding layers
        batch, context = np.broadcast_arrays(np.asarray(batch, float), np.asarray(context, float))
        return head_memory_bytes(self.draft, target, self.draft_vocab, batch, context, tp)

    @classmethod
    def default(cls, target):
        return head_default(cls.family_name(), target.name)

    @classmethod
    def build(cls, arg, target, acceptance, **fields):
        options = parse_options(f"{cls.name}:{arg}", arg, cls.options, cls.text_options)
        vocab = options.pop("vocab", None)
        if vocab is not None and not 1 <= vocab <= target.vocab:
            raise SpeedplanInputError(f"mechanism {cls.name}:{clipped(arg)}: vocab must be in 1..{target.vocab}")
        draft = head_spec(target, cls.name, vocab)
        config = options.pop("config", None)
        positions = head_positions(cls.family_name(), target.name)  # the head the launch files name, whoever's AL
        if config is not None:  # the head's own config.json: its layer's shape (one layer, dense)
            layer = get_model(config)
            positions = (layer.max_context, f"the head config {config}") if layer.max_context else None
            if layer.hidden != target.hidden or layer.layers != 1:  # its 2h→h fuse reads the target's hidden states
                raise SpeedplanInputError(
                    f"mechanism {cls.name}:{clipped(arg)}: the head config has hidden_size {layer.hidden} and {layer.layers} "
                    f"layers; an EAGLE-1/2 head for {target.name} has hidden_size {target.hidden} and 1 layer")
            draft = replace(draft, hidden=layer.hidden, heads=layer.heads, kv_heads=layer.kv_heads,
                            head_dim=layer.head_dim, intermediate=layer.dense_intermediate or draft.intermediate)
        return cls(*cls.resolve_acceptance(acceptance, target), draft=draft, draft_vocab=vocab, positions=positions,
                   **options, **fields)
