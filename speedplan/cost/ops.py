"""Op latency: measured profile first, datasheet roofline where the profile has no answer.

Every op's price comes through `CostModel.gemm` / `CostModel.attention` and comes back as one
type, `OpCost(latency_us, source, bound)`, whichever of the two answered. Callers (the forward
op list, `speedplan predict ops`) never know or care which it was, except to report it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.specs.hardware import Hardware, get_hardware
from speedplan.cost.roofline import allreduce_us, attention_roofline, elementwise_roofline, gemm_roofline

PROFILE_DIR = Path(__file__).resolve().parent.parent / "data" / "profiles"  # shipped, package data


@dataclass(frozen=True)
class OpCost:
    """Latency of a batch of ops (µs), who answered ("profile" or "roofline"), and whether the
    roofline calls each op "memory" or "compute" bound. Arrays all share one shape."""

    latency_us: np.ndarray
    source: np.ndarray
    bound: np.ndarray

    @property
    def from_profile(self) -> np.ndarray:
        return self.source == "profile"


class ProfileLookup(Protocol):
    """What a measured profile offers the cost model (see `speedplan.profile.Profile`).

    Each method returns latency in µs with NaN where the profile cannot answer (op family or
    dtype not measured), in which case the roofline answers.
    """

    hardware: Hardware
    source_label: str  # "profile" for measured (or derived-from-measured) tables, "roofline" otherwise
    origin: str  # "measured", "derived" or "datasheet-roofline" (meta.json), shown in reports

    def gemm_latency_us(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, dtype: str) -> np.ndarray: ...

    def attention_latency_us(
        self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str
    ) -> np.ndarray: ...

    def elementwise_latency_us(self, nbytes: np.ndarray, dtype: str) -> np.ndarray: ...


def _bound(compute_bound: np.ndarray) -> np.ndarray:
    return np.where(compute_bound, "compute", "memory")


def _merge(measured: np.ndarray | None, roofline_us: np.ndarray, label: str) -> tuple[np.ndarray, np.ndarray]:
    if measured is None:
        return roofline_us, np.full(np.shape(roofline_us), "roofline")
    measured = np.broadcast_to(np.asarray(measured, dtype=float), np.shape(roofline_us))
    ok = np.isfinite(measured)
    return np.where(ok, measured, roofline_us), np.where(ok, label, "roofline")


@dataclass(frozen=True)
class CostModel:
    """Prices ops on one device: `hardware` for the roofline, `profile` (optional) first."""

    hardware: Hardware
    profile: ProfileLookup | None = None

    @property
    def origin(self) -> str:
        """Where latencies come from: the profile's origin ("measured", "derived",
        "datasheet-roofline") or "datasheet" when there is no profile."""
        return self.profile.origin if self.profile is not None else self.hardware.origin

    @property
    def _label(self) -> str:
        return self.profile.source_label if self.profile is not None else "roofline"

    def gemm(self, m, n, k, dtype: str) -> OpCost:
        m, n, k = np.broadcast_arrays(np.asarray(m, float), np.asarray(n, float), np.asarray(k, float))
        roof, compute_bound = gemm_roofline(self.hardware, m, n, k, dtype)
        measured = self.profile.gemm_latency_us(m, n, k, dtype) if self.profile is not None else None
        latency, source = _merge(measured, roof, self._label)
        return OpCost(latency, source, _bound(compute_bound))

    def attention(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str) -> OpCost:
        arrays = np.broadcast_arrays(
            *(np.asarray(x, float) for x in (batch, q_len, kv_len, num_heads, num_kv_heads, head_dim))
        )
        mask = np.broadcast_to(np.asarray(mask), arrays[0].shape)
        roof, compute_bound = attention_roofline(self.hardware, *arrays, mask, dtype)
        measured = (
            self.profile.attention_latency_us(*arrays, mask, dtype) if self.profile is not None else None
        )
        latency, source = _merge(measured, roof, self._label)
        return OpCost(latency, source, _bound(compute_bound))

    def elementwise(self, nbytes, dtype: str) -> OpCost:
        nbytes = np.asarray(nbytes, float)
        roof = elementwise_roofline(self.hardware, nbytes)
        measured = self.profile.elementwise_latency_us(nbytes, dtype) if self.profile is not None else None
        latency, source = _merge(measured, roof, self._label)
        return OpCost(latency, source, np.full(np.shape(latency), "memory"))

    def allreduce(self, nbytes, tp: int) -> np.ndarray:
        """All-reduce latency in µs (roofline ring model; link profiles are not measured)."""
        return allreduce_us(self.hardware, nbytes, tp)


def _measured(meta_path: Path) -> bool:
    """Whether a shipped profile holds measurements (or tables derived from them), as opposed
    to a datasheet roofline written out as a table, which the preset already is."""
    import json

    try:
        return json.loads(meta_path.read_text()).get("origin") != "datasheet-roofline"
    except (OSError, ValueError):
        return True  # let load_profile report what is wrong with it


def load_cost_model(hardware: str | Path) -> CostModel:
    """A hardware preset name, a profile folder, or the name of a shipped profile under
    `profiles/` (e.g. "cpu-local"); a shipped measured profile wins over the bare preset."""
    key = str(hardware).strip()
    path = Path(key)
    shipped = PROFILE_DIR / key.lower() / "meta.json"
    if not path.is_dir() and shipped.exists() and _measured(shipped):
        path = PROFILE_DIR / key.lower()
    if path.is_dir():
        from speedplan.profile.load import load_profile  # local import: only when a profile is used

        profile = load_profile(path)
        return CostModel(profile.hardware, profile)
    if ("/" in key or key.startswith(".")) and not path.exists():
        raise SpeedplanInputError(f"{key}: no such profile folder")
    return CostModel(get_hardware(key))
