"""Attention tables: decode/verify (`attention.csv`) and causal prefill (`prefill.csv`),
as utilisation grids (`speedplan.profile.dense`).

A configuration is one (dtype, mask, heads, KV heads, head_dim); its grid runs over
(log batch, log q_len, log kv_len). A query is answered by the measured configuration
nearest in (log G, log head_dim, log KV heads), "transferred" when it is not its own.

Transfer across KV heads reads the configuration at the equivalent batch. Attention splits
into independent (sequence, KV head) problems (flash-decoding launches its CTAs per sequence
× KV head × KV split; prefill per sequence × head × query tile), so a kernel's utilisation
(roofline time / latency, dimensionless) follows batch × KV heads, not batch alone: a query
of batch b with kvh KV heads answered by a configuration with kvh_c reads that
configuration's utilisation at batch b · kvh / kvh_c (`_at_equivalent_batch`). Evidence,
`python benchmarks/bench_attention_kv_heads.py` on the shipped AIConfigurator tables (every
pair of configurations with the same dtype, head_dim and G but different KV heads, each
measured target point predicted from the other; error = max(pred/meas, meas/pred) − 1):

| GPU, table | equal batch (the rule before): median / max | equivalent batch: median / max |
| --- | --- | --- |
| H100 decode (13,032 points) | 87.9 % / 799 % | 3.1 % / 48 % |
| H200 decode | 89.8 % / 866 % | 3.0 % / 150 % |
| B200 decode | 93.9 % / 859 % | 1.7 % / 37 % |
| H100 prefill (8,704 points) | 29.4 % / 732 % | 3.6 % / 43 % |
| H200 prefill | 29.9 % / 710 % | 3.6 % / 40 % |
| B200 prefill | 34.8 % / 770 % | 3.3 % / 67 % |

An equivalent batch outside the measured batches is EXTRAPOLATED. Above them the grid holds
its edge utilisation, as for any batch. Below the first (fewer sequence × KV-head problems
than any measurement: a batch-1 query with fewer KV heads than its configuration) decode
holds the first batch's latency (log utilisation continues with slope 1 in log batch; the
benchmark's "b·r < 1" rows, 780 points per GPU: median 3 %, p90 20–27 %, where holding the
utilisation errs by 110–140 % median), and prefill continues the first batch interval's
slope clipped to [0, 1] (between constant latency and constant utilisation; 816 points:
median 7–13 %, p90 62–79 %, where either constant errs by 25–94 % median). A CPU profile
measures no two configurations of one G and head_dim, so the rule is untested there.

- q_len inside the configuration's measured range (a CPU profile measures q = 1..8 and tree
  masks): interpolated on the grid.
- q_len above it where only decode (q = 1) was measured, as in AIConfigurator's tables: the
  verification model of `speedplan.profile.verify`, from the decode grid and the prefill
  table ("derived").
- A tree mask where no tree was measured: the causal answer plus the N × N block's extra
  (`speedplan.cost.roofline.tree_block_us`, an assumption stated in the hardware preset).

No answer that is not a measured point is faster than the device's peak (`speedplan.profile.
dense.at_peak_or_slower`): utilisation is SOL / latency and `attention_sol_us` /
`prefill_sol_us` are already at datasheet peak (bandwidth `hbm_bytes_per_s`, not the
achievable share `bytes_per_s`), so for memory-bound attention the clamp is utilisation ≤ 1.
Decode's SOL compute term pads G·q rows to 128-row tiles and does fp8-KV math at bf16 peak;
the clamp (`_attention_peak_us`) takes only the query-key pairs the mask needs (causal:
q·kv − q(q − 1)/2; tree: each node sees the prefix and itself, q·(kv − q + 1)) at the dtype's
own peak, a looser bound there. Prefill's clamp is its SOL's FLOPs and bytes at the dtype's own
peak. Without the clamp, Llama-3.2-1B's decode (32/8 heads, d 64, kv 32,768) read its KV cache
on an H100 at 3.37 TB/s at B = 64 and 9.1 TB/s at B = 512 (edge-trend extrapolation beyond the
measured batches); now 3.35, the peak. No measured attention or prefill point is above peak
(best: 0.93 and 0.72 of it).
"""

from __future__ import annotations

import functools

import numpy as np

