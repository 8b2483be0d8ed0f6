"""Measured fused-MoE layers: the routed experts of one MoE layer on one GPU, as a function of
the number of tokens entering it.

A row of `moe.csv` (AIConfigurator's `moe_perf`, `speedplan profile import-aic`) is one call of
the engine's fused expert kernel (vLLM's `fused_experts`: token-to-expert alignment, the
gate/up GEMM, SiLU·up, the down GEMM and the weighted sum over each token's top-k experts) for
`tokens` tokens, with the router's choice given by `distribution`. The router's own GEMM and
top-k are not in it. Two kinds of routing:

- "balanced" (what the shipped profiles hold): every token's top-k experts spread over
  distinct experts, so 16 tokens × 8 of 128 experts read all 128. The forward op list takes
  off the weight reads random routing would not make (`speedplan.cost.forward`).
- a measured skewed routing, e.g. AIConfigurator's "power_law_1.2" (experts drawn from a power
  law of exponent 1.2, its default for Qwen3-MoE and Mixtral; 1.01 for DeepSeek), imported with
  `speedplan profile import-aic --moe-routing`: used as measured.

A table uses its balanced rows where it has them, else the one routing it holds (`routing`).

A series is one (hidden, inter, experts, topk, tp, ep, dtype); a query interpolates log
latency linearly in log tokens between the series' measured token counts, answers the end
value's latency scaled by tokens / end beyond the largest (compute-bound there; code
"extrapolated"), and NaN for a series the table lacks (the forward op list then prices the
experts as grouped GEMMs, `speedplan.cost.forward`). An answer that is not a measured point is
never faster than the layer's peak time (`speedplan.profile.dense.at_peak_or_slower`):
6 · tokens · topk · hidden · inter / (tp · ep) FLOPs, and the weights of the experts the routing
must touch (balanced: min(experts, tokens · topk); any other: at least topk), 3 · hidden ·
inter / tp each, spread over ep GPUs. Interpolating log latency in log tokens cannot cross the
compute bound; the clamp is there for the weight reads, which saturate.
"""

from __future__ import annotations

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.profile.dense import _SNAP, EXTRAPOLATED, INTERPOLATED, MEASURED, NONE, at_peak_or_slower, peak_time_us
from speedplan.specs.hardware import DTYPE_BYTES, Hardware


BALANCED = "balanced"


class MoeTable:
    """Fused-MoE latency series, one per (hidden, inter, experts, topk, tp, ep, dtype), of one
    routing (`routing`: "balanced" where the table has it, else the only one it holds)."""

    def __init__(self, rows: dict, hw: Hardware):  # hw: the peak time's bound (latency itself needs no SOL)
        self.hw = hw
        names = sorted({str(d) for d in rows["distribution"]})
        if BALANCED not in names and len(names) > 1:
            raise SpeedplanInputError(f"moe.csv: routings {', '.join(names)} without 'balanced' rows: "
                                      "keep one (speedplan profile import-aic --moe-routing writes one)")
        self.routing = BALANCED if BALANCED in names or not names else names[0]
        keep = rows["distribution"].astype(str) == self.routing
        keys = ("hidden", "inter", "experts", "topk", "tp", "ep")
        self.series: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        for dtype in np.unique(rows["dtype"][keep]):
            sel = keep & (rows["dtype"] == dtype)
            cols = np.stack([rows[k][sel] for k in keys], axis=1).astype(np.int64)
            tokens, latency = rows["tokens"][sel], rows["latency_us"][sel]
            for key in np.unique(cols, axis=0):
                s = (cols == key).all(axis=1)
                order = np.argsort(tokens[s])
                self.series[(*map(int, key), str(dtype))] = (np.log(tokens[s][order]), latency[s][order])

    def lookup(self, tokens, hidden: int, inter: int, experts: int, topk: int, tp: int, ep: int,
               dtype: str) -> tuple[np.ndarray, np.ndarray]:
        """(latency µs, answer code) of one MoE layer's experts for `tokens` tokens (array)."""
        tokens = np.asarray(tokens, dtype=float)
        series = self.series.get((int(hidden), int(inter), int(experts), int(topk), int(tp), int(ep), str(dtype)))
        if series is None:
            return np.full(tokens.shape, np.nan), np.full(tokens.shape, NONE, dtype=np.int8)
        x, measured = series
        q = np.log(np.maximum(tokens, 1.0))
        latency = np.exp(np.interp(q, x, np.log(measured)))  # np.interp holds the ends: fixed below, scaled above
        above = q > x[-1] + _SNAP
        latency = np.where(above, measured[-1] * np.exp(q - x[-1]), latency)
        nearest = np.abs(q[..., None] - x).argmin(axis=-1)
        on_node = np.abs(q - x[nearest]) <= _SNAP
        latency = np.where(on_node, measured[nearest], latency)  # a node answers its own value, to the bit
        code = np.where(on_node, MEASURED, np.where(above | (q < x[0] - _SNAP), EXTRAPOLATED, INTERPOLATED))
        touched = np.minimum(experts, np.maximum(tokens, 1.0) * topk if self.routing == BALANCED else topk)
        peak = peak_time_us(self.hw, 6.0 * tokens * topk * hidden * inter / (tp * ep),
                            touched / ep * 3.0 * hidden * inter / tp * DTYPE_BYTES.get(str(dtype), 1), str(dtype))
        return at_peak_or_slower(latency, code, peak), code.astype(np.int8)
