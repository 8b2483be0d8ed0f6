"""Fitting the roofline fallback's constants to measured profiles, with one system left out.

    python -m speedplan.cost.fit            # writes speedplan/specs/presets/fallback/roofline-fit.json

The forms are those of `speedplan.cost.roofline` (docs/profiles.md):

    GEMM       floor + max(waves · SMs · tile FLOPs / (peak · e_c), bytes / (BW · e_m)), e by (M, weight size) bin
    decode     floor + max(FLOPs / (peak · e_c), bytes / (BW · e_m[bytes bin])) + ⌈CTAs / SMs⌉ · wave FLOPs / (peak / SMs)
    all-reduce latency + 2 (n − 1) / n · bytes / (link · bus_eff)

Efficiencies are fractions of each system's own datasheet peak (its hardware preset), so they
carry to other hardware; floors are in µs and attention's per-wave cost in FLOPs at one SM's
tensor rate (it halves on B200, whose SMs are twice as fast). Each fit minimises the mean
|log(predicted / measured)| over the training systems' rows by grid search (coarse to fine,
numpy only; bins are independent once the floor is fixed). Attention's compute efficiency is
the median utilisation of the measured prefills of 2,048 tokens or more (compute-bound).

Fits written: "all" (every system: the constants presets use), and "without-<system>" for
each system, with its error on the one left out ("held_out_error"): the fallback's accuracy
on hardware it has not seen.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import numpy as np

from speedplan.cost.roofline import _attention_terms, prefill_sol_us
from speedplan.outputs import shipped_default
from speedplan.specs.fallback import FIT_PATH
from speedplan.specs.hardware import DTYPE_BYTES, get_hardware

SYSTEMS = ("h100-sxm", "h200-sxm", "b200")
PROFILES = Path(__file__).resolve().parent.parent / "data" / "profiles"
M_EDGES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]  # powers of two
WEIGHT_EDGES = [1e6, 16e6, 128e6]  # N · K · bytes: L2-resident, small, medium, large weights
BYTES_EDGES = [1e6, 1e7, 1e8, 1e9]
TILES = [(64, 128), (128, 128), (128, 256)]
MAX_ROWS = 6000  # rows per bin and system in a fit (seeded sample): the grid search's cost
_RNG = np.random.default_rng(0)


def _loss(pred: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Mean |log(pred / measured)| along the last axis."""
    return np.mean(np.abs(np.log(pred) - np.log(lat)), axis=-1)


def _search(score, lo: np.ndarray, hi: np.ndarray, steps: int = 12, passes: int = 4) -> np.ndarray:
    """Minimise score(params [candidates, dims]) over a log-spaced box, shrinking it around the
    best point each pass."""
    lo, hi = np.log(lo), np.log(hi)
    best = (lo + hi) / 2
    for _ in range(passes):
        axes = [np.linspace(a, b, steps) for a, b in zip(lo, hi)]
        cand = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
        best = cand[int(np.argmin(score(np.exp(cand))))]
        span = (hi - lo) / steps * 2
        lo, hi = best - span, best + span
    return np.exp(best)


def _sample(idx: np.ndarray) -> np.ndarray:
    return idx if len(idx) <= MAX_ROWS else np.sort(_RNG.choice(idx, MAX_ROWS, replace=False))


