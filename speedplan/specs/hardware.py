"""Hardware specs: datasheet numbers with their sources, and the shipped presets
(`presets/hardware/*.json`, every number with a source; adding a GPU is one JSON file).

A `Hardware` is what the roofline needs (peak FLOP/s per dtype, memory bandwidth, capacity,
scale-up link bandwidth) plus the few small-kernel facts a roofline alone gets wrong (tile
width along M, per-kernel floor, per-step framework overhead). A measured profile
(`speedplan.profile`) replaces the roofline where it has points; a profile folder can be given
wherever a hardware name is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from speedplan.errors import SpeedplanInputError, did_you_mean
from speedplan.specs.files import finite, read_json

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
# The software platform engines run on: what an engine's defaults depend on beyond the memory
# (SGLang's memory reserve, engine/memory_rule.py). A file that does not say: "cpu" for a CPU
# preset (fp32), else "cuda".
PLATFORMS = ("cuda", "rocm", "cpu")


@dataclass(frozen=True)
class Hardware:
    """One accelerator (or CPU socket) as the cost model sees it.

    Units are in the names: FLOP/s, bytes/s, bytes, microseconds.
    `link_bytes_per_s` is the per-device, one-direction scale-up bandwidth that a ring
    all-reduce sees (NVLink: half the marketing bidirectional figure).
    """

    name: str
    description: str
    peak_flops_per_s: dict[str, float]
    hbm_bytes_per_s: float
    memory_bytes: float
    link_bytes_per_s: float
    link_latency_us: float = 8.0
    kernel_floor_us: float = 3.0
    gemm_tile_m: int = 64
    attention_tile_m: int = 128
    tree_mask_penalty: float = 1.25
    compute_efficiency: float = 1.0  # fraction of datasheet peak large kernels reach (each preset states its own)
    bandwidth_efficiency: float = 1.0
    default_dtype: str = "bf16"
    # Streaming multiprocessors (compute units): what wave quantisation counts; 0 = not stated.
    sm_count: int = 0
    # GPUs one fast link joins (an NVLink/NVSwitch node): the most TP the all-reduce prices; 0 = not stated.
    gpus_per_node: int = 0
    # Name of the fitted fallback (speedplan.specs.fallback) the roofline uses; "" = the plain
    # datasheet roofline with this preset's floor and peak fractions (CPUs).
    roofline_fit: str = ""
    source: str = ""
    notes: str = ""
    origin: str = "datasheet"  # "datasheet", "profile" (measured) or "derived"
    platform: str = ""  # one of PLATFORMS; "" (not stated): "cpu" for a CPU preset (fp32), else "cuda"
    extra: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)  # field name -> where its number came from

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpeedplanInputError("hardware: 'name' must not be empty (it names every output)")
        if len(self.name) > 200 or not self.name.isprintable():  # printed in every output line and figure
            raise SpeedplanInputError(f"hardware {_short(self.name)}: 'name' must be one line of printable text "
                                      "(up to 200 characters)")
        if not self.platform:
            object.__setattr__(self, "platform", "cpu" if self.default_dtype == "fp32" else "cuda")
        if self.platform not in PLATFORMS:
            raise SpeedplanInputError(f"hardware {self.name}: platform must be one of "
                                      f"{', '.join(map(repr, PLATFORMS))}, got {self.platform!r}")
        for label, value in (
            ("hbm_bytes_per_s", self.hbm_bytes_per_s),
            ("memory_bytes", self.memory_bytes),
            ("link_bytes_per_s", self.link_bytes_per_s),
        ):
            if not _positive(value):  # inf fell through SGLang's memory classes; "80e9" raised a TypeError
                raise SpeedplanInputError(f"hardware {self.name}: {label} must be a finite number > 0, got {_short(value)}")
        if (not isinstance(self.peak_flops_per_s, dict) or not self.peak_flops_per_s
                or any(not _positive(v) for v in self.peak_flops_per_s.values())):
            raise SpeedplanInputError(f"hardware {self.name}: peak_flops_per_s must map dtypes to finite numbers > 0")
        if self.roofline_fit and not self.sm_count > 0:
            raise SpeedplanInputError(f"hardware {self.name}: roofline_fit {self.roofline_fit!r} needs sm_count > 0 "
                                      "(wave quantisation counts SMs)")
        if self.default_dtype not in self.peak_flops_per_s:  # repr: a dtype with a line break was two lines
            raise SpeedplanInputError(
                f"hardware {self.name}: default dtype {_short(self.default_dtype)} has no peak FLOP/s"
            )

    @property
    def is_cpu(self) -> bool:
        """A CPU: its platform "cpu" (stated, or an fp32 file that states none: GPU presets default to
        bf16), so that what is a CPU for profiling and validation is what gates the engines' PLATFORMS."""
        return self.platform == "cpu"

    def check_tp(self, tp: int) -> None:
        """Refuse a TP wider than the GPUs one fast link joins (`gpus_per_node`, where stated): the
        all-reduce is priced at `link_bytes_per_s`, which a TP across nodes does not get."""
        if self.gpus_per_node and tp > self.gpus_per_node:
            unit = "process" if self.is_cpu else f"node links {self.gpus_per_node} GPUs"
            raise SpeedplanInputError(
                f"--tp {tp}: one {self.name} {unit}; speedplan prices tensor parallelism within one node (its "
                f"all-reduce at {self.link_bytes_per_s / 1e9:g} GB/s), not across nodes: use --tp {self.gpus_per_node} "
                "or less (serve more nodes as replicas), or a hardware file of your own with gpus_per_node")

    def flops_per_s(self, dtype: str) -> float:
        """Achievable dense FLOP/s for `dtype` (datasheet peak × compute_efficiency)."""
        if dtype not in DTYPE_BYTES:
            raise SpeedplanInputError(f"unknown dtype {dtype!r}; use one of {sorted(DTYPE_BYTES)}")
        if dtype not in self.peak_flops_per_s:
            raise SpeedplanInputError(f"hardware {self.name} has no {dtype} peak (not supported)")
        return self.peak_flops_per_s[dtype] * self.compute_efficiency

    @property
    def bytes_per_s(self) -> float:
        """Achievable memory bandwidth in bytes/s (datasheet × bandwidth_efficiency)."""
        return self.hbm_bytes_per_s * self.bandwidth_efficiency

    def roof_flops_per_s(self, dtype: str) -> float:
        """The compute roof reports draw (FLOP/s): the fastest GEMM a profile measured where one did
        (`flops_per_s`, its compute_efficiency measured), else on a preset whose GEMMs the fitted
        fallback prices its cap, the datasheet peak (`cost.roofline.gemm_roofline` reaches it in
        some M ranges: the A100's verify GEMMs were drawn up to 1.29x above a 75% roof), else
        `flops_per_s`."""
        achievable = self.flops_per_s(dtype)  # (checks the dtype)
        fitted = self.roofline_fit and "compute_efficiency" not in self.extra.get("measured", {})
        return self.peak_flops_per_s[dtype] if fitted else achievable

    def ridge_flops_per_byte(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) where the roof's compute time equals its memory time."""
        return self.roof_flops_per_s(dtype) / self.bytes_per_s

    def roofline_basis(self, dtype: str) -> str:
        """The achievable roof reports draw, with where each number comes from, e.g. "956 TFLOP/s
        bf16 (fastest measured GEMM of the profile: 97% of the preset's 989 TFLOP/s peak), 2,948 GB/s
        (assumption: 88% of the preset's 3,350 GB/s), ridge 324 FLOP/byte"."""
        measured = self.extra.get("measured", {})

        def why(field: str, what: str) -> str:
            if field in measured:
                return f"fastest measured {what} of the profile"
            text = self.sources.get(field, "")
            kinds = [k for k in ("assumption", "measured", "fitted", "datasheet") if k in text]
            return kinds[0] if kinds else "preset value"

        rate = lambda x, unit: f"{x / 1e12:,.0f} T{unit}" if x >= 1e13 else f"{x / 1e9:,.0f} G{unit}"
        if self.roof_flops_per_s(dtype) != self.flops_per_s(dtype):
            compute = (f"{rate(self.roof_flops_per_s(dtype), 'FLOP/s')} {dtype} (datasheet peak: the cap of the "
                       "fitted fallback that prices this preset's GEMMs), ")
        else:
            compute = (f"{rate(self.flops_per_s(dtype), 'FLOP/s')} {dtype} ({why('compute_efficiency', 'GEMM')}: "
                       f"{self.compute_efficiency:.0%} of the preset's {rate(self.peak_flops_per_s[dtype], 'FLOP/s')} peak), ")
        return (compute +
                f"{rate(self.bytes_per_s, 'B/s')} ({why('bandwidth_efficiency', 'copy')}: {self.bandwidth_efficiency:.0%} "
                f"of the preset's {rate(self.hbm_bytes_per_s, 'B/s')}), ridge {self.ridge_flops_per_byte(dtype):,.0f} FLOP/byte")

    def with_overrides(self, **changes) -> "Hardware":
        return replace(self, **changes)