from speedplan.cost.roofline import attention_sol_us, prefill_sol_us, tree_block_us
from speedplan.profile.dense import (DERIVED, EXTRAPOLATED, NONE, TRANSFERRED, Dense, at_peak_or_slower, build,
                                    compact, log, peak_time_us)
from speedplan.profile.fill import fill_attention_blocks
from speedplan.profile.verify import causal_work, verify_latency_us
from speedplan.specs.hardware import DTYPE_BYTES, Hardware

HEAD_KEYS = ("num_heads", "num_kv_heads", "head_dim")


def _features(heads, kv_heads, head_dim) -> np.ndarray:
    return np.stack([log(np.asarray(heads, float) / kv_heads), log(head_dim), log(kv_heads)], axis=-1)


class _Configs:
    """Rows grouped by (dtype, mask, heads, KV heads, head_dim); each group's grid is built on
    first use (a shipped profile holds ~50 configurations and a sweep asks one or two)."""

    def __init__(self, rows: dict, masks, axes: tuple[str, ...], sol):
        self.rows, self.axes, self.sol = rows, axes, sol
        dtypes, dcode = np.unique(rows["dtype"].astype(str), return_inverse=True)
        names, mcode = np.unique(np.asarray(masks).astype(str), return_inverse=True)
        cols = [dcode.ravel(), mcode.ravel(), *(rows[c].astype(np.int64) for c in HEAD_KEYS)]
        if max(int(c.max()) for c in cols) < 2**12:  # one integer per configuration: a fast unique
            key = np.zeros(len(dcode), dtype=np.int64)
            for c in cols:
                key = (key << 12) | c
            keys, first, group = np.unique(key, return_index=True, return_inverse=True)
        else:
            keys, first, group = np.unique(np.stack(cols, axis=1), axis=0, return_index=True, return_inverse=True)
        group = group.ravel()
        order = np.argsort(group, kind="stable")
        starts = np.searchsorted(group[order], np.arange(len(keys) + 1))
        self.index = {(str(dtypes[cols[0][f]]), str(names[cols[1][f]]), *(float(c[f]) for c in cols[2:])):
                      order[starts[i]:starts[i + 1]] for i, f in enumerate(first)}
        self._grids: dict[tuple, Dense] = {}

    def grid(self, key: tuple) -> Dense:
        if key not in self._grids:
            idx = self.index[key]
            r = {c: v[idx] for c, v in self.rows.items()}
            util = self.sol(r) / r["latency_us"]
            self._grids[key] = build([log(r[a]) for a in self.axes], log(util), r.get("_filled"))
        return self._grids[key]

    def nearest(self, dtype: str, mask: str, heads, kv_heads, head_dim) -> tuple[list, np.ndarray, np.ndarray]:
        """Candidate keys, each query's nearest one (index into them), and whether it is exact."""
        cands = [k for k in self.index if k[0] == dtype and k[1] == mask]
        if not cands:
            return [], np.zeros(0, int), np.zeros(0, bool)
        cols = np.stack([heads, kv_heads, head_dim], axis=1)
        if len(cols) and (cols == cols[0]).all():  # a sweep asks one head shape for thousands of points
            shapes, inverse = cols[:1], np.zeros(len(cols), dtype=int)
        else:
            shapes, inverse = np.unique(cols, axis=0, return_inverse=True)
        feat = _features(*shapes.T)
        cfeat = _features(*np.array([k[2:] for k in cands]).T)
        dist = ((feat[:, None, :] - cfeat[None, :, :]) ** 2).sum(axis=2)
        near = np.argmin(dist, axis=1)
        exact = dist[np.arange(len(near)), near] < 1e-12
        inverse = inverse.ravel()
        return cands, near[inverse], exact[inverse]