# ---- data ------------------------------------------------------------------------------------
def load_system(name: str, folder: Path | None = None) -> dict:
    """A system's measured tables (from its profile folder) with the roofline terms of each row."""
    from speedplan.profile.tables import read_tables

    hw = get_hardware(name)
    t = read_tables(Path(folder or PROFILES / name))
    data = {"hw": hw, "name": name, "gemm": {}, "floor_us": float(t["floors"]["latency_us"].min())}
    g = t["gemm"]
    for dt in ("bf16", "fp8"):
        s = g["dtype"] == dt
        m, n, k, lat = g["m"][s], g["n"][s], g["k"][s], g["latency_us"][s]
        t_m = (m * k + k * n + m * n) * DTYPE_BYTES[dt] / hw.hbm_bytes_per_s * 1e6
        waves = {tile: np.ceil(np.ceil(m / tile[0]) * np.ceil(n / tile[1]) / hw.sm_count) for tile in TILES}
        t_c = {tile: w * hw.sm_count * tile[0] * tile[1] * 2 * k / hw.peak_flops_per_s[dt] * 1e6 for tile, w in waves.items()}
        bin_ = np.searchsorted(M_EDGES, m, side="left") * (len(WEIGHT_EDGES) + 1) + np.searchsorted(
            WEIGHT_EDGES, n * k * DTYPE_BYTES[dt])
        data["gemm"][dt] = {"lat": lat, "t_m": t_m, "t_c": t_c, "bin": bin_}
    a = t["attention"]
    t_c, t_m, nbytes, ctas = _attention_terms(hw, a["batch"], a["q_len"], a["kv_len"], a["num_heads"],
                                              a["num_kv_heads"], a["head_dim"], "bf16")
    kv_b = np.where(a["dtype"] == "fp8", 0.5, 1.0)  # fp8 KV: half the bytes of the bf16 terms
    wave_unit = hw.sm_count / hw.peak_flops_per_s["bf16"] * 1e6  # µs per FLOP at one SM's tensor rate
    data["decode"] = {"lat": a["latency_us"], "t_c": t_c, "t_m": t_m * kv_b,
                      "bin": np.searchsorted(BYTES_EDGES, nbytes * kv_b), "waves": np.ceil(ctas / hw.sm_count) * wave_unit}
    p = t["prefill"]
    long = p["seq_len"] >= 2048
    sol = prefill_sol_us(hw, p["batch"][long], p["seq_len"][long], p["num_heads"][long], p["num_kv_heads"][long],
                         p["head_dim"][long], "bf16")
    data["prefill_util"] = sol / p["latency_us"][long]
    r = t["allreduce"]
    data["allreduce"] = {"lat": r["latency_us"], "ring_us": 2 * (r["num_gpus"] - 1) / r["num_gpus"] * r["nbytes"]
                         / hw.link_bytes_per_s * 1e6}
    return data


# ---- fits ------------------------------------------------------------------------------------
def _gemm_pred(d: dict, tile, p: dict) -> np.ndarray:
    ec, em = np.ravel(p["compute_eff"])[d["bin"]], np.ravel(p["memory_eff"])[d["bin"]]
    return p["floor_us"] + np.maximum(d["t_c"][tile] / ec, d["t_m"] / em)


def fit_gemm(systems: list[dict], dtype: str) -> dict:
    """Floor, tile shape and per-M-bin efficiencies of one dtype's GEMMs."""
    best = None
    for tile in TILES:
        rows = [s["gemm"][dtype] for s in systems]
        lat = np.concatenate([r["lat"] for r in rows])
        t_c = np.concatenate([r["t_c"][tile] for r in rows])
        t_m = np.concatenate([r["t_m"] for r in rows])
        bins = np.concatenate([r["bin"] for r in rows])
        picks = [_sample(np.flatnonzero(bins == b)) for b in range((len(M_EDGES) + 1) * (len(WEIGHT_EDGES) + 1))]

        def per_bin(floor: float):
            effs, total = [], 0.0
            for idx in picks:
                if not len(idx):  # no measured point in this bin: nothing binds it
                    effs.append(np.array([1.0, 1.0]))
                    continue

                def score(c, idx=idx):  # c: [candidates, (e_c, e_m)]
                    pred = floor + np.maximum(t_c[idx][None] / c[:, :1], t_m[idx][None] / c[:, 1:])
                    return _loss(pred, lat[idx][None])
                e = _search(score, np.array([0.05, 0.05]), np.array([8.0, 2.0]), steps=10, passes=3)
                effs.append(e)
                total += float(score(e[None])[0]) * len(idx)
            return effs, total

        floors = np.linspace(1.0, 9.0, 17)
        losses = [per_bin(f)[1] for f in floors]
        floor = float(floors[int(np.argmin(losses))])
        effs, total = per_bin(floor)
        if best is None or total < best[0]:
            shape = (len(M_EDGES) + 1, len(WEIGHT_EDGES) + 1)
            best = (total, {"floor_us": round(floor, 3), "tile_m": tile[0], "tile_n": tile[1], "m_edges": M_EDGES,
                            "weight_bytes_edges": WEIGHT_EDGES,
                            "compute_eff": np.round([e[0] for e in effs], 4).reshape(shape).tolist(),
                            "memory_eff": np.round([e[1] for e in effs], 4).reshape(shape).tolist()})
    return best[1]


def _decode_pred(d: dict, p: dict) -> np.ndarray:
    em = np.asarray(p["memory_eff"])[d["bin"]]
    return p["floor_us"] + np.maximum(d["t_c"] / p["compute_eff"], d["t_m"] / em) + d["waves"] * p["wave_flops"]


