"""Constants of the roofline fallback, fitted to measured systems: per-family kernel floors,
efficiency by M range (GEMM) or bytes moved (attention), a per-CTA-wave cost, all-reduce
start-up latency and bus efficiency.

They live in `presets/fallback/roofline-fit.json`, written by `python -m speedplan.cost.fit`
(which says what each fit was fitted to, which system was left out, and the residuals); a
hardware preset names the fit it uses in `roofline_fit` ("" = plain datasheet roofline, as
for CPUs). Efficiencies are fractions of each system's own datasheet peak, so they carry to
hardware that was not measured; floors and per-wave costs are kernel properties and carry
less well (docs/profiles.md gives the leave-one-out errors).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from speedplan.errors import SpeedplanInputError

FIT_PATH = Path(__file__).parent / "presets" / "fallback" / "roofline-fit.json"


@dataclass(frozen=True)
class GemmFit:
    """latency = floor_us + max(t_compute(waves of tile_m × tile_n tiles) / compute_eff[i][j],
    t_memory / memory_eff[i][j]); i the M bin (split at `m_edges`, M ≤ edge[0] is bin 0), j the
    weight-size bin (N · K · bytes split at `weight_bytes_edges`)."""

    floor_us: float
    tile_m: int
    tile_n: int
    m_edges: tuple[float, ...]
    weight_bytes_edges: tuple[float, ...]
    compute_eff: tuple[tuple[float, ...], ...]
    memory_eff: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class AttentionFit:
    """latency = floor_us + max(t_compute / compute_eff, t_memory / memory_eff[bin]) +
    waves · wave_flops / (bf16 peak / SMs): bins of bytes moved split at `bytes_edges`, waves =
    ⌈CTAs / SMs⌉ with one CTA per (sequence, KV head, 128-row tile). A wave costs a fixed
    amount of work at one SM's tensor rate (a padded tile's worth): 3.4 µs per wave on H100 and
    H200, half that on B200, whose SMs are twice as fast."""

    floor_us: float
    wave_flops: float
    bytes_edges: tuple[float, ...]
    memory_eff: tuple[float, ...]
    compute_eff: float


@dataclass(frozen=True)
class AllreduceFit:
    """latency = latency_us + 2 (n − 1) / n · bytes / (link bandwidth · bus_eff)."""

    latency_us: float
    bus_eff: float


@dataclass(frozen=True)
class FallbackFit:
    name: str
    fitted_to: tuple[str, ...]
    held_out: str | None
    gemm: dict  # dtype group ("bf16", "fp8") -> GemmFit
    attention: AttentionFit
    allreduce: AllreduceFit
    elementwise_floor_us: float

    def gemm_for(self, dtype: str) -> GemmFit:
        return self.gemm["fp8" if dtype == "fp8" else "bf16"]


def _fit(name: str, data: dict) -> FallbackFit:
    try:
        gemm = {dt: GemmFit(float(g["floor_us"]), int(g["tile_m"]), int(g["tile_n"]), tuple(g["m_edges"]),
                            tuple(g["weight_bytes_edges"]), tuple(map(tuple, g["compute_eff"])),
                            tuple(map(tuple, g["memory_eff"]))) for dt, g in data["gemm"].items()}
        a = data["decode_attention"]
        attention = AttentionFit(float(a["floor_us"]), float(a["wave_flops"]), tuple(a["bytes_edges"]),
                                 tuple(a["memory_eff"]), float(a["compute_eff"]))
        ar = data["allreduce"]
        return FallbackFit(name, tuple(data["fitted_to"]), data.get("held_out"), gemm, attention,
                           AllreduceFit(float(ar["latency_us"]), float(ar["bus_eff"])),
                           float(data["elementwise"]["floor_us"]))
    except (KeyError, TypeError, ValueError) as e:
        raise SpeedplanInputError(f"{FIT_PATH}: fit {name!r} is malformed ({type(e).__name__}: {e})") from None


@lru_cache(maxsize=None)
def _all_fits() -> dict:
    return json.loads(FIT_PATH.read_text())["fits"]


@lru_cache(maxsize=None)
def get_fit(name: str) -> FallbackFit:
    """A fit by name: "all" (the shipped constants) or "without-<hardware>" (leave-one-out)."""
    fits = _all_fits()
    if name not in fits:
        raise SpeedplanInputError(f"unknown roofline fit {name!r}; {FIT_PATH.name} has {', '.join(fits)}")
    return _fit(name, fits[name])


def describe_fit(name: str) -> str:
    """What a hardware preset's `roofline_fit` prices with, as reports print it, e.g. "roofline
    efficiencies fitted to h100-sxm, h200-sxm, b200"; "" names the plain datasheet roofline."""
    if not name:
        return "plain datasheet peaks"
    return f"roofline efficiencies fitted to {', '.join(get_fit(name).fitted_to)}"


def fit_names() -> list[str]:
    return list(_all_fits())
