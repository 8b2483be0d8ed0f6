"""What a step of the sweep holds in GPU memory (bytes on the busiest GPU): the feasibility
test of every row (`plan.pricing`) and how many sequences a launch holds (`plan.capacity`).
How much of the GPU a step may hold is the engine profile's memory rule
(`engine.memory_rule`: a share of the device, of the memory free after the weights, or the
device less a reserve that depends on the GPU, the TP size, the platform and the model)."""

from __future__ import annotations

import numpy as np

from speedplan.cost.weights import memory_per_rank
from speedplan.engine.memory_rule import usable_bytes
from speedplan.plan.mechanisms import Mechanism
from speedplan.signatures import takes_keyword
from speedplan.specs.model import ModelSpec


def memory_bytes(mech: Mechanism | None, target: ModelSpec, running, draft_len, context, nodes, tp: int,
                 window_pool: float | None = None) -> np.ndarray:
    """Bytes on the busiest GPU of a step running `running` sequences of `context` tokens:
    the target's weights and KV for context + the verified tokens, and the drafter's weights
    and state (None: plain decoding). Affine in `running`. `window_pool`: the engine memory
    rule's (what a sliding-window layer holds, `ModelSpec.kv_bytes_per_rank`)."""
    if mech is None:
        q = np.ones(np.shape(running))
        return memory_per_rank(target, running, context + q, tp, states=q, window_pool=window_pool)
    q = mech.verify_tokens(draft_len, nodes)
    # a drafter with sliding-window layers holds them as the engine's pool does (`DraftModel`); a
    # mechanism written before window_pool (a user's subclass) is called as it was
    takes = takes_keyword(type(mech).extra_memory_bytes, "window_pool")
    pool = {"window_pool": window_pool} if window_pool is not None and takes else {}
    return (memory_per_rank(target, running, context + q, tp, states=q, window_pool=window_pool)
            + mech.extra_memory_bytes(target, running, context + q, tp, **pool))


def launch_inputs(platform: str, target: ModelSpec, tp: int) -> dict:
    """What an engine memory rule reads of a launch besides the GPU's memory and the weights
    (`engine.memory_rule.usable_bytes`' keywords): the TP size, the hardware's platform and the
    target, whose context length SGLang's ROCm default reads."""
    return dict(tp=tp, platform=platform, context_len=target.max_context, model=target)


def step_usable_bytes(engine, hw, mech: Mechanism | None, target: ModelSpec, draft_len, context, nodes,
                      tp: int) -> np.ndarray:
    """Bytes per GPU the steps of (draft_len, context, nodes) may hold under `engine`'s memory
    rule on `hw` (its memory and platform) for `target` (its context length): the weights its
    launch loads (target and drafter) are its memory at zero sequences."""
    weights = memory_bytes(mech, target, np.zeros(np.shape(context)), draft_len, context, nodes, tp)
    return usable_bytes(engine.memory, hw.memory_bytes, weights, **launch_inputs(hw.platform, target, tp))
