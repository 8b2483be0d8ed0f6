"""Measured profiles: load and validate a profile folder, answer op latencies from it.

A profile folder (written by `speedplan bench` / microbench) holds `meta.json` (provenance) and
one CSV per op family: `gemm.csv`, `attention.csv`, `elementwise.csv`, `floors.csv`, latency in
microseconds, one row per measured point (median of repeats).

Lookups work in *efficiency*, e = roofline latency / measured latency, against the profile's
own hardware (datasheet preset with the measured floor, tree-mask penalty and peak fractions):

- interpolated: the shape was measured; e is interpolated along the measured axis (GEMM: log M;
  attention: log kv_len, then bilinear over log batch and q_len). Because the roofline carries
  the tile steps along M (ceil(M / tile) · tile rows), interpolating e never draws a straight
  line across a tile boundary: the step comes from the roofline, the level from measurement.
- transferred: the (N, K) shape (attention: heads / KV heads / head_dim) was not measured; e of
  the nearest measured shape (log-distance) at the same M is applied to this shape's roofline.
- extrapolated: outside the measured range along an axis; the nearest measured e scales the
  roofline.

Before that, `speedplan.profile_fill` fills unmeasured grid nodes from their neighbours
(measured values are kept as they are; `speedplan profile check` leaves each point out in
turn, so it scores these fills): an attention point that a measured (batch, kv_len) block
lacks takes its shape along kv_len from its own series and its level from the block's other
points (microbench measures a block's points together, their repeats taking turns, so
a slow spell of the machine moves a block as a whole); a GEMM shape missing an M that other shapes measured takes the step the others
show there. Beyond a series' end, the median trend of the series that cover it continues it.

Each family answers NaN where the op family or dtype was not measured; the roofline answers
there (`speedplan.cost`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from speedplan.cost.roofline import attention_roofline, elementwise_roofline, gemm_roofline
from speedplan.profile.fill import fill_attention_blocks, fill_gemm_holes
from speedplan.specs.hardware import Hardware

# How a lookup answered each point (returned beside the latency).
ANSWERS = np.array(["none", "interpolated", "transferred", "extrapolated"])


def _axis(values: np.ndarray, grid: np.ndarray):
    """Bracketing indices and weight of `values` on sorted `grid` (clamped), and an
    out-of-range flag."""
    n = len(grid)
    if n == 1:
        zeros = np.zeros(values.shape, dtype=int)
        return zeros, zeros, np.zeros(values.shape), values != grid[0]
    i0 = np.clip(np.searchsorted(grid, values, side="right") - 1, 0, n - 2)
    w = np.clip((values - grid[i0]) / (grid[i0 + 1] - grid[i0]), 0.0, 1.0)
    outside = (values < grid[0] * (1 - 1e-9)) | (values > grid[-1] * (1 + 1e-9))
    return i0, i0 + 1, w, outside


def _log(x) -> np.ndarray:
    return np.log(np.maximum(np.asarray(x, dtype=float), 1e-9))


@dataclass(frozen=True)
class _Series:
    """Efficiency along one axis (sorted log coordinate) for one shape."""

    x: np.ndarray
    eff: np.ndarray

    def at(self, x: np.ndarray) -> np.ndarray:
        return np.interp(x, self.x, self.eff)


def _series(x: np.ndarray, eff: np.ndarray) -> _Series:
    order = np.argsort(x, kind="stable")
    return _Series(x[order], eff[order])


def _covers(s: _Series, x: np.ndarray) -> np.ndarray:
    return (x >= s.x[0] - 1e-9) & (x <= s.x[-1] + 1e-9)


def _eff_along(s: _Series, donors: list[_Series], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Efficiency of series `s` at `x`, and which points lie outside the whole measured grid.

    Beyond `s`'s own range but inside neighbouring series' ranges, `s`'s end value follows
    their trend: e_s(end) · median over those series d of e_d(x) / e_d(end). Beyond every
    series, the nearest measured efficiency holds (the roofline, scaled by it, answers)."""
    eff = s.at(x)
    left = ~_covers(s, x)
    if left.any():
        x_end = np.clip(x, s.x[0], s.x[-1])
        trends = np.full((len(donors), x.size), np.nan)
        for i, d in enumerate(donors):
            can = left & _covers(d, x) & _covers(d, x_end)
            trends[i, can] = d.at(x[can]) / d.at(x_end[can])
        can = left & np.isfinite(trends).any(axis=0)
        if can.any():
            eff[can] = s.at(x_end[can]) * np.nanmedian(trends[:, can], axis=0)
            left &= ~can
    return eff, left


