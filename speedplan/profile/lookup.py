"""Measured tables answering op latencies: latency = speed of light / utilisation, the
utilisation interpolated between measured neighbours (`speedplan.profile.dense`).

Each lookup returns (latency_us, answer code) with the codes of `speedplan.profile.dense`:
"measured" (an exact hit: the table's own value), "interpolated", "transferred" (a shape the
table lacks takes the utilisation of its nearest measured shape), "derived" (verification
attention from decode and prefill, `speedplan.profile.verify`), "extrapolated" (outside the
measured range along some axis: the edge's utilisation, or the trend of the neighbouring
series, scales this point's speed of light), and "none" (NaN: nothing measured for this op
family or dtype; the fallback roofline answers, `speedplan.cost`).

- GEMM: one grid per dtype over (log N, log K, log M). A full (N, K) grid, as AIConfigurator
  measures it, interpolates bilinearly between the four measured shapes around a query; a
  shape missing from the grid takes its nearest shape's utilisation.
- Elementwise: each op along log bytes; below the smallest measured size the op's latency
  holds (its fixed cost).
- All-reduce: per number of GPUs along log bytes, the same rule below the smallest size.

No answer but a measured point is faster than the device's peak: GEMM and elementwise answers
are raised to their peak time (`speedplan.profile.dense.at_peak_or_slower`; GEMM: 2·M·N·K
FLOPs, A, B and C moved once; elementwise: its bytes). Their SOL is at datasheet peak already,
so for memory-bound ops that is utilisation ≤ 1 (a GEMM's SOL pads M to the tile; the clamp
does not). All-reduce is priced against the link, not memory, and is not clamped.

Attention and prefill live in `speedplan.profile.attention`. Before the grid is built,
`speedplan.profile.fill` completes sparse measured grids (CPU profiles) from their neighbours;
a full grid skips that.
"""

from __future__ import annotations

import numpy as np

from speedplan.cost.roofline import allreduce_sol_us, elementwise_sol_us, gemm_sol_us
from speedplan.profile.dense import (ANSWERS, EXTRAPOLATED, MEASURED, NONE, Dense, at_peak_or_slower, build, compact,
                                    log, peak_time_us)
from speedplan.profile.fill import fill_gemm_holes
from speedplan.specs.hardware import DTYPE_BYTES, Hardware


# fill_gemm_holes carries the M steps other shapes show into a sparse grid (CPU profiles, a few
# hundred points); a grid larger than this (AIConfigurator's full N x K x M grid) fills a
# missing node by interpolating its own series instead (speedplan.profile.dense).
FILL_MAX_ROWS = 10_000


def _none(shape) -> tuple[np.ndarray, np.ndarray]:
    return np.full(shape, np.nan), np.full(shape, NONE, dtype=np.int8)


def _complete(n: np.ndarray, k: np.ndarray, m: np.ndarray) -> bool:
    """Every (N, K) shape measured at the same M values (nothing for fill_gemm_holes to do)."""
    if max(n.max(), k.max(), m.max()) >= 2**21 or not all(np.array_equal(v, np.round(v)) for v in (n, k, m)):
        return False  # not keyable below: let the fill check shape by shape
    n, k, m = (np.asarray(v, dtype=np.int64) for v in (n, k, m))  # one int64 key per point
    shape = (n << 21) | k
    return len(np.unique((shape << 21) | m)) == len(np.unique(shape)) * len(np.unique(m))


