"""A loaded profile folder: its tables, the hardware facts it measured, and the lookups the cost
model asks (`speedplan.cost.ops.ProfileLookup`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.profile.lookup import ANSWERS, TABLE_CLASSES, AttentionTable, ElementwiseTable, GemmTable
from speedplan.profile.tables import ORIGINS, TABLES, read_meta, read_table
from speedplan.specs.hardware import Hardware, get_hardware


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


@dataclass(frozen=True)
class Profile:
    """A loaded profile folder; satisfies `speedplan.cost.ops.ProfileLookup`."""

    path: Path
    meta: dict
    hardware: Hardware
    origin: str
    source_label: str
    tables: dict = field(repr=False)
    _gemm: GemmTable | None = field(repr=False, default=None)
    _attention: AttentionTable | None = field(repr=False, default=None)
    _elementwise: ElementwiseTable | None = field(repr=False, default=None)

    def gemm_lookup(self, m, n, k, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        """Latency (µs, NaN where not answerable) and how each was answered
        ("interpolated", "transferred", "extrapolated", "none")."""
        if self._gemm is None:
            shape = np.broadcast_shapes(np.shape(m), np.shape(n), np.shape(k))
            return np.full(shape, np.nan), np.full(shape, ANSWERS[0])
        return self._gemm.lookup(m, n, k, dtype)

    def attention_lookup(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str):
        if self._attention is None:
            shape = np.broadcast_shapes(*(np.shape(v) for v in (batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask)))
            return np.full(shape, np.nan), np.full(shape, ANSWERS[0])
        return self._attention.lookup(batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype)

    def elementwise_lookup(self, nbytes, dtype: str):
        if self._elementwise is None:
            return np.full(np.shape(nbytes), np.nan), np.full(np.shape(nbytes), ANSWERS[0])
        return self._elementwise.lookup(nbytes, dtype)

    def gemm_latency_us(self, m, n, k, dtype: str) -> np.ndarray:
        return self.gemm_lookup(m, n, k, dtype)[0]

    def attention_latency_us(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str) -> np.ndarray:
        return self.attention_lookup(batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype)[0]

    def elementwise_latency_us(self, nbytes, dtype: str) -> np.ndarray:
        return self.elementwise_lookup(nbytes, dtype)[0]


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
    meta = read_meta(path)
    if not (path / "gemm.csv").exists():
        raise SpeedplanInputError(f"{path / 'gemm.csv'}: missing (incomplete profile)")
    tables = {name: read_table(path / f"{name}.csv", spec) for name, spec in TABLES.items()
              if (path / f"{name}.csv").exists()}
    return build_profile(path, meta, tables)
