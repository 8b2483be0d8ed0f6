"""n-gram (prompt lookup) drafting: the host finds the last n tokens earlier in the sequence
and proposes what followed them. No draft model; verification is a chain of 1 + D where a
match was found and of 1 token where none was (vLLM's proposer returns no drafts then), so a
step verifies 1 + match · D tokens per sequence on average (`Acceptance.match`).

The expected tokens, not the mixture of two step shapes, are priced: exact while the step is
memory-bound (where n-gram lookup pays), an approximation once it is compute-bound."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.plan.defaults import ngram_default
from speedplan.plan.mechanisms.base import Mechanism

# Host-side lookup per step (assumption: vLLM/SGLang run it on the CPU in tens of
# microseconds; not measured by speedplan).
LOOKUP_US = 20.0
LOOKUP_US_PER_SEQ = 1.0


@dataclass(frozen=True)
class Ngram(Mechanism):
    name = "ngram"
    drafts_on_host = True
    lookup_us: float = LOOKUP_US  # host lookup per step (µs) ...
    lookup_us_per_seq: float = LOOKUP_US_PER_SEQ  # ... plus this per sequence

    def verify_tokens(self, draft_len, nodes) -> np.ndarray:
        """1 + match · D per sequence: steps without a match verify only the last token."""
        return 1.0 + self.acceptance.match * np.asarray(draft_len, float)

    @classmethod
    def default(cls, target):
        return ngram_default()

    @classmethod
    def resolve_acceptance(cls, acceptance, target, **context):
        """As every mechanism's, and where a rate given for n-gram states no match probability, the
        source says that every step is taken to find a match (match = 1): the published default
        finds one in about half the steps, and a step without one verifies a single token."""
        accepted, source = super().resolve_acceptance(acceptance, target, **context)
        stated = "match" in acceptance.source if acceptance is not None else True  # alpha=0.8,match=1 says so
        if acceptance is not None and acceptance.match == 1.0 and not stated and source.startswith("user"):
            source += ("; every step taken to find a match (match = 1; the published default finds one in "
                       f"{ngram_default()[0].match:.3g} of steps): give ngram:alpha=A,match=M to set it")
        return accepted, source

    def host_draft_s(self, batch, draft_len) -> np.ndarray:
        batch, _ = np.broadcast_arrays(np.asarray(batch, float), np.asarray(draft_len, float))
        return (self.lookup_us + self.lookup_us_per_seq * batch) * 1e-6
