"""A measured table as a dense grid of log-utilisation, interpolated multilinearly.

Every table of a profile is stored as utilisation u = speed-of-light time / measured latency
(`speedplan.cost.roofline.*_sol_us`) at the nodes of a grid whose axes are the log of the
op's sizes (GEMM: N, K, M; attention: batch, q_len, kv_len). A query interpolates log u
linearly in those log coordinates between its measured neighbours and answers SOL / u, so a
point on a node comes back exactly as measured, and a power law between two nodes (a
constant latency, or a constant utilisation) is interpolated exactly.

Worked example, one axis: M nodes 32 and 48 measured at u = 0.30 and 0.40; M = 40 sits at
(ln 40 − ln 32) / (ln 48 − ln 32) = 0.55 of the way, so u = exp(ln 0.30 + 0.55 · ln(0.40 /
0.30)) = 0.35 and latency = SOL(40) / 0.35.

Nodes the measurements do not cover are filled before any query, each with a state that the
answer carries:

- inside a series' measured range along the last axis: interpolated within the series
  (`INTERPOLATED`);
- beyond it (AIConfigurator's memory staircase: large batches stop at short kv_len): the
  series' end value moved by the median trend of the series that cover both points, or held
  when none does (`EXTRAPOLATED`);
- a series with no measurement at all (an (N, K) shape missing from a full grid): the nearest
  measured series in log coordinates (`TRANSFERRED`).

None of these rules knows physics: a trend carried beyond the measured batches (attention's
memory staircase) once priced Llama-3.2-1B's decode attention at B = 64, context 32,768 at
3.37 TB/s of KV reads on an H100 (peak 3.35) and B = 512 at 9.1. So every answer that is not a
measured point is raised to the op's peak time (`peak_time_us`: its FLOPs at datasheet peak
compute, its bytes at datasheet peak bandwidth; `at_peak_or_slower`), which each table
(GEMM, elementwise, attention, prefill, fused MoE) applies to its final answer, after any
transfer, derivation or extrapolation. Measured points stay as measured, even the few that beat
the datasheet (bf16 GEMMs of N = 32 to 128, M 256 to 32,768, whose operands sit in L2:
49 on H100, 3 on H200, 16 on B200, up to 1.29× HBM peak).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from speedplan.errors import SpeedplanInputError

MEASURED, INTERPOLATED, TRANSFERRED, DERIVED, EXTRAPOLATED, NONE = range(6)
ANSWERS = np.array(["measured", "interpolated", "transferred", "derived", "extrapolated", "none"])
_SNAP = 1e-9  # weights this close to 0 or 1 are a node (float noise of log coordinates)


def log(x) -> np.ndarray:
    return np.log(np.maximum(np.asarray(x, dtype=float), 1e-300))


@dataclass(frozen=True)
class Dense:
    axes: tuple  # sorted log coordinates per axis
    value: np.ndarray  # log utilisation at every node
    state: np.ndarray  # MEASURED .. EXTRAPOLATED per node

    def at(self, coords: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Log utilisation at points (log coordinates, one array per axis, broadcast
        together) and each point's answer code: MEASURED on a measured node, else the worst
        state among the nodes it draws on, EXTRAPOLATED outside any axis' range. An axis given
        as one value for all points (a GEMM's N and K in a sweep) is bracketed once."""
        coords = [compact(np.asarray(c, dtype=float)) for c in coords]
        shape = np.broadcast_shapes(*(c.shape for c in coords))
        lo, hi, weights = [], [], []
        code = np.zeros((), dtype=np.int8)
        for axis, x in zip(self.axes, coords):
            n = len(axis)
            if n == 1:
                i0 = np.zeros(x.shape, dtype=int)
                w = np.zeros(x.shape)
                outside = np.abs(x - axis[0]) > _SNAP
            else:
                i0 = np.clip(np.searchsorted(axis, x, side="right") - 1, 0, n - 2)
                w = np.clip((x - axis[i0]) / (axis[i0 + 1] - axis[i0]), 0.0, 1.0)
                w = np.where(w < _SNAP, 0.0, np.where(w > 1 - _SNAP, 1.0, w))
                outside = (x < axis[0] - _SNAP) | (x > axis[-1] + _SNAP)
            code = np.maximum(code, np.where(outside, EXTRAPOLATED, MEASURED).astype(np.int8))
            lo.append(i0)
            hi.append(np.minimum(i0 + 1, n - 1))
            weights.append(w)
        strides = np.cumprod((1,) + self.value.shape[:0:-1])[::-1]  # row-major node -> flat index
        flat_value, flat_state = self.value.ravel(), self.state.ravel()
        all_measured = not flat_state.any()  # a full measured grid: no state to gather
        options = []  # per axis: (node index, weight) pairs, a one-value axis on a node keeping one
        for d, (i0, i1, w) in enumerate(zip(lo, hi, weights)):
            stride = int(strides[d])
            if w.ndim == 0 and w in (0.0, 1.0):
                options.append([(i1 * stride if w == 1.0 else i0 * stride, 1.0)])
            else:
                options.append([(i0 * stride, 1.0 - w), (i1 * stride, w)])
        total = np.zeros(shape)
        worst = np.zeros((), dtype=np.int8)
        for corner in itertools.product(*options):
            flat, wc = 0, 1.0
            for index, weight in corner:
                flat, wc = flat + index, wc * weight
            total = total + wc * flat_value[flat]
            if not all_measured:
                worst = np.maximum(worst, np.where(np.asarray(wc) > 0, flat_state[flat], MEASURED).astype(np.int8))
        exact = np.ones((), dtype=bool)
        for w in weights:
            exact = exact & ((w == 0.0) | (w == 1.0))
        code = np.maximum(code, np.where(exact, worst, np.maximum(worst, INTERPOLATED))).astype(np.int8)
        return np.broadcast_to(total, shape), np.broadcast_to(code, shape)


