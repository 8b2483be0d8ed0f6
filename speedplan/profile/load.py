"""A loaded profile folder: its tables, the hardware facts it measured, and the lookups the cost
model asks (`speedplan.cost.ops.ProfileLookup`).

Tables are read and checked at load (a shipped GPU profile's ~82,000 rows: ~30 ms on the
2-core development machine); each family's grid is built when first queried, per dtype or
head configuration, so a sweep pays for what it prices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.profile.attention import AttentionTable, PrefillTable
from speedplan.profile.dense import ANSWERS, NONE, RepeatedPoint, compact
from speedplan.profile.lookup import AllreduceTable, ElementwiseTable, GemmTable
from speedplan.profile.moe import MoeTable
from speedplan.profile.tables import ORIGINS, TABLES, file_line, read_meta, read_tables
from speedplan.specs.hardware import Hardware, get_hardware


def _measured_overrides(hw: Hardware, tables: Mapping) -> dict:
    """Hardware fields that the profile measured: per-launch floor and the fractions of
    datasheet peak compute and bandwidth the best measured kernels reached."""
    out: dict = {}
    floors = tables.get("floors")
    if floors is not None:
        launch = floors["op"] == "launch"
        graph = launch & (floors["graph"] == 1)
        use = graph if graph.any() else launch
        if use.any():
            out["kernel_floor_us"] = float(np.median(floors["latency_us"][use]))
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


_BUILDERS = {"gemm": GemmTable, "elementwise": ElementwiseTable, "allreduce": AllreduceTable, "prefill": PrefillTable,
             "moe": MoeTable}


def origin_label(meta: dict, origin: str | None = None) -> str:
    """Who measured a profile, as reports print it: its meta's `origin_label` (an import or a
    derivation writes one: "measured (AIConfigurator 0.12, vLLM 0.24 kernels)"), else for a
    `speedplan bench` folder "measured (speedplan bench, AMD EPYC, 2026-12-02)", else its origin."""
    origin = str(origin or meta.get("origin") or "measured")
    if meta.get("origin_label"):
        return str(meta["origin_label"])
    bench = not isinstance(meta.get("source"), dict)  # an import records its package in `source` (cli/profile._kind_of)
    if origin == "measured" and bench and (meta.get("device_name") or meta.get("date")):
        who = ", ".join(str(x) for x in ("speedplan bench", meta.get("device_name"), str(meta.get("date") or "")[:10]) if x)
        busy, points = meta.get("busy_points") or 0, meta.get("points") or {}
        if isinstance(busy, int) and busy > 0 and isinstance(points, dict):  # speedplan bench says so too
            who += f"; {busy} of {sum(v for v in points.values() if isinstance(v, int))} points timed while the CPU was busy"
        return f"measured ({who})"
    return origin


@dataclass(frozen=True)
class Profile:
    """A loaded profile folder; satisfies `speedplan.cost.ops.ProfileLookup`. Lookups return
    (latency µs, how each was answered: "measured", "interpolated", "transferred", "derived",
    "extrapolated" or "none"; `speedplan.profile.lookup`)."""

    path: Path
    meta: dict
    hardware: Hardware
    origin: str
    source_label: str
    tables: Mapping = field(repr=False)
    _built: dict = field(repr=False, default_factory=dict)

    @property
    def origin_label(self) -> str:
        """What reports print, e.g. "measured (AIConfigurator 0.12, vLLM 0.24 kernels)"."""
        return origin_label(self.meta, self.origin)

    def table(self, family: str):
        """The built lookup table of one family, or None when the profile lacks it."""
        if family not in self._built:
            if family not in self.tables:
                self._built[family] = None
            elif family == "attention":
                self._built[family] = AttentionTable(self.tables["attention"], self.hardware, self.table("prefill"))
            else:
                try:
                    self._built[family] = _BUILDERS[family](self.tables[family], self.hardware)
                except RepeatedPoint:
                    raise SpeedplanInputError(self._repeated(family)) from None
                except SpeedplanInputError as e:  # a builder names its table ("moe.csv: ..."): add the folder
                    text = str(e)
                    raise SpeedplanInputError(f"{self.path / text}" if text.startswith(f"{family}.csv:") else text) from None
        return self._built[family]

    def _repeated(self, family: str) -> str:
        """The line naming two rows of `family`.csv that measure one point differently
        (grids are built on first use, so this is found then, not when the folder is read)."""
        return self.repeated_point(family) or f"{self.path / (family + '.csv')}: two rows measure one point with different latencies"

    def repeated_point(self, family: str) -> str | None:
        """None, or a line naming the first two rows of `family`.csv that measure one point
        with different latencies (the same latency twice is allowed)."""
        import pandas as pd

        rows = pd.DataFrame(self.tables[family])
        keys = [c for c in TABLES[family] if c != "latency_us"]
        twice = rows[rows.duplicated(keys, keep=False)]
        if twice.empty:
            return None
        clash = twice.groupby(keys, observed=True, sort=False)["latency_us"].transform("nunique") > 1
        if not clash.any():
            return None
        first = twice[clash].iloc[0]
        same = twice[clash & (twice[keys] == first[keys]).all(axis=1)]["latency_us"]
        i, a = same.index[0], same.iloc[0]
        j = same.index[same.to_numpy() != a][0]
        point = ", ".join(f"{k}={first[k]:g}" if isinstance(first[k], float) else f"{k}={first[k]}" for k in keys)
        csv_path = self.path / (family + '.csv')
        return (f"{csv_path}: lines {file_line(csv_path, i)} and {file_line(csv_path, j)} measure one point ({point}) with "
                f"different latency_us ({a:g} and {same[j]:g}); keep one")

    def check_repeated_points(self) -> None:
        """Raise SpeedplanInputError if any table measures one point twice with different
        latencies (`profile check` runs this on every table; a sweep finds it in a table it uses)."""
        for family in self.tables:
            if family in TABLES and (line := self.repeated_point(family)):
                raise SpeedplanInputError(line)

    def _ask(self, family: str, args: tuple):
        if self.origin == "datasheet-roofline":  # its tables are the roofline at grid points: answer it
            return _roofline_answer(self.hardware, family, args)
        t = self.table(family)
        if t is None:
            shape = np.broadcast_shapes(*(np.shape(a) for a in args if not isinstance(a, str)))
            return np.full(shape, np.nan), np.full(shape, ANSWERS[NONE])
        try:
            latency, code = t.lookup(*args)  # a table's grids are built on first use
        except RepeatedPoint:
            raise SpeedplanInputError(self._repeated(family)) from None
        return latency, np.broadcast_to(ANSWERS[compact(np.asarray(code))], np.shape(code))

    def gemm_lookup(self, m, n, k, dtype: str):
        return self._ask("gemm", (m, n, k, dtype))

    def attention_lookup(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str):
        return self._ask("attention", (batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype))

    def prefill_lookup(self, batch, seq_len, num_heads, num_kv_heads, head_dim, dtype: str):
        return self._ask("prefill", (batch, seq_len, num_heads, num_kv_heads, head_dim, dtype))

    def elementwise_lookup(self, nbytes, dtype: str):
        return self._ask("elementwise", (nbytes, dtype))

    def allreduce_lookup(self, nbytes, tp: int):
        return self._ask("allreduce", (nbytes, np.asarray(tp)))

    def moe_lookup(self, tokens, hidden: int, inter: int, experts: int, topk: int, tp: int, ep: int, dtype: str):
        """One MoE layer's routed experts (fused kernel) for `tokens` tokens; NaN where the
        profile has no such series (`speedplan.profile.moe`)."""
        return self._ask("moe", (tokens, hidden, inter, experts, topk, tp, ep, dtype))

    def gemm_latency_us(self, m, n, k, dtype: str) -> np.ndarray:
        return self.gemm_lookup(m, n, k, dtype)[0]

    def attention_latency_us(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str) -> np.ndarray:
        return self.attention_lookup(batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype)[0]

    def elementwise_latency_us(self, nbytes, dtype: str) -> np.ndarray:
        return self.elementwise_lookup(nbytes, dtype)[0]


def _roofline_answer(hw: Hardware, family: str, args: tuple):
    from speedplan.cost import roofline

    latency = {"gemm": lambda: roofline.gemm_roofline(hw, *args)[0],
               "attention": lambda: roofline.attention_roofline(hw, *args)[0],
               "elementwise": lambda: roofline.elementwise_roofline(hw, args[0]),
               "allreduce": lambda: roofline.allreduce_us(hw, args[0], int(args[1]))}.get(family)
    if latency is None:
        shape = np.broadcast_shapes(*(np.shape(a) for a in args if not isinstance(a, str)))
        return np.full(shape, np.nan), np.full(shape, ANSWERS[NONE])
    lat = np.asarray(latency(), dtype=float)
    return lat, np.full(lat.shape, "interpolated")


def profile_hardware(meta: dict, tables: Mapping, where: Path) -> Hardware:
    """The preset named by meta.json, with what the profile measured replacing datasheet
    assumptions (each change listed in `notes` and `extra`)."""
    if not isinstance(meta["hardware_preset"], str):  # null had read as the preset 'None'
        raise SpeedplanInputError(f"{where / 'meta.json'}: field 'hardware_preset' must name a hardware preset, "
                                  f"got {meta['hardware_preset']!r:.40}")
    try:
        hw = get_hardware(meta["hardware_preset"])
    except SpeedplanInputError as e:
        raise SpeedplanInputError(f"{where / 'meta.json'}: field 'hardware_preset': {e}") from None
    device = meta.get("device")  # where speedplan bench measured it: "cpu" or "cuda" (imports say none)
    if device in ("cpu", "cuda") and (device == "cpu") != hw.is_cpu:  # a CPU's tables had priced "h100-sxm"
        raise SpeedplanInputError(f"{where / 'meta.json'}: measured on device {device!r} but names the preset "
                                  f"{hw.name!r}, a {'CPU' if hw.is_cpu else 'GPU'}: give the preset of the device it measured")
    if meta["origin"] == "datasheet-roofline":
        return hw
    measured = _measured_overrides(hw, tables)
    origin = "profile" if meta["origin"] == "measured" else "derived"
    note = (f"{', '.join(sorted(measured))} from profile {where.name} "
            f"({meta['origin']}, {meta.get('device_name', '?')}, {meta.get('date', '?')})")
    return hw.with_overrides(**measured, origin=origin, notes=(hw.notes + "; " if hw.notes else "") + note,
                             extra={**hw.extra, "profile": str(where), "measured": measured})


# A GEMM row more than this many times its preset's peak FLOP/s is refused: the GPU tables shipped reach
# at most 0.97x their datasheet peak, the CPU ones 2.1x the presets' estimate of 170 GFLOP/s (not a
# datasheet figure); a latency in the wrong unit is 1000x off.
PEAK_MARGIN = 3.0


def check_peak(path: Path, tables: Mapping, hw: Hardware) -> None:
    """Refuse a GEMM row faster than PEAK_MARGIN x the hardware's peak FLOP/s in its dtype, naming
    file and line (4096x8192x8192 in 0.5 µs, 1,100x an H100's peak, had been priced as measured)."""
    gemm = tables.get("gemm")
    if gemm is None:
        return
    for dt, peak in hw.peak_flops_per_s.items():
        sel = np.flatnonzero(gemm["dtype"] == dt)
        if not len(sel) or not peak:
            continue
        rate = 2 * gemm["m"][sel] * gemm["n"][sel] * gemm["k"][sel] / (gemm["latency_us"][sel] * 1e-6)
        over = np.flatnonzero(rate > PEAK_MARGIN * peak)
        if len(over):
            j, csv_path = over[0], Path(path) / "gemm.csv"
            i = int(sel[j])
            raise SpeedplanInputError(
                f"{csv_path}: column 'latency_us' line {file_line(csv_path, i)}: {gemm['latency_us'][i]:g} µs for "
                f"M={gemm['m'][i]:g}, N={gemm['n'][i]:g}, K={gemm['k'][i]:g} ({dt}) is {rate[j] / peak:,.0f}x "
                f"{hw.name}'s peak of {peak / 1e12:g} TFLOP/s: a unit slip (ms or ns for µs?) or another device's table")


def build_profile(path: Path, meta: dict, tables: Mapping) -> Profile:
    hw = profile_hardware(meta, tables, path)
    check_peak(path, tables, hw)
    return Profile(Path(path), meta, hw, meta["origin"], ORIGINS[meta["origin"]], tables)


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile folder. gemm.csv is required; the other tables are used
    when present. Raises SpeedplanInputError naming the file and column of
    any problem."""
    path = Path(path)
    if not path.is_dir():
        from speedplan.specs.hardware import PRESETS

        what = (f"a file, not a profile folder (give the folder that holds it: {path.parent})" if path.is_file()
                else "a hardware preset with no measured profile shipped (speedplan hardware lists the presets that "
                "have one)" if str(path).lower() in PRESETS else "no such profile folder")
        raise SpeedplanInputError(f"{path}: {what}")
    meta = read_meta(path)
    return build_profile(path, meta, read_tables(path))
