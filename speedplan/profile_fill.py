"""Completing a measured profile's grid before lookup: a latency for each grid node a series
lacks, from its neighbours. Measured points are never changed.

Two kinds of neighbour carry information on this kind of machine:

- the points of its block (microbench measures the points that share weights or a KV cache
  back to back, or with --interleave together), whose common level a slow spell of the
  machine moves as a whole: `fill_attention_blocks`;
- the other series at the same coordinate, which step at the same place (BLAS blocking
  along M): `fill_holes`.

`speedplan profile check` leaves each measured point out in turn, so it scores these fills.
Latencies in microseconds throughout.
"""

from __future__ import annotations

import math

import numpy as np


def loglog_at(x: np.ndarray, y: np.ndarray, at: float, flat_ends: bool = False) -> float:
    """y at `at` on the log-log line through the two measured points around it; beyond the
    range, the line through the two nearest, or (flat_ends) the nearest point's y."""
    lx, ly, la = np.log(x), np.log(y), math.log(at)
    if flat_ends and not lx[0] <= la <= lx[-1]:
        return float(y[0] if la < lx[0] else y[-1])
    i1 = int(np.clip(np.searchsorted(lx, la), 1, len(lx) - 1))
    i0 = i1 - 1
    return float(np.exp(ly[i0] + (ly[i1] - ly[i0]) * (la - lx[i0]) / (lx[i1] - lx[i0])))


def fill_attention_blocks(rows: dict, cfg_cols: np.ndarray) -> dict:
    """Attention rows plus a latency for every (q_len, mask) that a measured block lacks.

    A block is one (heads, KV heads, head_dim, dtype, batch, kv_len): its points share a KV
    cache and are measured back to back (or together), so a slow spell of the machine moves
    the whole block.
    A missing point is its own (batch, q_len, mask) series' log-log interpolation along kv_len
    (beyond the series' ends: its nearest point), times the median ratio by which the block's
    measured points at the nearest q_len values (this one and the measured values on either
    side, both masks) differ from the same interpolation of theirs. The shape along kv_len
    comes from the neighbouring blocks, the level from the block itself. `cfg_cols` holds each
    row's (num_heads, num_kv_heads, head_dim)."""
    keys = ("dtype", "batch", "kv_len", "q_len", "mask")
    cfg = [tuple(r) for r in cfg_cols.astype(float)]
    measured = {(cfg[i], *(rows[c][i] for c in keys)): float(rows["latency_us"][i]) for i in range(len(cfg))}
    series: dict = {}  # (cfg, dtype, batch, q_len, mask) -> {kv_len: latency}
    blocks: dict = {}  # (cfg, dtype, batch, kv_len) -> {(q_len, mask): latency}
    for (c, dt, b, kv, q, mk), v in measured.items():
        series.setdefault((c, dt, b, q, mk), {})[kv] = v
        blocks.setdefault((c, dt, b, kv), {})[(q, mk)] = v

    def along_kv(c, dt, b, q, mk, kv) -> float | None:
        pts = {x: y for x, y in series.get((c, dt, b, q, mk), {}).items() if x != kv}
        if len(pts) < 2:
            return None
        xs = np.array(sorted(pts))
        return loglog_at(xs, np.array([pts[x] for x in xs]), kv, flat_ends=True)

    members: dict = {}
    for (c, dt, b, q, mk) in series:
        members.setdefault((c, dt), set()).add((q, mk))
    q_rank = {key: {q: i for i, q in enumerate(sorted({q for q, _ in m}))} for key, m in members.items()}
    new = []
    for (c, dt, b, kv), have in blocks.items():
        for q, mk in sorted(members[(c, dt)] - set(have)):
            base = along_kv(c, dt, b, q, mk, kv) if q <= kv else None
            if base is None:
                continue
            near = [(q2, mk2) for (q2, mk2) in have if abs(q_rank[(c, dt)][q2] - q_rank[(c, dt)][q]) <= 1]
            ratios = [have[m] / ref for m in near or have if (ref := along_kv(c, dt, b, *m, kv))]
            new.append((c, dt, b, kv, q, mk, base * float(np.median(ratios)) if ratios else base))
    if not new:
        return rows
    extra = {"num_heads": [n[0][0] for n in new], "num_kv_heads": [n[0][1] for n in new],
             "head_dim": [n[0][2] for n in new], "dtype": [n[1] for n in new], "batch": [n[2] for n in new],
             "kv_len": [n[3] for n in new], "q_len": [n[4] for n in new], "mask": [n[5] for n in new],
             "latency_us": [n[6] for n in new]}
    return {c: np.concatenate([rows[c], np.asarray(extra[c], dtype=rows[c].dtype)]) for c in extra}


def fill_holes(keys: list, x: np.ndarray, lat: np.ndarray) -> list[tuple]:
    """(key, x, latency) for every x that some series lacks but other series measured,
    inside the series' own x range (its ends are the lookup's: `speedplan.profile._eff_along`).
    Series are GEMM (N, K) shapes along M.

    The fill is the log-log interpolation along x of the series' own points, times the median
    ratio by which the other series' measured latency at that x differs from the same
    interpolation of theirs: BLAS kernels step at the same M for every shape (register and
    cache blocking), so a step seen in the other shapes is carried over rather than drawn
    straight across. Measured points are kept as they are."""
    series: dict = {}
    for key, xi, li in zip(keys, x, lat):
        series.setdefault(key, {})[float(xi)] = float(li)
    if len(series) < 2:
        return []

    def along(pts: dict, at: float) -> float | None:
        xs = np.array(sorted(v for v in pts if v != at))
        return loglog_at(xs, np.array([pts[v] for v in xs]), at) if len(xs) >= 2 else None

    ratio_at: dict = {}  # x -> [measured / own interpolation] over the series that measured it
    for pts in series.values():
        for xi, v in pts.items():
            if (ref := along(pts, xi)) is not None:
                ratio_at.setdefault(xi, []).append(v / ref)
    all_x = sorted({xi for pts in series.values() for xi in pts})
    new = []
    for key, pts in series.items():
        lo, hi = min(pts), max(pts)
        for xi in all_x:
            if xi in pts or not lo <= xi <= hi or (base := along(pts, xi)) is None:
                continue
            new.append((key, xi, base * float(np.median(ratio_at[xi])) if xi in ratio_at else base))
    return new


def fill_gemm_holes(m: np.ndarray, n: np.ndarray, k: np.ndarray, lat: np.ndarray):
    """GEMM rows of one dtype plus `fill_holes` along M across the (N, K) shapes."""
    new = fill_holes(list(zip(n.tolist(), k.tolist())), m, lat)
    if not new:
        return m, n, k, lat
    extra = np.array([(xi, key[0], key[1], v) for key, xi, v in new], dtype=float).T
    return tuple(np.concatenate([a, e]) for a, e in zip((m, n, k, lat), extra))