def _positive(value) -> bool:
    """A real number (not true/false), finite and > 0."""
    return finite(value) and value > 0


def _short(value) -> str:
    """A value as an error line quotes it: its repr, cut to 60 characters (a {"value", "source"}
    entry's source runs to hundreds)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


PRESET_DIR = Path(__file__).parent / "presets" / "hardware"
# Fields a preset states as {"value": number, "source": text}; peak_flops_per_s holds one per dtype.
_NUMBERS = ("hbm_bytes_per_s", "memory_bytes", "link_bytes_per_s", "link_latency_us", "kernel_floor_us",
            "gemm_tile_m", "attention_tile_m", "tree_mask_penalty",
            "compute_efficiency", "bandwidth_efficiency", "sm_count", "gpus_per_node")
_TEXTS = ("name", "description", "source", "notes", "default_dtype", "roofline_fit")
_SAY = {"name": "what the device is called (--hardware NAME picks it)", "description": "what the device is",
        "source": "where its numbers come from (a datasheet, a measurement)"}


# Generous physical bounds: every shipped preset lies far inside them, and a value outside (1e300
# SMs, a negative link latency; a rate of 1e-300 per second, whose step times overflowed to NaN in
# the report's figures) priced nonsense or crashed the planner.
@dataclass(frozen=True)
class _Bound:
    """What a preset number may be: above `low` (or equal, `low_ok`), below `high`, an integer
    where `count`; `unit` is printed after the bound in the message. A rate is also at least
    `floor` (a million per second: no device is slower)."""

    low: float
    low_ok: bool
    high: float
    count: bool
    unit: str
    floor: float = 0.0


_LIMITS = {
    "peak_flops_per_s": _Bound(0, False, 1e18, False, "FLOP/s", 1e6),
    "hbm_bytes_per_s": _Bound(0, False, 1e15, False, "B/s", 1e6),
    "memory_bytes": _Bound(0, False, 1e14, False, "bytes", 1e8),  # 80 (GB typed for bytes) had planned "0.0 GB usable"
    "link_bytes_per_s": _Bound(0, False, 1e15, False, "B/s", 1e6),
    "link_latency_us": _Bound(0, False, 1e6, False, "us"),
    "kernel_floor_us": _Bound(0, False, 1e6, False, "us"),
    "gemm_tile_m": _Bound(1, True, 1e4, True, "rows"),
    "attention_tile_m": _Bound(1, True, 1e4, True, "rows"),
    "tree_mask_penalty": _Bound(1, True, 100, False, "(1: a tree mask costs nothing extra)"),
    "sm_count": _Bound(0, True, 1e5, True, "(0: not stated)"),
    "gpus_per_node": _Bound(0, True, 1e5, True, "GPUs (0: not stated)"),
}


def _number(entry, where: str, bound: _Bound | None) -> tuple[float, str]:
    if not (isinstance(entry, dict) and isinstance(entry.get("value"), (int, float))
            and not isinstance(entry.get("value"), bool) and isinstance(entry.get("source"), str)):
        raise SpeedplanInputError(f"{where}: expected {{\"value\": number, \"source\": text}}, got {_short(entry)}")
    value = entry["value"]
    if bound is None:  # an efficiency: checked by the caller
        return value, entry["source"]
    b = bound  # short: the test below reads it five times
    shown = lambda x: f"{x:.0e}".replace("e+0", "e").replace("e+", "e") if x > 1e4 else f"{x:g}"  # 1e15, 100
    if not ((b.low <= value if b.low_ok else b.low < value) and value < b.high
            and (not b.count or float(value).is_integer())):  # NaN and infinities fail too
        raise SpeedplanInputError(f"{where} must be {'an integer' if b.count else 'a number'} {'>=' if b.low_ok else '>'} "
                                  f"{shown(b.low)} and below {shown(b.high)} {b.unit}, got {_short(value)}")
    if value < b.floor:
        why = ("no device holds less; the unit is bytes, not GB" if b.unit == "bytes" else
               "no device is slower; the unit is per second")
        raise SpeedplanInputError(f"{where} must be at least {shown(b.floor)} {b.unit} ({why}), got {_short(value)}")
    return value, entry["source"]


def _platform(entry, where: str) -> tuple[str, str]:
    """(platform, its source) from a file's "platform": "rocm" or {"value": "rocm", "source": text}."""
    value, source = entry, ""
    if isinstance(entry, dict) and set(entry) == {"value", "source"}:
        value, source = entry["value"], entry["source"]
    if isinstance(value, str):  # "ROCm", "CUDA" as the vendors write them
        value = value.strip().lower()
    if value not in PLATFORMS or not isinstance(source, str):
        raise SpeedplanInputError(f"{where}: platform must be one of {', '.join(map(repr, PLATFORMS))} (the software "
                                  f"engines run on) or {{\"value\": one of them, \"source\": text}}, got {entry!r}")
    return value, source