class GemmTable:
    """GEMM efficiency per dtype and (N, K) shape, along log M."""

    def __init__(self, rows: dict, hw: Hardware):
        self.hw = hw
        self.shapes: dict[str, tuple[np.ndarray, np.ndarray, list[_Series]]] = {}
        for dt in np.unique(rows["dtype"]):
            sel = rows["dtype"] == dt
            m, n, k, lat = fill_gemm_holes(*(rows[c][sel] for c in ("m", "n", "k", "latency_us")))
            eff = gemm_roofline(hw, m, n, k, dt)[0] / lat
            nk = np.stack([n, k], axis=1)
            shapes, inverse = np.unique(nk, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            series = [_series(_log(m[inverse == s]), eff[inverse == s]) for s in range(len(shapes))]
            ln, lk = _log(shapes[:, 0]), _log(shapes[:, 1])
            dist = (ln[:, None] - ln[None, :]) ** 2 + (lk[:, None] - lk[None, :]) ** 2
            donors = [[series[j] for j in np.argsort(dist[i], kind="stable") if j != i] for i in range(len(shapes))]
            self.shapes[str(dt)] = (ln, lk, series, donors)

    def lookup(self, m, n, k, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        m, n, k = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (m, n, k)))
        if dtype not in self.shapes or m.size == 0:
            return np.full(m.shape, np.nan), np.full(m.shape, ANSWERS[0])
        sn, sk, series, donors = self.shapes[dtype]
        ln, lk, lm = _log(n).ravel(), _log(k).ravel(), _log(m).ravel()
        dist = (ln[None, :] - sn[:, None]) ** 2 + (lk[None, :] - sk[:, None]) ** 2  # [shapes, points]
        nearest = np.argmin(dist, axis=0)
        exact = dist[nearest, np.arange(ln.size)] < 1e-12
        eff = np.empty(ln.size)
        outside = np.zeros(ln.size, dtype=bool)
        for s in np.unique(nearest):
            idx = nearest == s
            eff[idx], outside[idx] = _eff_along(series[s], donors[s], lm[idx])
        roof = gemm_roofline(self.hw, m.ravel(), n.ravel(), k.ravel(), dtype)[0]
        how = np.where(outside, 3, np.where(exact, 1, 2))
        return (roof / eff).reshape(m.shape), ANSWERS[how].reshape(m.shape)


@dataclass(frozen=True)
class _AttentionConfig:
    """One (dtype, mask, heads, KV heads, head_dim): a series along log kv_len for every
    measured (batch, q_len) on the grid `log_batch` × `q_len`, with each series' neighbours."""

    dtype: str
    mask: str
    heads: float
    kv_heads: float
    head_dim: float
    log_batch: np.ndarray
    q_len: np.ndarray
    grid: list  # [batch index][q_len index] -> _Series
    donors: dict  # (batch index, q_len index) -> neighbouring series, nearest first

    def features(self) -> list[float]:
        return [math.log(self.heads / self.kv_heads), math.log(self.head_dim), math.log(self.kv_heads)]


