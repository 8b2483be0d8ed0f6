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

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.specs.hardware import DTYPE_BYTES, Hardware, get_hardware
from speedplan.profile.fill import fill_attention_blocks, fill_gemm_holes
from speedplan.cost.roofline import attention_roofline, elementwise_roofline, gemm_roofline

ORIGINS = {"measured": "profile", "derived": "profile", "datasheet-roofline": "roofline"}
META_REQUIRED = ("device_name", "hardware_preset", "origin", "date", "microbench_version", "grid", "versions")
# column -> kind; "pos" positive number, "dtype", "mask", "str", "bool01"
TABLES = {
    "gemm": {"m": "pos", "n": "pos", "k": "pos", "dtype": "dtype", "latency_us": "pos"},
    "attention": {"batch": "pos", "q_len": "pos", "kv_len": "pos", "num_heads": "pos", "num_kv_heads": "pos",
                  "head_dim": "pos", "mask": "mask", "dtype": "dtype", "latency_us": "pos"},
    "elementwise": {"op": "str", "numel": "pos", "nbytes": "pos", "dtype": "dtype", "latency_us": "pos"},
    "floors": {"op": "str", "graph": "bool01", "dtype": "dtype", "latency_us": "pos"},
}
HOW = np.array(["none", "interpolated", "transferred", "extrapolated"])


