"""Whether one sequence of the model's full context fits the KV cache a launch leaves.

Every engine defaults its longest sequence to the model's full context (max_position_embeddings,
with rope scaling: `ModelSpec.max_context`), whatever context the plan was made for. Where the
engine's memory rule leaves less KV cache after the launch's weights (target and drafter) than
one such sequence needs, vLLM refuses to start, SGLang starts and cuts requests, TensorRT-LLM
lowers its limit itself (each engine module says what it does, from its source, and what it
writes). `context_fit` finds it with the planner's own memory arithmetic
(`plan.memory.memory_bytes`, `engine.memory_rule.usable_bytes`); `ContextFit` carries the
numbers to the renderers on `ServingPlan.context_fit`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.units import gigabytes

ROUND_TOKENS = 1024  # a limit is written as a multiple of this many tokens, rounded down


@dataclass(frozen=True)
class ContextFit:
    """One sequence of the model's full context against the KV cache one launch leaves, on the
    busiest GPU of the launch (the one the planner's memory model fills first).

    max_context: tokens the model's config holds (the engines' default longest sequence).
    full_kv_bytes: bytes of KV cache (target and drafter) one sequence of max_context tokens holds.
    kv_left_bytes: bytes the engine's memory rule leaves for KV cache after the launch's weights.
    weight_bytes: bytes of the launch's weights (target and drafter), its memory at zero sequences.
    fits_context: the most tokens (at most max_context) one sequence holds within kv_left_bytes.
    planned_context: the longest context (tokens) the plan was made for.
    rule: the engine profile's memory rule in words, e.g. "90% of 85.5 GB".
    drafter: the launch loads a drafter, whose weights and KV are counted (False: plain decoding, or
    a mechanism that drafts without one, n-gram's prompt lookup).
    mechanism: the launch's mechanism label ("": plain decoding)."""

    max_context: int
    full_kv_bytes: float
    kv_left_bytes: float
    weight_bytes: float
    fits_context: int
    planned_context: int
    rule: str = ""
    drafter: bool = True
    mechanism: str = ""

    @property
    def fits(self) -> bool:
        """One sequence of the full context fits: the engines' default needs no option."""
        return self.full_kv_bytes <= self.kv_left_bytes

    @property
    def limit(self) -> int | None:
        """The longest sequence (tokens) to serve where the full context does not fit (None where
        it does): fits_context rounded down to a multiple of ROUND_TOKENS, never below the
        longest context the plan was made for."""
        if self.fits:
            return None
        return max(self.fits_context // ROUND_TOKENS * ROUND_TOKENS, self.planned_context)

    def why(self) -> str:
        """Why the full context does not fit, in words, for a note."""
        return (f"the model's full context, {self.max_context:,} tokens (max_position_embeddings), needs "
                f"{gigabytes(self.full_kv_bytes)} of KV cache per GPU for one sequence "
                f"({'target and drafter' if self.drafter else 'the target alone: ' + self._no_drafter()}), and "
                f"the engine profile's memory rule ({self.rule}) leaves {gigabytes(max(self.kv_left_bytes, 0.0))} for it "
                f"after the launch's {gigabytes(self.weight_bytes)} of weights")

    def _no_drafter(self) -> str:
        """Why no drafter is counted: n-gram's note said "target and drafter" of the target's KV alone."""
        return f"{self.mechanism} loads no drafter model" if self.mechanism else "plain decoding loads no drafter"

    def chosen(self) -> str:
        """How `limit` was chosen, for a note."""
        n = self.limit
        if n is not None and n > self.fits_context:
            return (f"{n:,} is the longest context the plan was made for, though one sequence fits only "
                    f"{self.fits_context:,} tokens")
        return (f"{n:,} is the longest context, in multiples of {ROUND_TOKENS:,} tokens, that one sequence fits in "
                f"(one fits {self.fits_context:,}; the plan is for contexts up to {self.planned_context:,})")


def limit_flag(plan, flag: str, note) -> tuple[list[str], list[str]]:
    """An engine's longest-sequence option for a `ServingPlan`: ([flag, N], ["flag N: why; " +
    note(N, fit)]) where one sequence of the model's full context does not fit the KV cache the launch
    leaves (`plan.context_fit`, N its `limit`); ([], []) where it fits or was not checked."""
    fit = plan.context_fit
    if fit is None or fit.limit is None:
        return [], []
    return [flag, str(fit.limit)], [f"{flag} {fit.limit}: {fit.why()}; {note(fit.limit, fit)}"]


def context_fit(target, mech, rule, device_bytes: float, tp: int, draft_len: int, nodes: int,
                planned_context: int, *, platform: str = "cuda") -> ContextFit | None:
    """`ContextFit` of a launch of `target` at tensor parallel `tp` loading `mech`'s drafter
    (None: plain decoding) on a GPU of `device_bytes` bytes, under the engine memory rule `rule`
    (`engine.memory_rule.MemoryRule`). `draft_len` and `nodes` are the plan's widest setting
    (they count a linear-attention model's recurrent states per sequence, `plan.memory`);
    `planned_context` is the longest context (tokens) the plan was made for; `platform` the
    hardware's ("cuda", "rocm", "cpu": SGLang's default share differs on ROCm). None where the
    model's config states no context (`max_context` 0)."""
    from speedplan.engine.memory_rule import usable_bytes
    from speedplan.plan.memory import launch_inputs, memory_bytes

    if not target.max_context:
        return None
    q = 1.0 if mech is None else float(np.max(mech.verify_tokens(draft_len, nodes)))  # tokens a step adds
    top = int(target.max_context)

    def kv_of(lengths: np.ndarray, running: float = 1.0) -> np.ndarray:  # bytes of `running` sequences of `lengths` tokens
        return np.broadcast_to(memory_bytes(mech, target, running, draft_len, lengths - q, nodes, tp,
                                                       rule.window_pool), lengths.shape)

    weights = float(kv_of(np.array([float(top)]), 0.0)[0])  # the launch at zero sequences: target and drafter weights
    # a drafter is what adds memory to the target's: n-gram's prompt lookup adds none
    drafter = mech is not None and float(np.max(mech.extra_memory_bytes(target, np.ones(1), np.full(1, float(top)), tp))) > 0
    launch = launch_inputs(platform, target, tp)  # what the rule reads besides the GPU
    left = float(usable_bytes(rule, device_bytes, weights, **launch)) - weights
    # KV grows with the length: find the longest length within `left` on a grid of ROUND_TOKENS steps, then
    # token by token inside the step it falls in (a 10M-token context costs two small arrays, not one of 10M)
    coarse = np.unique(np.r_[1.0, np.arange(ROUND_TOKENS, top + 1, ROUND_TOKENS, dtype=float), float(top)])
    kv_coarse = kv_of(coarse) - weights
    within = np.flatnonzero(kv_coarse <= left)
    if not len(within):
        fits = 0
    elif within[-1] == len(coarse) - 1:
        fits = top
    else:
        lo, hi = coarse[within[-1]], coarse[within[-1] + 1]
        fine = np.arange(lo, hi, dtype=float)
        fits = int(fine[kv_of(fine) - weights <= left].max())
    return ContextFit(max_context=top, full_kv_bytes=float(kv_coarse[-1]), kv_left_bytes=left,
                      weight_bytes=weights, fits_context=fits,
                      planned_context=int(planned_context), rule=rule.describe(device_bytes, weights, **launch),
                      drafter=drafter, mechanism="" if mech is None else str(mech.label))