class AttentionTable:
    """Attention efficiency per (heads, KV heads, head_dim, mask, dtype) configuration:
    series along log kv_len at each measured (batch, q_len), combined bilinearly."""

    KEYS = ("num_heads", "num_kv_heads", "head_dim")

    def __init__(self, rows: dict, hw: Hardware):
        self.hw = hw
        rows = fill_attention_blocks(rows, np.stack([rows[c] for c in self.KEYS], axis=1))
        lat = rows["latency_us"]
        self.configs: list[_AttentionConfig] = []
        cfg_cols = np.stack([rows[c] for c in self.KEYS], axis=1)
        for dt in np.unique(rows["dtype"]):
            for mk in np.unique(rows["mask"]):
                sel_dm = (rows["dtype"] == dt) & (rows["mask"] == mk)
                if not sel_dm.any():
                    continue
                for cfg in np.unique(cfg_cols[sel_dm].astype(float), axis=0):
                    sel = sel_dm & np.all(cfg_cols.astype(float) == cfg, axis=1)
                    b, q, kv = rows["batch"][sel], rows["q_len"][sel], rows["kv_len"][sel]
                    roof = attention_roofline(hw, b, q, kv, *cfg, rows["mask"][sel], str(dt))[0]
                    eff = roof / lat[sel]
                    bs, qs = np.unique(b), np.unique(q)
                    grid = [[None] * len(qs) for _ in bs]
                    for i, bv in enumerate(bs):
                        for j, qv in enumerate(qs):
                            pick = (b == bv) & (q == qv)
                            if pick.any():
                                grid[i][j] = _series(_log(kv[pick]), eff[pick])
                    present = [(i, j) for i in range(len(bs)) for j in range(len(qs)) if grid[i][j] is not None]
                    near = {(i, j): sorted(present, key=lambda p: ((p[0] - i) ** 2 + (p[1] - j) ** 2, p))
                            for i in range(len(bs)) for j in range(len(qs))}
                    for (i, j), order in near.items():  # a hole takes the nearest measured series
                        if grid[i][j] is None:
                            grid[i][j] = grid[order[0][0]][order[0][1]]
                    donors = {key: [grid[p[0]][p[1]] for p in order if grid[p[0]][p[1]] is not grid[key[0]][key[1]]]
                              for key, order in near.items()}
                    self.configs.append(_AttentionConfig(str(dt), str(mk), *map(float, cfg), _log(bs),
                                                         qs.astype(float), grid, donors))

    def lookup(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str):
        arrays = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in
                                       (batch, q_len, kv_len, num_heads, num_kv_heads, head_dim)))
        shape = arrays[0].shape
        b, q, kv, h, kvh, hd = (a.ravel() for a in arrays)
        mask = np.broadcast_to(np.asarray(mask), shape).ravel()
        lat = np.full(b.size, np.nan)
        how = np.zeros(b.size, dtype=int)
        roof = attention_roofline(self.hw, b, q, kv, h, kvh, hd, mask, dtype)[0] if b.size else lat
        for mk in np.unique(mask) if b.size else []:
            cands = [c for c in self.configs if c.dtype == dtype and c.mask == mk]
            rows = np.flatnonzero(mask == mk)
            if not cands:
                continue
            feat = np.stack([_log(h[rows] / kvh[rows]), _log(hd[rows]), _log(kvh[rows])], axis=1)
            cfeat = np.array([c.features() for c in cands])
            dist = ((feat[None, :, :] - cfeat[:, None, :]) ** 2).sum(axis=2)
            nearest = np.argmin(dist, axis=0)
            for ci in np.unique(nearest):
                idx = rows[nearest == ci]
                exact = dist[ci, nearest == ci] < 1e-12
                eff, outside = self._interp(cands[ci], _log(b[idx]), q[idx], _log(kv[idx]))
                lat[idx] = roof[idx] / eff
                how[idx] = np.where(outside, 3, np.where(exact, 1, 2))
        return lat.reshape(shape), ANSWERS[how].reshape(shape)

    @staticmethod
    def _interp(cfg: _AttentionConfig, lb, q, lkv):
        lb_grid, q_grid, grid, donors = cfg.log_batch, cfg.q_len, cfg.grid, cfg.donors
        b0, b1, wb, out_b = _axis(lb, lb_grid)
        q0, q1, wq, out_q = _axis(q, q_grid)
        eff = np.zeros(lb.size)
        out_kv = np.zeros(lb.size, dtype=bool)
        for bi, qi, w in ((b0, q0, (1 - wb) * (1 - wq)), (b1, q0, wb * (1 - wq)),
                          (b0, q1, (1 - wb) * wq), (b1, q1, wb * wq)):
            bi = np.minimum(bi, len(lb_grid) - 1)
            qi = np.minimum(qi, len(q_grid) - 1)
            for key in set(zip(bi.tolist(), qi.tolist())):
                sel = (bi == key[0]) & (qi == key[1])
                e, outside = _eff_along(grid[key[0]][key[1]], donors[key], lkv[sel])
                eff[sel] += w[sel] * e
                out_kv[sel] |= (w[sel] > 0) & outside
        return eff, out_b | out_q | out_kv


class ElementwiseTable:
    """Efficiency of each measured elementwise op along log bytes moved; a query gets the mean
    latency over the ops (norms, SiLU·mul, RoPE, scale) measured in its dtype."""

    def __init__(self, rows: dict, hw: Hardware):
        self.hw = hw
        self.ops: dict[str, dict[str, _Series]] = {}
        eff = elementwise_roofline(hw, rows["nbytes"]) / rows["latency_us"]
        for dt in np.unique(rows["dtype"]):
            sel_dt = rows["dtype"] == dt
            self.ops[str(dt)] = {str(op): _series(_log(rows["nbytes"][sel]), eff[sel])
                                 for op in np.unique(rows["op"][sel_dt])
                                 if (sel := sel_dt & (rows["op"] == op)).any()}

    def lookup(self, nbytes, dtype: str, op=None):
        """Mean over the measured ops, or one op's own series when `op` is given."""
        nbytes = np.asarray(nbytes, dtype=float)
        series = self.ops.get(dtype, {})
        if op is not None:
            op = np.unique(np.asarray(op))
            series = {o: series[o] for o in op if o in series} if len(op) == 1 else {}
        if not series:
            return np.full(nbytes.shape, np.nan), np.full(nbytes.shape, ANSWERS[0])
        roof = elementwise_roofline(self.hw, nbytes)
        lx = _log(nbytes)
        # below the smallest measured size the op's fixed cost holds (latency of that size);
        # above the largest, its bandwidth (efficiency of that size)
        lat = np.mean([np.where(lx < s.x[0], elementwise_roofline(self.hw, np.exp(s.x[0])) / s.eff[0], roof / s.at(lx))
                       for s in series.values()], axis=0)
        outside = np.any([(lx < s.x[0] - 1e-9) | (lx > s.x[-1] + 1e-9) for s in series.values()], axis=0)
        return lat, ANSWERS[np.where(outside, 3, 1)]


TABLE_CLASSES = {"gemm": GemmTable, "attention": AttentionTable, "elementwise": ElementwiseTable}
