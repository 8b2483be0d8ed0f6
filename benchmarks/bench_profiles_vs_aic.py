"""How close `speedplan predict ops` comes to AIConfigurator's measured kernel tables.

    pip install 'speedplan[aic]'   # aiconfigurator-core (the measured tables) and pyarrow
    python benchmarks/bench_profiles_vs_aic.py [--points 2000] [--seed 0]

For each of h100-sxm, h200-sxm and b200 it draws random rows of the package's own vLLM tables
(GEMM: bf16 and per-tensor fp8, every (N, K) site, pooled and per dtype; decode attention:
bf16 and fp8 KV caches,
the head shapes the shipped profile holds: the model presets' at its import, on one GPU at TP 1-8), runs them through `predict_ops` (what
`speedplan predict ops` calls) and prints the median and p90 of |predicted / measured − 1|
per family for:

- shipped profile: the profile shipped under speedplan/data/profiles (most drawn points are
  in it, so this mostly checks the conversion; `exact` is the share answered as measured);
- points held out: the same profile with the drawn points removed from its tables first, so
  each is interpolated from its measured neighbours (the lookup's own accuracy);
- fallback, system left out: the roofline fallback alone with the fit that never saw this
  system (`without-<hw>` in specs/presets/fallback/roofline-fit.json);
- datasheet roofline: the plain roofline (no fit: the preset's floor and peak fractions).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speedplan.cost.ops import CostModel, load_cost_model  # noqa: E402
from speedplan.cost.predict import predict_ops  # noqa: E402
from speedplan.profile.aic import AicSource  # noqa: E402
from speedplan.profile.load import build_profile  # noqa: E402
from speedplan.specs.hardware import get_hardware  # noqa: E402

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}
DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
GEMM_KEY = ("m", "n", "k", "dtype")
ATTN_KEY = ("batch", "q_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "mask", "dtype")


def draw(src: AicSource, system: str, points: int, rng, heads: set) -> dict[str, list[dict]]:
    """Random measured rows of the system's vLLM GEMM and decode-attention tables, as ops.csv
    rows with the measured latency (µs) beside them; attention at the head shapes in `heads`
    (the shipped profile's own: presets added after its import are not in it, docs/profiles.md)."""
    version = src.default_version(system, "vllm")
    g = src.read(src.table_path(system, "gemm", "vllm", version, "gemm_perf"))
    g = g[g["gemm_dtype"].isin(list(DTYPES))].reset_index(drop=True)
    a = src.read(src.table_path(system, "attention", "vllm", version, "generation_attention_perf"))
    keep = (a["window_size"] == 0) & (a["beam_width"] == 1) & (a["attn_dtype"] == "bfloat16") & a["kv_cache_dtype"].isin(
        list(DTYPES))
    keep &= np.array([h in heads for h in zip(a["num_heads"], a["num_key_value_heads"], a["head_dim"])])
    a = a[keep].reset_index(drop=True)
    gi = rng.choice(len(g), min(points, len(g)), replace=False)
    ai = rng.choice(len(a), min(points, len(a)), replace=False)
    gemm = [{"op": "gemm", "m": str(int(r.m)), "n": str(int(r.n)), "k": str(int(r.k)), "dtype": DTYPES[r.gemm_dtype],
             "measured_us": r.latency * 1e3} for r in g.iloc[gi].itertuples()]
    by_dtype = {f"gemm {dt}": [r for r in gemm if r["dtype"] == dt] for dt in ("bf16", "fp8")}
    attn = [{"op": "attention", "batch": str(int(r.batch_size)), "q_len": "1", "kv_len": str(int(r.isl + r.step)),
             "num_heads": str(int(r.num_heads)), "num_kv_heads": str(int(r.num_key_value_heads)),
             "head_dim": str(int(r.head_dim)), "mask": "causal", "dtype": DTYPES[r.kv_cache_dtype],
             "measured_us": r.latency * 1e3} for r in a.iloc[ai].itertuples()]
    return {"gemm": gemm, **by_dtype, "decode attention": attn}


def without(profile, drawn: dict[str, list[dict]]):
    """The profile with every drawn point removed from its tables (a new Profile)."""
    tables = dict(profile.tables)
    for family, table, key in (("gemm", "gemm", GEMM_KEY), ("decode attention", "attention", ATTN_KEY)):
        t = tables[table]
        drop = {tuple(str(r[c]) for c in key) for r in drawn[family]}
        cols = [t[c] for c in key]
        as_text = [np.char.mod("%d", c.astype(np.int64)) if c.dtype != object else c.astype(str) for c in cols]
        mask = np.array([tuple(row) not in drop for row in zip(*as_text)])
        tables[table] = {c: v[mask] for c, v in t.items()}
    return build_profile(profile.path, profile.meta, tables)


def errors(cost: CostModel, rows: list[dict]) -> tuple[np.ndarray, float]:
    out = predict_ops(cost, [{k: v for k, v in r.items() if k != "measured_us"} for r in rows])
    pred = np.array([float(r["latency_us"]) for r in out])
    meas = np.array([r["measured_us"] for r in rows])
    return np.abs(pred / meas - 1), float(np.mean(np.isclose(pred, meas, rtol=1e-4)))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, default=2000, help="random measured rows per system and family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--brief", action="store_true", help="GEMM pooled only (not also per dtype)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    src = AicSource()
    print(f"aiconfigurator-core {src.version}; {args.points} random measured points per system and family, seed {args.seed}")
    print(f"{'hardware':9s} {'family':17s} {'priced by':28s} {'points':>6s} {'median':>7s} {'p90':>7s} {'exact':>6s}")
    for system, name in SYSTEMS.items():
        t0 = time.perf_counter()
        shipped = load_cost_model(name)
        heads = {tuple(int(x) for x in h) for h in shipped.profile.meta["heads"]}  # (heads, kv heads, head_dim)
        drawn = draw(src, system, args.points, rng, heads)
        held = without(shipped.profile, drawn)
        hw = get_hardware(name)
        models = {"shipped profile": shipped, "points held out": CostModel(held.hardware, held),
                  "fallback, system left out": CostModel(replace(hw, roofline_fit=f"without-{name}")),
                  "datasheet roofline": CostModel(replace(hw, roofline_fit=""))}
        for family, rows in drawn.items():
            if family.startswith("gemm ") and args.brief:
                continue
            for label, cost in models.items():
                e, exact = errors(cost, rows)
                print(f"{name:9s} {family:17s} {label:28s} {len(e):6d} {np.median(e):7.1%} {np.percentile(e, 90):7.1%} "
                      f"{exact:6.0%}")
        print(f"{name:9s} ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    from speedplan.errors import SpeedplanInputError

    try:
        main()
    except SpeedplanInputError as exc:  # aiconfigurator-core missing: one line, exit 2, like the CLI
        print(f"bench_profiles_vs_aic: {exc}", file=sys.stderr)
        sys.exit(2)