def _at_equivalent_batch(grid: Dense, key: tuple, b, kvh, rest: list, slope_below=None):
    """Log utilisation and answer code of configuration `key`'s grid (log batch first, then
    the `rest` log coordinates) for a query with `kvh` KV heads: read at the equivalent batch
    b · kvh / kvh_c, kvh_c the configuration's KV heads (module docstring: the evidence). A
    query with the configuration's own KV heads reads its own batch, exactly as before.
    Below the grid's first batch node the log utilisation continues linearly in log batch with
    `slope_below` (1: constant latency), or None: the first batch interval's slope, clipped to
    [0, 1]; such a point is EXTRAPOLATED (outside the grid, `Dense.at`)."""
    ratio = np.asarray(kvh, dtype=float) / key[3]
    if not (ratio != 1.0).any():
        return grid.at([log(b), *rest])
    log_b = log(b) + log(ratio)
    log_util, code = grid.at([log_b, *rest])
    first = grid.axes[0][0]
    below = (log_b < first - 1e-9) & (ratio != 1.0)
    if below.any():
        slope = slope_below
        if slope is None:  # log_util holds the first node's value there; one node: utilisation held
            slope = 0.0
            if len(grid.axes[0]) > 1:
                second, _ = grid.at([grid.axes[0][1], *rest])
                slope = np.clip((second - log_util) / (grid.axes[0][1] - first), 0.0, 1.0)
        log_util = np.where(below, log_util + slope * (log_b - first), log_util)
    return log_util, code


def _attention_sol(hw: Hardware, r) -> np.ndarray:
    return attention_sol_us(hw, r["batch"], r["q_len"], r["kv_len"], *(r[c] for c in HEAD_KEYS), str(r["dtype"][0]))


def _prefill_sol(hw: Hardware, r) -> np.ndarray:
    return prefill_sol_us(hw, r["batch"], r["seq_len"], *(r[c] for c in HEAD_KEYS), str(r["dtype"][0]))


def _attention_peak_us(hw: Hardware, b, q, kv, h, kvh, hd, mask, dtype: str):
    """Peak time of decode/verify attention (module docstring): the bytes of `attention_sol_us`
    (K and V once, Q and O), 4 · head_dim FLOPs per head and needed query-key pair."""
    pairs = np.maximum(np.where(np.asarray(mask) == "tree", q * (kv - q + 1), causal_work(q, kv)), 0.0)
    nbytes = b * hd * DTYPE_BYTES[dtype] * (2.0 * kvh * kv + 2.0 * h * q)
    return peak_time_us(hw, 4.0 * b * h * hd * pairs, nbytes, dtype)


def _prefill_peak_us(hw: Hardware, b, L, h, kvh, hd, dtype: str):
    """Peak time of a causal prefill: `prefill_sol_us`'s FLOPs and bytes at the dtype's own peak."""
    nbytes = b * L * hd * (2.0 * h + 2.0 * kvh) * DTYPE_BYTES[dtype]
    return peak_time_us(hw, 4.0 * b * h * hd * L * (L + 1) / 2, nbytes, dtype)


class PrefillTable:
    """Causal prefill of seq_len tokens (no cached prefix) per configuration, over
    (log batch, log seq_len)."""

    def __init__(self, rows: dict, hw: Hardware):
        self.hw = hw
        sol = functools.partial(_prefill_sol, hw)  # not a lambda: a SweepResult holding this table pickles
        self.configs = _Configs(rows, np.full(len(rows["dtype"]), "causal"), ("batch", "seq_len"), sol)

    def lookup(self, batch, seq_len, num_heads, num_kv_heads, head_dim, dtype: str):
        args = [compact(np.asarray(v, dtype=float)) for v in (batch, seq_len, num_heads, num_kv_heads, head_dim)]
        lat, code = _per_config(self.configs, "causal", args, 2, dtype, self._answer)
        return at_peak_or_slower(lat, code, _prefill_peak_us(self.hw, *args, dtype)), code

    def _answer(self, key: tuple, grid: Dense, b, L, h, kvh, hd, dtype):
        log_util, code = _at_equivalent_batch(grid, key, b, kvh, [log(L)])
        return prefill_sol_us(self.hw, b, L, h, kvh, hd, dtype) / np.exp(log_util), code