class GemmTable:
    """GEMM utilisation per dtype on a grid over (log N, log K, log M); grids are built on
    first use (a shipped GPU profile has ~36,000 points per dtype)."""

    def __init__(self, rows: dict, hw: Hardware):
        self.hw = hw
        self.rows = rows
        self.dtypes = sorted(set(rows["dtype"]))
        self._grids: dict[str, Dense] = {}

    def grid(self, dtype: str) -> Dense:
        if dtype not in self._grids:
            sel = self.rows["dtype"] == dtype
            m, n, k, lat = (self.rows[c][sel] for c in ("m", "n", "k", "latency_us"))
            filled = np.zeros(len(m), dtype=bool)
            if len(m) <= FILL_MAX_ROWS and not _complete(n, k, m):
                m, n, k, lat = fill_gemm_holes(m, n, k, lat)
                filled = np.arange(len(m)) >= int(sel.sum())
            util = gemm_sol_us(self.hw, m, n, k, dtype) / lat
            self._grids[dtype] = build([log(n), log(k), log(m)], log(util), filled)
        return self._grids[dtype]

    def lookup(self, m, n, k, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        m, n, k = (compact(np.asarray(v, dtype=float)) for v in (m, n, k))  # one (N, K) for all points: once
        shape = np.broadcast_shapes(m.shape, n.shape, k.shape)
        if dtype not in self.dtypes or not np.prod(shape, dtype=int):
            return _none(shape)
        log_util, code = self.grid(dtype).at([log(n), log(k), log(m)])
        lat = gemm_sol_us(self.hw, m, n, k, dtype) / np.exp(log_util)
        peak = peak_time_us(self.hw, 2.0 * m * n * k, (m * k + k * n + m * n) * DTYPE_BYTES[dtype], dtype)
        return np.broadcast_to(at_peak_or_slower(lat, code, peak), shape), code


class _BytesSeries:
    """Utilisation along log bytes for one series; below the smallest measured size the
    latency of that size holds (a fixed cost does not shrink with the op)."""

    def __init__(self, nbytes: np.ndarray, util: np.ndarray):
        self.grid = build([log(nbytes)], log(util))
        self.min_bytes = float(nbytes.min())

    def lookup(self, nbytes: np.ndarray, sol) -> tuple[np.ndarray, np.ndarray]:
        log_util, code = self.grid.at([log(np.maximum(nbytes, self.min_bytes))])
        below = nbytes < self.min_bytes * (1 - 1e-9)
        lat = np.where(below, sol(np.full(nbytes.shape, self.min_bytes)), sol(nbytes)) / np.exp(log_util)
        return lat, np.where(below, EXTRAPOLATED, code).astype(np.int8)


class ElementwiseTable:
    """Utilisation of each measured elementwise op along log bytes moved; a query gets the
    mean latency over the ops (norms, SiLU·mul, RoPE, scale) measured in its dtype."""

    def __init__(self, rows: dict, hw: Hardware):
        self.hw = hw
        self.ops: dict[str, dict[str, _BytesSeries]] = {}
        util = elementwise_sol_us(hw, rows["nbytes"]) / rows["latency_us"]
        for dt in np.unique(rows["dtype"]):
            sel_dt = rows["dtype"] == dt
            self.ops[str(dt)] = {str(op): _BytesSeries(rows["nbytes"][sel], util[sel])
                                 for op in np.unique(rows["op"][sel_dt]) if (sel := sel_dt & (rows["op"] == op)).any()}

    def lookup(self, nbytes, dtype: str, op=None):
        """Mean over the measured ops, or one op's own series when `op` is given."""
        nbytes = np.asarray(nbytes, dtype=float)
        series = self.ops.get(dtype, {})
        if op is not None:
            op = np.unique(np.asarray(op))
            series = {o: series[o] for o in op if o in series} if len(op) == 1 else {}
        if not series:
            return _none(nbytes.shape)
        sol = lambda b: elementwise_sol_us(self.hw, b)
        peak = peak_time_us(self.hw, 0.0, nbytes, dtype)
        answers = [(at_peak_or_slower(lat, code, peak), code) for lat, code in (s.lookup(nbytes, sol) for s in series.values())]
        return np.mean([a[0] for a in answers], axis=0), np.max([a[1] for a in answers], axis=0).astype(np.int8)


class AllreduceTable:
    """All-reduce utilisation (against the link's ring speed of light) per number of GPUs
    along log bytes. A TP degree that was not measured answers NaN (the fallback answers)."""

    def __init__(self, rows: dict, hw: Hardware):
        self.hw = hw
        self.series = {int(g): _BytesSeries(rows["nbytes"][sel], allreduce_sol_us(hw, rows["nbytes"][sel], g)
                                            / rows["latency_us"][sel])
                       for g in np.unique(rows["num_gpus"]) if g > 1 and (sel := rows["num_gpus"] == g).sum() >= 1}

    def lookup(self, nbytes, tp: int) -> tuple[np.ndarray, np.ndarray]:
        nbytes = np.asarray(nbytes, dtype=float)
        if int(tp) not in self.series:
            return _none(nbytes.shape)
        return self.series[int(tp)].lookup(nbytes, lambda b: allreduce_sol_us(self.hw, b, tp))


__all__ = ["ANSWERS", "MEASURED", "GemmTable", "ElementwiseTable", "AllreduceTable"]
