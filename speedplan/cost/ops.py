"""Op latency: measured profile first, the roofline fallback where the profile has no answer.

Every op's price comes through `CostModel.gemm` / `.attention` / `.elementwise` /
`.allreduce` and comes back as one type, `OpCost(latency_us, source, bound, out_of_range)`,
whichever of the two answered (`.moe`, a measured fused-MoE layer, is answered by a profile
only). Callers (the forward
op list, `speedplan predict ops`) never know or care which it was, except to report it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from speedplan.errors import SpeedplanInputError, clipped
from speedplan.specs.files import is_a
from speedplan.specs.hardware import PRESETS, Hardware, get_hardware
from speedplan.cost.roofline import (allreduce_us, attention_roofline, attention_sol_us, elementwise_roofline,
                                     gemm_roofline)

PROFILE_DIR = Path(__file__).resolve().parent.parent / "data" / "profiles"  # shipped, package data


@dataclass(frozen=True)
class OpCost:
    """Latency of a batch of ops (µs), who answered ("profile" or "roofline"), whether the
    roofline calls each op "memory" or "compute" bound, and whether a profile answered it from
    outside its measured range (`out_of_range`: the edge's utilisation carried beyond it).
    Arrays all share one shape."""

    latency_us: np.ndarray
    source: np.ndarray
    bound: np.ndarray
    out_of_range: np.ndarray | None = None  # all False when not given

    def __post_init__(self) -> None:
        if self.out_of_range is None:
            object.__setattr__(self, "out_of_range", np.zeros(np.shape(self.latency_us), dtype=bool))

    @property
    def from_profile(self) -> np.ndarray:
        return self.source == "profile"


class ProfileLookup(Protocol):
    """What a measured profile offers the cost model (see `speedplan.profile.load.Profile`).

    Each `*_lookup` returns (latency µs with NaN where the profile cannot answer, how each was
    answered: "extrapolated" marks a point outside the measured range); the roofline answers
    the NaNs. A profile that
    offers only `*_latency_us` (latency alone) is taken as answering inside its range.
    """

    hardware: Hardware
    source_label: str  # "profile" for measured (or derived-from-measured) tables, "roofline" otherwise
    origin: str  # "measured", "derived" or "datasheet-roofline" (meta.json), shown in reports

    def gemm_lookup(self, m, n, k, dtype: str) -> tuple[np.ndarray, np.ndarray]: ...

    def attention_lookup(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str
                         ) -> tuple[np.ndarray, np.ndarray]: ...

    def elementwise_lookup(self, nbytes, dtype: str) -> tuple[np.ndarray, np.ndarray]: ...


def _ask(profile, family: str, *args) -> tuple[np.ndarray | None, np.ndarray | None]:
    if profile is None:
        return None, None
    if hasattr(profile, f"{family}_lookup"):
        return getattr(profile, f"{family}_lookup")(*args)
    if hasattr(profile, f"{family}_latency_us"):
        return getattr(profile, f"{family}_latency_us")(*args), None
    return None, None


def _merge(measured, code, roofline_us: np.ndarray, label: str, bound: np.ndarray) -> OpCost:
    shape = np.shape(roofline_us)
    if measured is None:
        return OpCost(roofline_us, np.full(shape, "roofline"), bound)
    measured = np.broadcast_to(np.asarray(measured, dtype=float), shape)
    ok = np.isfinite(measured)
    outside = ok & (np.broadcast_to(code, shape) == "extrapolated") if code is not None else np.zeros(shape, bool)
    return OpCost(np.where(ok, measured, roofline_us), np.where(ok, label, "roofline"), bound, outside)


def _bound(compute_bound: np.ndarray) -> np.ndarray:
    return np.where(compute_bound, "compute", "memory")


@dataclass(frozen=True)
class CostModel:
    """Prices ops on one device: `hardware` for the roofline, `profile` (optional) first."""

    hardware: Hardware
    profile: ProfileLookup | None = None
    hardware_file: str = ""  # the JSON file `hardware` was read from (resolved); "" for a preset or a profile folder

    @property
    def origin(self) -> str:
        """Where latencies come from, as reports print it: the profile's label ("measured
        (AIConfigurator 0.12, vLLM 0.24 kernels)") or origin ("measured", "derived",
        "datasheet-roofline"), or "datasheet" when there is no profile."""
        if self.profile is None:
            return self.hardware.origin
        return str(getattr(self.profile, "origin_label", None) or self.profile.origin)

    @property
    def _label(self) -> str:
        return self.profile.source_label if self.profile is not None else "roofline"

    @property
    def moe_routing(self) -> str:
        """The routing the profile's fused-MoE table was measured with ("balanced", which the
        forward op list converts to random routing, or a skewed one used as measured; see
        `speedplan.profile.moe`); "balanced" without such a table."""
        from speedplan.profile.moe import BALANCED

        table = self.profile.table("moe") if hasattr(self.profile, "table") else None
        return str(getattr(table, "routing", BALANCED))

    def gemm(self, m, n, k, dtype: str) -> OpCost:
        m, n, k = (np.asarray(v, float) for v in (m, n, k))  # not broadcast: one (N, K) is computed once
        if m.size > 256 and n.size == 1 and k.size == 1:  # a sweep's M = B(1+D) repeats: price each M once
            unique, inverse = np.unique(m, return_inverse=True)
            if len(unique) < m.size // 2:
                op = self.gemm(unique, n.reshape(()), k.reshape(()), dtype)
                take = lambda a: np.broadcast_to(a, unique.shape)[inverse].reshape(m.shape)
                return OpCost(take(op.latency_us), take(op.source), take(op.bound), take(op.out_of_range))
        shape = np.broadcast_shapes(m.shape, n.shape, k.shape)
        roof, compute_bound = (np.broadcast_to(a, shape) for a in gemm_roofline(self.hardware, m, n, k, dtype))
        measured, code = _ask(self.profile, "gemm", m, n, k, dtype)
        return _merge(measured, code, roof, self._label, _bound(compute_bound))

    def attention(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str,
                  qo_head_dim=None) -> OpCost:
        """Decode/verify attention (`speedplan.cost.roofline.attention_roofline`). `qo_head_dim`:
        absorbed MLA's query/output width per head (`speedplan.cost.attention_shape.
        attention_qo_head_dim`), which also selects MLA's 64-row blocks (`roofline.MLA_TILE_M`);
        None for every other attention (the cached K/V width and the preset's tile). A profile is
        asked the stand-in shape (heads, KV heads, head_dim) of its measured kernels (their
        utilisation of the speed of light, transferred), and its answer is scaled by the speed
        of light of the real rows over the stand-in's: memory-bound, about 1; compute-bound, the
        FLOPs the stand-in left out, less any padding its 128-row tiles counted that 64-row
        blocks do not."""
        arrays = [np.asarray(x, float) for x in (batch, q_len, kv_len, num_heads, num_kv_heads, head_dim)]
        mask = np.asarray(mask)
        shape = np.broadcast_shapes(*(a.shape for a in arrays), mask.shape)
        roof, compute_bound = attention_roofline(self.hardware, *arrays, mask, dtype, qo_head_dim)
        roof, compute_bound = np.broadcast_to(roof, shape), np.broadcast_to(compute_bound, shape)
        measured, code = _ask(self.profile, "attention", *arrays, mask, dtype)
        if measured is not None and qo_head_dim is not None:
            real, stand_in = (attention_sol_us(self.hardware, *arrays, dtype, qo) for qo in (qo_head_dim, None))
            measured = np.asarray(measured, float) * np.divide(real, stand_in, out=np.ones(np.shape(real)),
                                                               where=stand_in > 0)  # batch 0: nothing to scale
        return _merge(measured, code, roof, self._label, _bound(compute_bound))

    def elementwise(self, nbytes, dtype: str) -> OpCost:
        nbytes = np.asarray(nbytes, float)
        roof = elementwise_roofline(self.hardware, nbytes)
        measured, code = _ask(self.profile, "elementwise", nbytes, dtype)
        return _merge(measured, code, roof, self._label, np.full(np.shape(roof), "memory"))

    def moe(self, tokens, hidden: int, inter: int, experts: int, topk: int, tp: int, ep: int,
            dtype: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        """One MoE layer's routed experts as the profile measured its fused kernel (µs, NaN
        where it has no such series) and whether each answer lies beyond the measured token
        counts; (None, None) without a profile. No roofline here: without a measurement the
        forward op list prices the experts as grouped GEMMs (`speedplan.cost.forward`)."""
        measured, code = _ask(self.profile, "moe", np.asarray(tokens, float), hidden, inter, experts, topk, tp, ep,
                              dtype)
        if measured is None:
            return None, None
        shape = np.shape(tokens)
        outside = np.broadcast_to(code == "extrapolated", shape) if code is not None else np.zeros(shape, bool)
        return np.broadcast_to(np.asarray(measured, float), shape), outside

    def allreduce(self, nbytes, tp: int) -> OpCost:
        """All-reduce of `nbytes` over `tp` devices: the profile's measured all-reduce at
        that TP where it has one, else the fitted link model (zero at TP 1)."""
        nbytes = np.asarray(nbytes, float)
        roof = allreduce_us(self.hardware, nbytes, tp)
        measured, code = _ask(self.profile, "allreduce", nbytes, tp) if tp > 1 else (None, None)
        return _merge(measured, code, roof, self._label, np.full(np.shape(roof), "memory"))


    def allgather(self, nbytes, tp: int) -> OpCost:
        """All-gather that leaves `nbytes` on each of `tp` devices. The profiles measure all-reduce
        only; a ring all-gather moves (tp − 1)/tp · nbytes a GPU, what a ring all-reduce of
        nbytes / 2 moves (2(tp − 1)/tp · nbytes / 2), so it is priced as that all-reduce, whose
        start-up latency stands for the gather's."""
        return self.allreduce(np.asarray(nbytes, float) / 2, tp)


def _measured(meta_path: Path) -> bool:
    """Whether a shipped profile holds measurements (or tables derived from them), as opposed
    to a datasheet roofline written out as a table, which the preset already is."""
    import json

    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return True  # let load_profile report what is wrong with it
    return not isinstance(meta, dict) or meta.get("origin") != "datasheet-roofline"  # (not an object: load_profile says so)


def shipped_profile(name: str) -> Path | None:
    """The shipped profile folder for a preset name, if it holds measurements (a path is no
    preset name: PROFILE_DIR / "/abs/folder" had been the user's folder)."""
    key = name.strip().lower().rstrip("/\\")  # "h100-sxm/", as a shell completes a folder's name
    if not key or Path(key).is_absolute() or "/" in key or "\\" in key or key in (".", ".."):
        return None
    meta = PROFILE_DIR / key / "meta.json"
    return meta.parent if is_a(meta, "file") and _measured(meta) else None  # a name too long for the OS: none


LATENCY_ORIGINS = {  # a cost model's origin as outputs name it (a measured profile's own label otherwise)
    "measured": "measured profile",
    "derived": "derived profile",
    "datasheet-roofline": "datasheet roofline",
    "datasheet": "datasheet roofline",
}


def missing_tables(meta: dict) -> list[str]:
    """The op families a sweep's verify pass uses that its profile holds no table for (what the
    roofline fallback prices), from the sweep's meta; [] without a profile."""
    tables = set(meta.get("profile_tables") or [])
    if not tables:
        return []
    used = ["gemm", "attention", "elementwise"] + (["allreduce"] if int(meta.get("tp", 1)) > 1 else []) \
        + (["moe"] if (meta.get("model") or {}).get("experts") else [])
    return [f for f in used if f not in tables]


def latency_label(origin: str, name: str = "", roofline_fit: str = "") -> str:
    """Where latencies come from, as every output says it: "measured (AIConfigurator 0.12, vLLM
    0.24 kernels) h100-sxm", or "datasheet roofline a100-80gb (roofline efficiencies fitted to
    h100-sxm, h200-sxm, b200)" (`roofline_fit`: `specs.fallback.describe_fit` of the preset)."""
    text = f"{LATENCY_ORIGINS.get(origin, origin)} {name}".strip()
    return text + (f" ({roofline_fit})" if origin == "datasheet" and roofline_fit else "")


def latency_origin(name: str) -> str:
    """What `speedplan sweep --hardware NAME` prices with, as the hardware table prints it: a
    shipped profile's label ("measured (AIConfigurator 0.12, vLLM 0.24 kernels)") or the
    datasheet roofline and what its fallback was fitted to."""
    import json

    folder = shipped_profile(name)
    if folder is None:
        from speedplan.specs.fallback import describe_fit
        from speedplan.specs.hardware import get_hardware

        return latency_label("datasheet", "", describe_fit(get_hardware(name).roofline_fit))
    from speedplan.profile.load import origin_label

    meta = json.loads((folder / "meta.json").read_text())
    return latency_label(origin_label(meta))  # "measured" alone reads "measured profile" there


def load_cost_model(hardware: str | Path) -> CostModel:
    """A hardware preset name, a profile folder, a preset JSON file of one's own
    (`path/to/preset.json`: priced with the roofline fallback), or the name of a shipped
    profile under `data/profiles/` (e.g. "cpu-local"); a shipped measured profile wins over
    the bare preset."""
    if not isinstance(hardware, (str, os.PathLike)):  # str(None) would be looked up as the hardware "None"
        raise SpeedplanInputError(f"hardware: expected a preset name, a profile folder or a preset JSON file, "
                                  f"got {hardware!r}")
    key = str(hardware).strip()
    if not key:
        raise SpeedplanInputError(f"hardware: empty name; presets: {', '.join(sorted(PRESETS))} (or a profile folder)")
    path = Path(key)
    if key.lower().endswith(".json"):
        from speedplan.specs.hardware import load_hardware_file

        return CostModel(load_hardware_file(path), hardware_file=str(path.resolve()))
    shipped = shipped_profile(key)
    if not is_a(path, "dir") and shipped is not None:
        path = shipped
    if is_a(path, "dir"):
        from speedplan.profile.load import load_profile  # local import: only when a profile is used

        profile = load_profile(path)
        return CostModel(profile.hardware, profile)
    if ("/" in key or key.startswith(".")) and not is_a(path, "any"):
        raise SpeedplanInputError(f"{clipped(key)}: no such profile folder")
    others = [f.name for f in PROFILE_DIR.iterdir() if f.is_dir() and f.name not in PRESETS] if key.lower() not in PRESETS else []
    return CostModel(get_hardware(key, profiles=others))


def profile_name(cost: "CostModel") -> str | None:
    """How outputs name a cost model's profile: a shipped one by its name, any other folder by its
    path (a copy or a re-measurement of cpu-local must not read as the shipped one); None
    without a profile."""
    path = getattr(getattr(cost, "profile", None), "path", None)
    if path is None or not str(path):
        return None
    return shipped_profile_name(path) or str(Path(path).resolve())  # ./cpu-local: not the shipped one


def shipped_profile_name(path: str | Path) -> str | None:
    """The name of a profile folder speedplan ships (`path` is in its profiles folder), else None."""
    return Path(path).name if Path(path).resolve().parent == PROFILE_DIR.resolve() else None