def _per_config(configs: _Configs, mask, args: list, n_axes: int, dtype: str, answer):
    """Answer points by their nearest measured configuration: `args` are the query arrays
    (grid axes first, then heads, KV heads, head_dim), `answer(key, grid, *args, dtype)` prices
    one configuration's points. One head shape and mask for all points (a sweep) is one call on
    the arrays as given; mixed ones are split."""
    mask = compact(np.asarray(mask))
    shape = np.broadcast_shapes(*(a.shape for a in args), mask.shape)
    if mask.ndim == 0 and all(a.ndim == 0 for a in args[n_axes:]):
        cands, near, exact = configs.nearest(dtype, str(mask), *(np.atleast_1d(a) for a in args[n_axes:]))
        if not cands:
            return np.full(shape, np.nan), np.full(shape, NONE, dtype=np.int8)
        key = cands[near[0]]
        lat, code = answer(key, configs.grid(key), *args, dtype)
        code = code if exact[0] else np.maximum(code, TRANSFERRED)
        return np.broadcast_to(lat, shape), np.broadcast_to(code, shape).astype(np.int8)
    flat = [np.broadcast_to(a, shape).ravel() for a in args]
    masks = np.broadcast_to(mask, shape).ravel()
    lat, code = np.full(masks.size, np.nan), np.full(masks.size, NONE, dtype=np.int8)
    for mk in np.unique(masks):
        rows = np.flatnonzero(masks == mk)
        cands, near, exact = configs.nearest(dtype, str(mk), *(f[rows] for f in flat[n_axes:]))
        for ci in np.unique(near) if cands else []:
            idx = rows[near == ci]
            lat[idx], c = answer(cands[ci], configs.grid(cands[ci]), *(f[idx] for f in flat), dtype)
            code[idx] = np.where(exact[near == ci], c, np.maximum(c, TRANSFERRED))
    return lat.reshape(shape), code.reshape(shape)


class AttentionTable:
    """Decode/verify attention per configuration over (log batch, log q_len, log kv_len);
    `prefill` (a PrefillTable or None) feeds the verification model."""

    def __init__(self, rows: dict, hw: Hardware, prefill: PrefillTable | None = None):
        self.hw, self.prefill = hw, prefill
        if len(np.unique(rows["q_len"])) > 1 or len(np.unique(rows["mask"])) > 1:  # CPU-style grid: complete blocks
            n = len(rows["latency_us"])
            rows = fill_attention_blocks(rows, np.stack([rows[c] for c in HEAD_KEYS], axis=1))
            rows = {**rows, "_filled": np.arange(len(rows["latency_us"])) >= n}

        self.configs = _Configs(rows, rows["mask"], ("batch", "q_len", "kv_len"), functools.partial(_attention_sol, hw))
        self.has_tree = {k[0] for k in self.configs.index if k[1] == "tree"}

    def lookup(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str):
        args = [compact(np.asarray(v, dtype=float)) for v in (batch, q_len, kv_len, num_heads, num_kv_heads, head_dim)]
        mask = compact(np.asarray(mask))
        tree_extra = 0.0
        if dtype not in self.has_tree and (mask == "tree").any():  # no tree measured: causal + the N×N block
            block = tree_block_us(self.hw, args[0], args[1], *args[3:], dtype)
            tree_extra = np.where(mask == "tree", block, 0.0)
            mask = np.where(mask == "tree", "causal", mask)
        lat, code = _per_config(self.configs, mask, args, 3, dtype, self._answer)
        lat = at_peak_or_slower(lat, code, _attention_peak_us(self.hw, *args, mask, dtype))
        return lat + tree_extra, code

    def _answer(self, key: tuple, grid: Dense, b, q, kv, h, kvh, hd, dtype):
        sol = attention_sol_us(self.hw, b, q, kv, h, kvh, hd, dtype)
        q_axis = grid.axes[1]
        derive = (len(q_axis) == 1) & (log(q) > q_axis[-1] + 1e-9)  # only decode measured: verification model
        rest = [np.where(derive, q_axis[-1], log(q)), log(kv)]
        log_util, code = _at_equivalent_batch(grid, key, b, kvh, rest, slope_below=1.0)
        lat = sol / np.exp(log_util)
        if derive.any():
            q1 = np.exp(q_axis[-1])
            t_dec = attention_sol_us(self.hw, b, q1, kv, h, kvh, hd, dtype) / np.exp(log_util)
            t_ctx, ctx_outside = np.nan, False
            if self.prefill is not None:  # its extra rows' share beyond the prefill table's lengths is extrapolated
                t_ctx, ctx_code = self.prefill.lookup(b, kv, h, kvh, hd, dtype)
                ctx_outside = ctx_code == EXTRAPOLATED
            lat = np.where(derive, verify_latency_us(t_dec, t_ctx, lat, q, kv), lat)
            outside = (code == EXTRAPOLATED) | ctx_outside
            code = np.where(derive, np.where(outside, EXTRAPOLATED, DERIVED), code).astype(np.int8)
        return lat, code
