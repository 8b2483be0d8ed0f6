"""n-gram (prompt lookup) drafting: the host finds the last n tokens earlier in the sequence
and proposes what followed them. No draft model; verification is a chain of 1 + D."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanisms.base import Mechanism

# Host-side lookup per step (assumption: vLLM/SGLang run it on the CPU in tens of
# microseconds; not measured by speedplan).
LOOKUP_US = 20.0
LOOKUP_US_PER_SEQ = 1.0


@dataclass(frozen=True)
class Ngram(Mechanism):
    name = "ngram"
    default_acceptance = (
        Acceptance.iid(1 - 1 / 1.73, "published"),
        "Spec-Bench leaderboard (A100), Vicuna-7B-v1.3, PLD: AL 1.73; alpha = 1 - 1/AL (long-draft limit)",
    )
    lookup_us: float = LOOKUP_US  # host lookup per step (µs) ...
    lookup_us_per_seq: float = LOOKUP_US_PER_SEQ  # ... plus this per sequence

    def host_draft_s(self, batch, draft_len) -> np.ndarray:
        batch, _ = np.broadcast_arrays(np.asarray(batch, float), np.asarray(draft_len, float))
        return (self.lookup_us + self.lookup_us_per_seq * batch) * 1e-6