def fit_attention(systems: list[dict]) -> dict:
    """Floor, per-wave cost and per-bytes-bin memory efficiency of decode attention; the
    compute efficiency from the long prefills."""
    ec = float(np.median(np.concatenate([s["prefill_util"] for s in systems])))
    cols = {c: np.concatenate([s["decode"][c] for s in systems]) for c in ("lat", "t_c", "t_m", "bin", "waves")}

    def inner(floor: float, wave: float):
        effs, total = [], 0.0
        for b in range(len(BYTES_EDGES) + 1):
            idx = _sample(np.flatnonzero(cols["bin"] == b))
            if not len(idx):
                effs.append(1.0)
                continue
            base = floor + cols["waves"][idx] * wave

            def score(c, idx=idx, base=base):
                pred = base[None] + np.maximum(cols["t_c"][idx][None] / ec, cols["t_m"][idx][None] / c[:, :1])
                return _loss(pred, cols["lat"][idx][None])
            e = _search(score, np.array([0.01]), np.array([1.5]), steps=12, passes=3)
            effs.append(float(e[0]))
            total += float(score(e[None])[0]) * len(idx)
        return effs, total

    grid = [(f, w) for f in np.linspace(2.0, 14.0, 25) for w in np.linspace(2e6, 60e6, 30)]
    floor, wave = grid[int(np.argmin([inner(f, w)[1] for f, w in grid]))]
    effs, _ = inner(floor, wave)
    return {"floor_us": round(float(floor), 3), "wave_flops": round(float(wave)), "bytes_edges": BYTES_EDGES,
            "memory_eff": [round(e, 4) for e in effs], "compute_eff": round(ec, 4)}


def fit_allreduce(systems: list[dict]) -> dict:
    lat = np.concatenate([s["allreduce"]["lat"] for s in systems])
    ring = np.concatenate([s["allreduce"]["ring_us"] for s in systems])
    e = _search(lambda c: _loss(c[:, :1] + ring[None] / c[:, 1:], lat[None]), np.array([0.5, 0.05]), np.array([50.0, 1.5]))
    return {"latency_us": round(float(e[0]), 3), "bus_eff": round(float(e[1]), 4)}


def fit(systems: list[dict]) -> dict:
    return {"fitted_to": [s["name"] for s in systems], "held_out": None,
            "gemm": {dt: fit_gemm(systems, dt) for dt in ("bf16", "fp8")},
            "decode_attention": fit_attention(systems), "allreduce": fit_allreduce(systems),
            "elementwise": {"floor_us": round(float(np.median([s["floor_us"] for s in systems])), 3)}}


def errors(params: dict, s: dict) -> dict:
    """Median |pred / measured − 1| of each family on one system's tables."""
    out = {}
    for dt in ("bf16", "fp8"):
        g, p = s["gemm"][dt], params["gemm"][dt]
        out[f"gemm_{dt}"] = float(np.median(np.abs(_gemm_pred(g, (p["tile_m"], p["tile_n"]), p) / g["lat"] - 1)))
    out["decode_attention"] = float(np.median(np.abs(_decode_pred(s["decode"], params["decode_attention"])
                                                     / s["decode"]["lat"] - 1)))
    a, p = s["allreduce"], params["allreduce"]
    out["allreduce"] = float(np.median(np.abs((p["latency_us"] + a["ring_us"] / p["bus_eff"]) / a["lat"] - 1)))
    return {k: round(v, 4) for k, v in out.items()}


def fit_all(out: Path = FIT_PATH, profiles: Path = PROFILES) -> dict:
    data = {name: load_system(name, profiles / name) for name in SYSTEMS}
    fits = {}
    for held in (None, *SYSTEMS):
        train = [d for n, d in data.items() if n != held]
        params = fit(train)
        params["residual"] = {d["name"]: errors(params, d) for d in train}
        if held:
            params["held_out"] = held
            params["held_out_error"] = errors(params, data[held])
        fits["all" if held is None else f"without-{held}"] = params
    doc = {
        "description": "Constants of the roofline fallback (speedplan.cost.roofline), fitted to measured kernel tables; "
                       "errors are median |predicted / measured - 1| over each system's tables (residual: systems fitted "
                       "to; held_out_error: the system left out).",
        "command": "python -m speedplan.cost.fit",
        "date": datetime.date.today().isoformat(),
        "fitted_to": {n: f"speedplan/data/profiles/{n} ({json.loads((profiles / n / 'meta.json').read_text()).get('origin_label', '')})"
                      for n in SYSTEMS},
        "fits": fits,
    }
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    out_default = shipped_default(FIT_PATH)  # an installed wheel's own file is not replaced
    ap.add_argument("--out", default=out_default, required=out_default is None,
                    help=f"the fit's JSON file (default, in a source checkout: {FIT_PATH.name}, the shipped one)")
    ap.add_argument("--profiles", default=str(PROFILES))
    args = ap.parse_args(argv)
    doc = fit_all(Path(args.out), Path(args.profiles))
    for name, f in doc["fits"].items():
        print(name, "residual", f["residual"], "held out", f.get("held_out_error"))


if __name__ == "__main__":
    main()