def peak_time_us(hw, flops, nbytes, dtype: str):
    """The least time (µs) any kernel can take to do `flops` FLOPs and move `nbytes` bytes on
    `hw`: max(FLOPs / datasheet peak FLOP/s of `dtype`, bytes / datasheet peak bandwidth), the
    peaks themselves (`hbm_bytes_per_s`, not the achievable share `bytes_per_s`). 0 on a CPU
    preset: its bandwidth is DRAM's and its caches outrun it (the shipped cpu-local tables
    measure up to 2.3× it in elementwise, 2.1× in GEMM), so it bounds nothing there."""
    if getattr(hw, "is_cpu", False):
        return 0.0
    t = np.asarray(nbytes, dtype=float) / hw.hbm_bytes_per_s
    peak = hw.peak_flops_per_s.get(dtype)
    return (np.maximum(t, np.asarray(flops, dtype=float) / peak) if peak else t) * 1e6


def at_peak_or_slower(latency, code, floor_us) -> np.ndarray:
    """`latency` raised to `floor_us` (`peak_time_us` of each point's op) wherever its answer
    code is not MEASURED: an interpolated, transferred, derived or extrapolated utilisation
    never prices an op above the device's peak compute or bandwidth; a measured point is its
    own measurement, whatever it is."""
    return np.where(np.asarray(code) == MEASURED, latency, np.maximum(latency, floor_us))


def compact(x: np.ndarray) -> np.ndarray:
    """A broadcast view of one value (all strides 0) as that value: its log and bracket are
    then computed once, not once per point."""
    if x.ndim and x.size and not any(x.strides):
        return x.reshape(-1)[:1].reshape(())
    return x


class RepeatedPoint(SpeedplanInputError):
    """Two rows of a table measure one point with different latencies: which one the grid
    holds would depend on row order. `Profile` names the file and lines."""


def build(coords: list[np.ndarray], log_util: np.ndarray, filled: np.ndarray | None = None) -> Dense:
    """A Dense grid from scattered points (log coordinates per axis; the last axis is the one
    series run along). `filled` marks input points that are themselves fills (not measured).
    Raises RepeatedPoint when two points fall on one node with different values (the same
    value twice is kept: a file merged from two copies)."""
    axes = tuple(np.unique(c) for c in coords)
    shape = tuple(len(a) for a in axes)
    node = tuple(np.searchsorted(a, c) for a, c in zip(axes, coords))
    value = np.full(shape, np.nan)
    state = np.full(shape, EXTRAPOLATED, dtype=np.int8)
    value[node] = log_util
    if not np.array_equal(value[node], log_util):  # the last of two rows on one node won
        raise RepeatedPoint("two rows measure one point with different latencies")
    state[node] = np.where(filled, INTERPOLATED, MEASURED) if filled is not None else MEASURED
    if np.isnan(value).any():
        value, state = value.reshape(-1, shape[-1]), state.reshape(-1, shape[-1])
        _fill_series(value, state, axes[-1])
        _fill_empty_series(value, state, axes[:-1], shape[:-1])
        value, state = value.reshape(shape), state.reshape(shape)
    return Dense(axes, value, state)


def _fill_series(value: np.ndarray, state: np.ndarray, x: np.ndarray) -> None:
    """Holes of partly measured rows (series along `x`), in place: inside the row's measured
    range by interpolation, beyond it by the median trend of the rows that cover both the
    hole and the row's end (held flat where none does)."""
    known = ~np.isnan(value)
    original = value.copy()
    for s in np.flatnonzero(known.any(axis=1) & ~known.all(axis=1)):
        have = np.flatnonzero(known[s])
        first, last = have[0], have[-1]
        inside = np.arange(first, last + 1)
        holes = inside[~known[s, inside]]
        value[s, holes] = np.interp(x[holes], x[have], original[s, have])
        state[s, holes] = INTERPOLATED
        for side, end in ((np.arange(0, first), first), (np.arange(last + 1, len(x)), last)):
            if not len(side):
                continue
            donors = known[:, side] & known[:, [end]]  # [rows, holes]
            donors[s] = False
            trend = np.where(donors, original[:, side] - original[:, [end]], np.nan)
            value[s, side] = original[s, end] + _median_of_finite(trend)  # holes no row covers stay flat
            state[s, side] = EXTRAPOLATED


def _median_of_finite(a: np.ndarray) -> np.ndarray:
    """Median over axis 0 of the finite values of each column (0 where there are none);
    np.nanmedian's per-call overhead dominates these small fills."""
    count = np.isfinite(a).sum(axis=0)
    s = np.sort(np.where(np.isfinite(a), a, np.inf), axis=0)
    cols = np.arange(a.shape[1])
    lo, hi = s[np.maximum(count - 1, 0) // 2, cols], s[np.maximum(count, 1) // 2 - (count == 0), cols]
    return np.where(count > 0, (lo + np.where(count > 0, hi, 0)) / 2, 0.0)


def _fill_empty_series(value: np.ndarray, state: np.ndarray, axes: tuple, shape: tuple) -> None:
    """Rows with no value at all take the nearest row that has values (distance in the log
    coordinates of the other axes), in place, marked TRANSFERRED."""
    empty = np.isnan(value).all(axis=1)
    if not empty.any():
        return
    grid = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1) if axes else np.zeros((1, 0))
    have = np.flatnonzero(~empty)
    for s in np.flatnonzero(empty):
        dist = ((grid[have] - grid[s]) ** 2).sum(axis=1)
        donor = have[int(np.argmin(dist))]
        value[s] = value[donor]
        state[s] = np.maximum(state[donor], TRANSFERRED)
