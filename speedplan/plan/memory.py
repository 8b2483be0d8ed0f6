"""What a step of the sweep holds in GPU memory (bytes on the busiest GPU): the feasibility
test of every row (`plan.sweep`) and how many sequences a launch holds (`plan.capacity`)."""

from __future__ import annotations

import numpy as np

from speedplan.plan.mechanisms import Mechanism
from speedplan.specs.model import ModelSpec

# Fraction of device memory usable for weights + KV (the rest: activations, CUDA graphs,
# allocator slack); vLLM's default gpu_memory_utilization is 0.9.
MEMORY_UTILIZATION = 0.9


def usable_bytes(hw) -> float:
    """Bytes per GPU a step may hold: MEMORY_UTILIZATION of the device's memory."""
    return hw.memory_bytes * MEMORY_UTILIZATION


def memory_bytes(mech: Mechanism | None, target: ModelSpec, running, draft_len, context, nodes, tp: int) -> np.ndarray:
    """Bytes on the busiest GPU of a step running `running` sequences of `context` tokens:
    the target's weights and KV for context + the verified tokens, and the drafter's weights
    and state (None: plain decoding). Affine in `running`."""
    if mech is None:
        q = np.ones(np.shape(running))
        return target.memory_per_rank(running, context + q, tp, states=q)
    q = mech.verify_tokens(draft_len, nodes)
    return target.memory_per_rank(running, context + q, tp, states=q) + mech.extra_memory_bytes(target, running,
                                                                                                context + q, tp)