# ---- reading and validation ---------------------------------------------------------------
def _read_table(path: Path, spec: dict[str, str]) -> dict[str, np.ndarray]:
    """Columns of a profile CSV as arrays; any problem names the file, column and line."""
    try:
        with path.open(newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            lines = [row for row in reader if row]
    except OSError as e:
        raise SpeedplanInputError(f"{path}: cannot read ({e.strerror})") from None
    if not header:
        raise SpeedplanInputError(f"{path}: empty file (no header)")
    header = [h.strip() for h in header]
    for col in spec:
        if col not in header:
            raise SpeedplanInputError(f"{path}: missing column {col!r}")
    if not lines:
        raise SpeedplanInputError(f"{path}: no rows (incomplete profile)")
    out = {}
    for col, kind in spec.items():
        j = header.index(col)
        values = []
        for line_no, row in enumerate(lines, start=2):
            text = row[j].strip() if j < len(row) else ""
            if kind in ("pos", "bool01"):
                try:
                    v = float(text)
                except ValueError:
                    v = math.nan
                ok = v in (0.0, 1.0) if kind == "bool01" else (math.isfinite(v) and v > 0)
                if not ok:
                    want = "0 or 1" if kind == "bool01" else "a positive number"
                    raise SpeedplanInputError(f"{path}: column {col!r} line {line_no}: {text!r} is not {want}")
                values.append(v)
            else:
                allowed = {"dtype": DTYPE_BYTES, "mask": ("causal", "tree")}.get(kind)
                if not text or (allowed is not None and text not in allowed):
                    raise SpeedplanInputError(
                        f"{path}: column {col!r} line {line_no}: {text!r} is not one of {sorted(allowed or ['non-empty'])}")
                values.append(text)
        out[col] = np.asarray(values, dtype=float if kind in ("pos", "bool01") else object)
    return out


def _read_meta(path: Path) -> dict:
    meta_path = path / "meta.json"
    if not meta_path.exists():
        raise SpeedplanInputError(f"{meta_path}: missing (not a profile folder)")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as e:
        raise SpeedplanInputError(f"{meta_path}: malformed JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(meta, dict):
        raise SpeedplanInputError(f"{meta_path}: expected a JSON object")
    for key in META_REQUIRED:
        if key not in meta:
            raise SpeedplanInputError(f"{meta_path}: missing field {key!r}")
    if meta["origin"] not in ORIGINS:
        raise SpeedplanInputError(f"{meta_path}: field 'origin' must be one of {sorted(ORIGINS)}, got {meta['origin']!r}")
    if meta.get("complete") is False:
        raise SpeedplanInputError(
            f"{meta_path}: field 'complete' is false: the bench run stopped early; rerun the same "
            "`speedplan bench` command to measure the missing points")
    return meta


# ---- measured hardware facts --------------------------------------------------------------
def _measured_overrides(hw: Hardware, tables: dict) -> dict:
    """Hardware fields that the profile measured: per-launch floor, tree-mask penalty, and the
    fractions of datasheet peak compute and bandwidth the best measured kernels reached."""
    out: dict = {}
    floors = tables.get("floors")
    if floors is not None:
        launch = floors["op"] == "launch"
        graph = launch & (floors["graph"] == 1)
        use = graph if graph.any() else launch
        if use.any():
            out["kernel_floor_us"] = float(np.median(floors["latency_us"][use]))
    attn = tables.get("attention")
    if attn is not None:
        keys = ("batch", "q_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "dtype")
        causal = {tuple(attn[c][i] for c in keys): attn["latency_us"][i]
                  for i in np.flatnonzero(attn["mask"] == "causal")}
        ratios = [attn["latency_us"][i] / causal[key] for i in np.flatnonzero(attn["mask"] == "tree")
                  if (key := tuple(attn[c][i] for c in keys)) in causal]
        if ratios:
            out["tree_mask_penalty"] = float(np.median(ratios))
    gemm = tables.get("gemm")
    dt = hw.default_dtype
    if gemm is not None and (gemm["dtype"] == dt).any():
        sel = gemm["dtype"] == dt
        flops = 2 * gemm["m"][sel] * gemm["n"][sel] * gemm["k"][sel] / (gemm["latency_us"][sel] * 1e-6)
        out["compute_efficiency"] = float(flops.max() / hw.peak_flops_per_s[dt])
    ew = tables.get("elementwise")
    if ew is not None and (ew["op"] == "scale").any():
        sel = ew["op"] == "scale"
        bw = ew["nbytes"][sel] / (ew["latency_us"][sel] * 1e-6)
        out["bandwidth_efficiency"] = float(bw.max() / hw.hbm_bytes_per_s)
    return out


# ---- interpolation helpers ----------------------------------------------------------------
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


class _GemmTable:
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
            return np.full(m.shape, np.nan), np.full(m.shape, HOW[0])
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
        return (roof / eff).reshape(m.shape), HOW[how].reshape(m.shape)


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


class _AttentionTable:
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
        return lat.reshape(shape), HOW[how].reshape(shape)

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


class _ElementwiseTable:
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
            return np.full(nbytes.shape, np.nan), np.full(nbytes.shape, HOW[0])
        roof = elementwise_roofline(self.hw, nbytes)
        lx = _log(nbytes)
        # below the smallest measured size the op's fixed cost holds (latency of that size);
        # above the largest, its bandwidth (efficiency of that size)
        lat = np.mean([np.where(lx < s.x[0], elementwise_roofline(self.hw, np.exp(s.x[0])) / s.eff[0], roof / s.at(lx))
                       for s in series.values()], axis=0)
        outside = np.any([(lx < s.x[0] - 1e-9) | (lx > s.x[-1] + 1e-9) for s in series.values()], axis=0)
        return lat, HOW[np.where(outside, 3, 1)]


# ---- the profile ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """A loaded profile folder; satisfies `speedplan.cost.ProfileLookup`."""

    path: Path
    meta: dict
    hardware: Hardware
    origin: str
    source_label: str
    tables: dict = field(repr=False)
    _gemm: _GemmTable | None = field(repr=False, default=None)
    _attention: _AttentionTable | None = field(repr=False, default=None)
    _elementwise: _ElementwiseTable | None = field(repr=False, default=None)

    def gemm_lookup(self, m, n, k, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        """Latency (µs, NaN where not answerable) and how each was answered
        ("interpolated", "transferred", "extrapolated", "none")."""
        if self._gemm is None:
            shape = np.broadcast_shapes(np.shape(m), np.shape(n), np.shape(k))
            return np.full(shape, np.nan), np.full(shape, HOW[0])
        return self._gemm.lookup(m, n, k, dtype)

    def attention_lookup(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str):
        if self._attention is None:
            shape = np.broadcast_shapes(*(np.shape(v) for v in (batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask)))
            return np.full(shape, np.nan), np.full(shape, HOW[0])
        return self._attention.lookup(batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype)

    def elementwise_lookup(self, nbytes, dtype: str):
        if self._elementwise is None:
            return np.full(np.shape(nbytes), np.nan), np.full(np.shape(nbytes), HOW[0])
        return self._elementwise.lookup(nbytes, dtype)

    def gemm_latency_us(self, m, n, k, dtype: str) -> np.ndarray:
        return self.gemm_lookup(m, n, k, dtype)[0]

    def attention_latency_us(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str) -> np.ndarray:
        return self.attention_lookup(batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype)[0]

    def elementwise_latency_us(self, nbytes, dtype: str) -> np.ndarray:
        return self.elementwise_lookup(nbytes, dtype)[0]


TABLE_CLASSES = {"gemm": _GemmTable, "attention": _AttentionTable, "elementwise": _ElementwiseTable}


def profile_hardware(meta: dict, tables: dict, where: Path) -> Hardware:
    """The preset named by meta.json, with what the profile measured replacing datasheet
    assumptions (each change listed in `notes` and `extra`)."""
    try:
        hw = get_hardware(str(meta["hardware_preset"]))
    except SpeedplanInputError as e:
        raise SpeedplanInputError(f"{where / 'meta.json'}: field 'hardware_preset': {e}") from None
    if meta["origin"] == "datasheet-roofline":
        return hw
    measured = _measured_overrides(hw, tables)
    origin = "profile" if meta["origin"] == "measured" else "derived"
    note = (f"{', '.join(sorted(measured))} from profile {where.name} "
            f"({meta['origin']}, {meta.get('device_name', '?')}, {meta.get('date', '?')})")
    return hw.with_overrides(**measured, origin=origin, notes=(hw.notes + "; " if hw.notes else "") + note,
                             extra={**hw.extra, "profile": str(where), "measured": measured})


def build_profile(path: Path, meta: dict, tables: dict) -> Profile:
    hw = profile_hardware(meta, tables, path)
    built = {name: cls(tables[name], hw) for name, cls in TABLE_CLASSES.items() if name in tables}
    return Profile(Path(path), meta, hw, meta["origin"], ORIGINS[meta["origin"]], tables,
                   built.get("gemm"), built.get("attention"), built.get("elementwise"))


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile folder. gemm.csv is required; attention.csv,
    elementwise.csv and floors.csv are used when present. Raises SpeedplanInputError naming
    the file and column of any problem."""
    path = Path(path)
    if not path.is_dir():
        raise SpeedplanInputError(f"{path}: no such profile folder")
    meta = _read_meta(path)
    if not (path / "gemm.csv").exists():
        raise SpeedplanInputError(f"{path / 'gemm.csv'}: missing (incomplete profile)")
    tables = {name: _read_table(path / f"{name}.csv", spec) for name, spec in TABLES.items()
              if (path / f"{name}.csv").exists()}
    return build_profile(path, meta, tables)