def hardware_from_json(data: dict, where: str) -> Hardware:
    """A Hardware from a preset's JSON object (every number with its source)."""
    if not isinstance(data, dict):
        raise SpeedplanInputError(f"{where}: expected a JSON object")
    unknown = sorted(set(data) - set(_NUMBERS) - set(_TEXTS) - {"peak_flops_per_s", "platform"})
    if unknown and "sweep_id" in data:  # what speedplan sweep writes
        raise SpeedplanInputError(f"{where}: a sweep report's meta.json, not a hardware file")
    if unknown and "origin" in data:  # a profile folder's meta.json (a hardware file has no origin)
        raise SpeedplanInputError(f"{where}: a profile folder's meta.json, not a hardware file: give the folder that holds it")
    if unknown:
        raise SpeedplanInputError(f"{where}: unknown field {unknown[0]!r}")
    for key in ("name", "description", "source", "peak_flops_per_s", "hbm_bytes_per_s", "memory_bytes",
                "link_bytes_per_s"):
        if key not in data:
            raise SpeedplanInputError(f"{where}: missing field {key!r}")
    sources: dict[str, str] = {}
    fields: dict = {k: data[k] for k in _TEXTS if k in data}
    for key, value in fields.items():
        if not isinstance(value, str):
            raise SpeedplanInputError(f"{where}: {key} must be text, got {value!r}")
        if key in ("name", "description", "source") and not value.strip():  # every figure says where it came from
            raise SpeedplanInputError(f"{where}: {key} is empty; say {_SAY[key]}")
    if fields.get("roofline_fit"):
        from speedplan.specs.fallback import get_fit

        try:
            get_fit(fields["roofline_fit"])
        except SpeedplanInputError as e:
            raise SpeedplanInputError(f"{where}: roofline_fit: {e}") from None
    peaks = data["peak_flops_per_s"]
    if not isinstance(peaks, dict) or not peaks:
        raise SpeedplanInputError(f"{where}: peak_flops_per_s must map dtypes to numbers")
    fields["peak_flops_per_s"] = {}
    for dtype, entry in peaks.items():
        if dtype not in DTYPE_BYTES:
            raise SpeedplanInputError(f"{where}: peak_flops_per_s: unknown dtype {dtype!r}")
        fields["peak_flops_per_s"][dtype], sources[f"peak_flops_per_s.{dtype}"] = _number(
            entry, f"{where}: peak_flops_per_s.{dtype}", _LIMITS["peak_flops_per_s"])
    for key in _NUMBERS:
        if key in data:
            fields[key], sources[key] = _number(data[key], f"{where}: {key}", _LIMITS.get(key))
    for key in ("gemm_tile_m", "attention_tile_m", "sm_count", "gpus_per_node"):
        if key in fields:
            fields[key] = int(fields[key])
    for key in ("compute_efficiency", "bandwidth_efficiency"):  # a measured profile may find more (load.py)
        if key in fields and not 0 < fields[key] <= 1:
            raise SpeedplanInputError(f"{where}: {key} is the share of the datasheet peak kernels reach, in (0, 1]; "
                                      f"got {_short(fields[key])}")
    rates = (("hbm_bytes_per_s", "bandwidth_efficiency", fields["hbm_bytes_per_s"]),
             *((f"peak_flops_per_s.{d}", "compute_efficiency", v) for d, v in fields["peak_flops_per_s"].items()))
    for key, share, rate in rates:  # the achievable rate: 1e-300 of the peak overflowed the report's figures
        bound = _LIMITS[key.split(".")[0]]
        if rate * fields.get(share, 1.0) < bound.floor:
            raise SpeedplanInputError(f"{where}: {key} × {share} = {rate * fields.get(share, 1.0):.3g} {bound.unit}, below "
                                      f"{bound.floor:.0e} {bound.unit} (no device is slower)".replace("e+0", "e"))
    if "platform" in data:
        fields["platform"], sources["platform"] = _platform(data["platform"], where)
    try:
        return Hardware(**fields, sources=sources)
    except SpeedplanInputError as e:
        raise SpeedplanInputError(f"{where}: {e}") from None


