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
    lookup_us: float = LOOKUP_US  # host lookup per step (µs) ...
    lookup_us_per_seq: float = LOOKUP_US_PER_SEQ  # ... plus this per sequence

    def verify_tokens(self, draft_len, nodes) -> np.ndarray:
        """1 + match · D per sequence: steps without a match verify only the last token."""
        return 1.0 + self.acceptance.match * np.asarray(draft_len, float)

    @classmethod
    def default(cls, target):
        return ngram_default()

    def host_draft_s(self, batch, draft_len) -> np.ndarray:
        batch, _ = np.broadcast_arrays(np.asarray(batch, float), np.asarray(draft_len, float))
        return (self.lookup_us + self.lookup_us_per_seq * batch) * 1e-6
