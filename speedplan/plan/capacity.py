"""How many sequences a launch holds where a batch size offers more, and what it makes there.

A launch that loads a drafter keeps the drafter's weights and state beside the KV cache, so at
a (batch, context) cell where plain decoding alone fits, a setting of that launch may not. Its
scheduler then runs the most sequences that fit and the others wait (vLLM's and SGLang's block
managers, TensorRT-LLM's KV cache manager admit requests while KV cache lasts). `Capacity`
answers, from the sweep's own memory model (`plan.memory.memory_bytes`, affine in the
sequences held: weights plus bytes per sequence) and within the memory the engine profile's
memory rule leaves usable (`engine.memory_rule.usable_bytes`; for a rule on the memory free after
the weights, the weights are memory(0): target and drafter):

    n = floor((usable(memory(0)) − memory(0)) / (memory(1) − memory(0))),  at most B − 1

and prices that setting at n sequences through the engine profile that priced the sweep, the
same step model as every row of the frame. Plain decoding in such a launch (D = 0, the drafter
still loaded) holds as many as the launch's best-fitting setting, and is priced as
`zero_draft.ZeroDraft` prices it, or as plain decoding where that is the same.

Worked example (llama-3.1-70b on 4 H100s, EAGLE-3 D = 2, context 4096): 120 sequences fit and
121 do not, so at B = 121 the launch runs 120 at its tokens/s/GPU for 120, whatever batch sizes
were swept (with B = 1, 64, 121 swept, pricing it as B = 64 made 24% fewer tokens/s/GPU).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speedplan.engine.memory_rule import usable_bytes
from speedplan.plan.memory import launch_inputs, memory_bytes
from speedplan.plan.pricing import engine_rows, price_grid
from speedplan.plan.zero_draft import ZeroDraft


class Capacity:
    """The most sequences each setting of a launch holds at a context, and its tokens/s/GPU
    there, for one sweep priced through one engine profile (`result.engine`), whose memory rule
    says how much of the GPU a launch may hold (each engine's plan has its own: `engine_plan`
    builds one per engine pricing)."""

    def __init__(self, result, kernels: dict | None = None):
        self.result = result
        self.pricings, hw, self.target, self.tp, self.cost = result.pricing
        self.hardware = hw.name
        self.device = hw.memory_bytes  # bytes per GPU
        self.platform = hw.platform  # "cuda", "rocm" or "cpu": an engine's default memory rule may depend on it
        self.kernels = {} if kernels is None else kernels

    def _mechanism(self, label: str):
        return next((p.mech for p in self.pricings if p.mech is not None and p.mech.label == label), None)

    def most_sequences(self, label: str, draft_len: int, verify_tokens: int, batch, context) -> np.ndarray:
        """Per (batch, context): the most sequences below `batch` that setting (label, D, verify
        width; label "none": plain decoding without a drafter) holds at that context (0: none)."""
        mech = self._mechanism(label)
        batch, context = np.asarray(batch, dtype=float), np.asarray(context, dtype=float)
        if mech is None and label != "none":
            return np.zeros(len(batch), dtype=int)
        if mech is None:
            D, N = np.zeros(len(batch), dtype=int), np.ones(len(batch), dtype=int)
        else:
            D, N = _draft_and_nodes(mech, np.full(len(batch), draft_len), np.full(len(batch), verify_tokens))
        engine = self.result.engine

        def held(n):  # the step that holds n sequences runs R(n) of them (an engine's speculative cap)
            return memory_bytes(mech, self.target, engine.running(n, mech is not None), D, context, N, self.tp,
                                engine.memory.window_pool)

        base = held(np.zeros(len(batch)))
        per_seq = held(np.ones(len(batch))) - base
        usable = usable_bytes(engine.memory, self.device, base,  # bytes per GPU; base: the weights
                              **launch_inputs(self.platform, self.target, self.tp))
        n = np.floor((usable - base) / np.where(per_seq > 0, per_seq, np.inf))
        n = np.clip(np.nan_to_num(n, posinf=0.0), 0, batch - 1)
        n = np.where(held(n) <= usable, n, np.maximum(n - 1, 0))  # rounding at the boundary
        return n.astype(int)

    def throughput(self, label: str, draft_len, verify_tokens, running, context) -> np.ndarray:
        """tokens/s/GPU of each setting (draft_len[i], verify width verify_tokens[i]) of `label`
        with running[i] sequences in flight at context[i] (arrays of one length). The kernels
        are priced in one call and kept in `kernels` (engines without a speculative cap share
        them); the engine profile's step model is applied to them here."""
        mech = self._mechanism(label)
        D, N = _draft_and_nodes(mech, draft_len, verify_tokens)
        return self._tokens_per_s(mech, {"draft_len": D, "nodes": N, "batch": np.asarray(running, dtype=float),
                                         "context": np.asarray(context, dtype=float)}, cache_as=label)

    def plain_throughput(self, label: str, runs: bool, running, context) -> np.ndarray:
        """tokens/s/GPU of a D = 0 step in a launch that loads `label`'s drafter, `running`
        sequences in flight (`runs`: whether the engine runs the drafter at D = 0)."""
        n, context = np.asarray(running, dtype=float), np.asarray(context, dtype=float)
        zero = ZeroDraft(self.result, pd.MultiIndex.from_arrays([n, context]), self.kernels).throughput(label, runs)
        return zero if zero is not None else self.plain_alone(n, context)

    def plain_alone(self, running, context) -> np.ndarray:
        """tokens/s/GPU of plain decoding without a drafter, `running` sequences in flight."""
        n, context = np.asarray(running, dtype=float), np.asarray(context, dtype=float)
        return self._tokens_per_s(None, {"draft_len": np.zeros(len(n), int), "nodes": np.ones(len(n), int),
                                         "batch": n, "context": context}, cache_as="none")

    def _tokens_per_s(self, mech, grid: dict, cache_as: str) -> np.ndarray:
        """tokens/s/GPU of `mech`'s rows at `grid` (sweep._grid's columns) through the engine
        profile; the kernels priced once per grid and kept in `kernels` (engines without a
        speculative cap share them)."""
        engine = self.result.engine
        key = ("capacity", cache_as, engine.terms["spec_max_running"].value,
               *(np.asarray(grid[k]).tobytes() for k in ("draft_len", "nodes", "batch", "context")))
        if key not in self.kernels:
            self.kernels[key] = price_grid(mech, grid, self.cost, self.target, self.tp, engine,
                                           self.result.meta.get("temperature") or 0.0)
        return engine_rows(self.kernels[key], engine, self.hardware, self.target, self.tp)["tokens_per_s_per_gpu"].to_numpy(float)


def _draft_and_nodes(mech, draft_len, verify_tokens) -> tuple[np.ndarray, np.ndarray]:
    """(D, N) arrays of settings given as (D, verify width): a tree's N draft nodes are its width
    − 1, a chain's N is D + 1 (as `sweep._grid` spells them)."""
    D, width = np.asarray(draft_len, dtype=int), np.asarray(verify_tokens, dtype=int)
    return D, (width - 1 if mech.is_tree else D + 1)

