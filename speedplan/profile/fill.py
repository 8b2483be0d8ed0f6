"""Completing a measured profile's grid before lookup: a latency for each grid node a series
lacks, from its neighbours. Measured points are never changed.

Two kinds of neighbour carry information on this kind of machine:

- the points of its block (microbench measures the points that share weights or a KV cache
  together, their repeats taking turns; with --one-by-one back to back), whose common level a slow spell of the
  machine moves as a whole: `fill_attention_blocks`;
- the other GEMM shapes at the same M, which step at the same place (BLAS blocking):
  `fill_gemm_holes`.

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


def _without(pts: dict, at: float, flat_ends: bool = False) -> float | None:
    """The series `pts` ({x: latency}) at `at` from its other points (`loglog_at`); None with
    fewer than two."""
    xs = np.array(sorted(x for x in pts if x != at))
    return loglog_at(xs, np.array([pts[x] for x in xs]), at, flat_ends) if len(xs) >= 2 else None


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
        return _without(series.get((c, dt, b, q, mk), {}), kv, flat_ends=True)

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


def fill_gemm_holes(m: np.ndarray, n: np.ndarray, k: np.ndarray, lat: np.ndarray):
    """GEMM rows of one dtype plus a latency for every M that an (N, K) shape lacks but other
    shapes measured, inside the shape's own M range (its ends are the lookup's:
    `speedplan.profile._eff_along`).

    The fill is the log-log interpolation along M of the shape's own points, times the median
    ratio by which the other shapes' measured latency at that M differs from the same
    interpolation of theirs: BLAS kernels step at the same M for every shape (register and
    cache blocking), so a step seen in the other shapes is carried over rather than drawn
    straight across. Measured points are kept as they are."""
    shapes: dict = {}
    for mi, ni, ki, li in zip(m, n, k, lat):
        shapes.setdefault((float(ni), float(ki)), {})[float(mi)] = float(li)
    ratio_at: dict = {}  # M -> [measured / own interpolation] over the shapes that measured it
    for pts in shapes.values():
        for mi, v in pts.items():
            if (ref := _without(pts, mi)) is not None:
                ratio_at.setdefault(mi, []).append(v / ref)
    all_m = sorted(ratio_at)
    new = []
    for (ni, ki), pts in shapes.items() if len(shapes) > 1 else ():
        for mi in all_m:
            if mi in pts or not min(pts) <= mi <= max(pts) or (base := _without(pts, mi)) is None:
                continue
            new.append((mi, ni, ki, base * float(np.median(ratio_at[mi]))))
    if not new:
        return m, n, k, lat
    extra = np.array(new, dtype=float).T
    return tuple(np.concatenate([a, e]) for a, e in zip((m, n, k, lat), extra))
