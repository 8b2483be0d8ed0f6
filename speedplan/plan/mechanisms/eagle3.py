"""EAGLE-3 head, chain: D sequential forwards of one decoder layer on [embedding, hidden],
the first after fusing the target's low/mid/high hidden states (fc 3h→h), each through a
reduced-vocabulary lm_head (heads.py). `eagle3:config=PATH` (or `eagle3:PATH`) reads the head's
shape from its config.json; `eagle3:vocab=N` sets the draft vocabulary. vLLM `method: eagle3`,
SGLang `EAGLE3`, TensorRT-LLM `Eagle3`. A head config of 2..4 decoder layers is priced as
such and named in the acceptance source (the published acceptance is a one-layer head's)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError, clipped
from speedplan.plan.defaults import head_default, head_positions
from speedplan.plan.mechanisms.base import ChainDrafting, Mechanism, parse_options
from speedplan.plan.mechanisms.heads import Eagle3Head, chain_passes, eagle3_head, eagle3_memory_bytes, eagle3_pass
from speedplan.specs.files import is_a


@dataclass(frozen=True)
class Eagle3(ChainDrafting, Mechanism):
    name = "eagle3"
    usage = "eagle3[:vocab=N,config=PATH]"  # the spec --mechanism reads: any of the options, comma-separated after one colon
    options = ("vocab",)
    head: Eagle3Head | None = None
    positions: tuple[int, str] | None = None  # what the head holds: its config's, else the published head's

    def drafter_positions(self):
        return self.positions

    def draft_cost(self, cost, target, batch, draft_len, context, nodes, tp):
        batch, draft_len, context = np.broadcast_arrays(*(np.asarray(x, float) for x in (batch, draft_len, context)))
        step = lambda b, q, ctx, first: eagle3_pass(cost, self._head(target), b, q, ctx, tp, first, lm_head_rows=b)
        return chain_passes(step, batch, draft_len, context)

    def upkeep_cost(self, cost, target, batch, context, tp, logits):
        return eagle3_pass(cost, self._head(target), batch, 1, context, tp, True, lm_head=logits)

    def drafter_key(self):
        return ("eagle3-head", self.head)

    def _head(self, target) -> Eagle3Head:
        """The head in the dtype the target is priced in (the sweep may move it, e.g. to fp32 on a CPU)."""
        if self.head.layer.dtype == target.dtype:
            return self.head
        return replace(self.head, layer=replace(self.head.layer, dtype=target.dtype))

    def draft_shape(self):
        return self.head.layer  # its vocab is the draft vocabulary

    def extra_memory_bytes(self, target, batch, context, tp, window_pool=None):  # a head: no sliding layers
        batch, context = np.broadcast_arrays(np.asarray(batch, float), np.asarray(context, float))
        return eagle3_memory_bytes(self.head, batch, context, tp)

    @classmethod
    def default(cls, target):
        return head_default(cls.family_name(), target.name)

    @classmethod
    def build(cls, arg, target, acceptance, **fields):
        spec = f"{cls.name}:{clipped(arg)}"
        first = arg.split(",")[0]
        if first and "=" not in first and (first.endswith(".json") or is_a(Path(first), "any")):
            arg = ",".join([f"config={first}", *arg.split(",")[1:]])  # `eagle3:PATH`
        options = parse_options(spec, arg, cls.options, ("config",))
        vocab = options.pop("vocab", None)
        if vocab is not None and not 1 <= vocab <= target.vocab:
            raise SpeedplanInputError(f"mechanism {spec}: vocab must be in 1..{target.vocab}")
        config = options.pop("config", None)
        if config is not None and not str(config).strip():
            raise SpeedplanInputError(f"mechanism {spec}: config= needs the path of the head's config.json")
        head = eagle3_head(target, config, vocab)
        positions = head_positions(cls.family_name(), target.name)  # the head the launch files name, whoever's AL
        if config is not None:
            n = head.layer.max_context
            positions = (n, f"the head config {config}") if n else None
        rate, source = cls.resolve_acceptance(acceptance, target)
        if head.layer.layers != 1:  # the published rows are one-layer heads'
            source += (f"; the head given has {head.layer.layers} decoder layers"
                       + (", the published heads 1" if acceptance is None else ""))
        return cls(rate, source, head=head, positions=positions, **options, **fields)