def load_hardware_file(path: str | Path) -> Hardware:
    """A preset of one's own: a JSON file with the fields of presets/hardware/*.json (every
    number as {"value", "source"}). Without measurements, the roofline fallback prices it."""
    return hardware_from_json(read_json(path), str(Path(path)))


def _load_presets() -> dict[str, Hardware]:
    presets = {}
    for path in sorted(PRESET_DIR.glob("*.json")):
        hw = hardware_from_json(read_json(path), str(path))
        presets[hw.name] = hw
    return presets


PRESETS: dict[str, Hardware] = _load_presets()

DEFAULT_HARDWARE = "h100-sxm"


def get_hardware(name: str, folders: bool = True, profiles=()) -> Hardware:
    """A preset by name (case-insensitive). Profile folders are resolved by `speedplan.cost`;
    `folders=False` where the caller takes a preset only (the message then offers no folder:
    `profile roofline --hardware FOLDER` was told "or a profile folder", 2026-12-05). `profiles`:
    the names of shipped profiles that are no preset (cpu-local-xeon, ...), offered beside the
    presets where the caller takes them."""
    if not isinstance(name, str):
        raise SpeedplanInputError(f"hardware: expected a preset name ({', '.join(sorted(PRESETS))}), got {name!r:.60}")
    key = name.strip().lower()
    if key not in PRESETS:
        shipped = f"; shipped profiles: {', '.join(sorted(profiles))}" if profiles else ""
        raise SpeedplanInputError(f"unknown hardware {name!r:.60}{did_you_mean(key, [*PRESETS, *profiles])}; presets: "
                                  f"{', '.join(sorted(PRESETS))}{shipped} "
                                  + ("(or a profile folder)" if folders else "(a preset name, not a folder or file)"))
    return PRESETS[key]
