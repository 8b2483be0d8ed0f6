"""What a batch size planned at D = 0 costs in a launch that loads a drafter.

A serving engine launched with a speculative method keeps its drafter whatever draft length
its schedule picks, and D = 0 is not plain decoding there (the engine profile says how it runs):

- SGLang runs at most `spec_max_running` requests (48 by default) in any step of such a
  launch: above the cap a D = 0 bucket runs cap requests, the others waiting.
- The drafter still runs one forward over the step's tokens to keep its KV cache current
  (`zero_draft_forward`): vLLM 0.33's Model Runner V2 calls `propose` with
  num_speculative_tokens = 0, which runs the draft prefill with skip_sample (no logits);
  SGLang 0.5.23's `_draft_extend_for_decode` runs at speculative_num_steps = 0 with its
  logits ("keeping draft KV warm", unless SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1).

The step is priced with a plain step's host terms: no draft is verified (SGLang's goes through
its verify path with a one-node tree, `_build_trivial_verify_input`, on the spec v2 overlap
worker that adaptive mode requires).

`plan_table.PlanTable.with_drafter` prices a plan's D = 0 cells with `ZeroDraft.throughput`;
plain decoding without a drafter (the "off" plan) is the sweep's plain rows. Worked example
(vLLM, llama-3.1-8b on an H100, EAGLE-1 head, B = 256, context 1024): the plain step plus one
head layer and fuse over 256 tokens and one draft forward's launches: 0.96x of plain decoding.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speedplan.cost.forward import forward_cost
from speedplan.engine.step import step_cost, zero_draft_parts


class ZeroDraft:
    """D = 0 steps of the launches of one sweep's mechanisms, under the engine profile that
    priced `result` (`result.engine`), at the planned (batch, context) `cells`. `kernels`: a dict
    the forwards priced here are kept in, so that engines planning on one sweep share them (the
    kernels depend on the running count and on whether the drafter's logits are computed, not
    on the engine's other terms)."""

    def __init__(self, result, cells: pd.MultiIndex, kernels: dict | None = None):
        self.engine, self.cells = result.engine, cells
        self.pricing = result.pricing
        self.temperature = (getattr(result, "meta", None) or {}).get("temperature") or 0.0  # the sweep's
        self.batch = cells.get_level_values(0).to_numpy(dtype=float)
        # a launch that loads a drafter caps every step as it caps a speculative one
        self.running = self.engine.running(self.batch, True) if self.engine is not None else self.batch
        self.context = cells.get_level_values(1).to_numpy(dtype=float)
        self.kernels = {} if kernels is None else kernels
        self.kept_warm: dict[str, bool] = {}  # label: whether its drafter runs a forward at D = 0

    def _mechanism(self, label: str):
        return next((p.mech for p in self.pricing[0] if p.mech is not None and p.mech.label == label), None)

    def throughput(self, label: str, runs: bool = True) -> np.ndarray | None:
        """tokens/s/GPU of a D = 0 step at each cell in a launch that loads `label`'s drafter
        (`runs`: whether the engine runs that drafter at D = 0 at all, `serving.Support`); None
        where that is plain decoding's own (no cap reached, no drafter forward) or the sweep's
        pricing is not at hand."""
        if self.engine is None or self.pricing is None or not len(self.cells):
            return None
        terms = self.engine.values()
        mech = self._mechanism(label)
        if mech is None:
            return None
        _, _, target, tp, cost = self.pricing
        R, L = self.running, self.context
        upkeep = self._kernel((mech.drafter_key(), bool(terms["zero_draft_logits"])),
                              lambda: mech.upkeep_cost(cost, target, R, L, tp, bool(terms["zero_draft_logits"])))
        upkeep = upkeep.scaled(terms["zero_draft_forward"] if runs else 0.0)
        self.kept_warm[label] = bool((upkeep.total_s > 0).any())
        if not (R < self.batch).any() and not self.kept_warm[label]:
            return None
        forward = self._kernel(("plain",), lambda: forward_cost(cost, target, R, 1, L, tp))
        step = step_cost(terms, zero_draft_parts(cost, target, mech, R, forward, upkeep, terms, self.temperature))
        return R / (step.total_s * tp)

    def _kernel(self, key: tuple, price):
        """A forward priced once per key, running count and cells."""
        key = (*key, self.running.tobytes(), self.context.tobytes())
        if key not in self.kernels:
            self.kernels[key] = price()
        return self.kernels[key]
