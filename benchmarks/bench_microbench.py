"""Benchmarks for issue 3 (run under `flock /tmp/speedplan-cpu.lock`; not part of the tests).

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_microbench.py [--profile speedplan/data/profiles/cpu-local] [--rerun]

Reports, as JSON: the leave-one-out error of the profile lookup (targets: median <= 3%,
p90 <= 10%), the time of 10^4-point lookups per op family (target: well under 0.3 s for all),
and with --rerun the wall time of a fresh `speedplan bench --device cpu --grid quick` (target:
under 3 minutes on 2 cores) and its own leave-one-out error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from speedplan.profile.load import load_profile  # noqa: E402
from speedplan.profile.tools import leave_one_out  # noqa: E402


def lookup_seconds(path: Path, n: int = 10_000) -> dict:
    p = load_profile(path)
    rng = np.random.default_rng(0)
    dt = p.hardware.default_dtype
    t0 = time.perf_counter()
    p.gemm_latency_us(rng.integers(1, 512, n).astype(float), rng.choice([576, 960, 3072, 49152], n), 576, dt)
    t1 = time.perf_counter()
    p.attention_latency_us(rng.integers(1, 16, n), rng.integers(1, 9, n), rng.integers(64, 1024, n), 9, 3, 64,
                           rng.choice(["causal", "tree"], n), dt)
    t2 = time.perf_counter()
    p.elementwise_latency_us(rng.integers(1000, 10**7, n).astype(float), dt)
    t3 = time.perf_counter()
    return {"gemm_s": round(t1 - t0, 4), "attention_s": round(t2 - t1, 4), "elementwise_s": round(t3 - t2, 4),
            "total_s": round(t3 - t0, 4), "points": n}


def summary(check: dict) -> dict:
    return {"median_error": round(check["median_error"], 4), "p90_error": round(check["p90_error"], 4),
            "points": check["points"],
            "families": {f: {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
                         for f, r in check["families"].items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", type=Path, default=ROOT / "speedplan" / "data" / "profiles" / "cpu-local")
    ap.add_argument("--rerun", action="store_true", help="also time a fresh quick grid")
    args = ap.parse_args()
    out = {"profile": str(args.profile), "leave_one_out": summary(leave_one_out(args.profile)),
           "lookup_10k": lookup_seconds(args.profile)}
    if args.rerun:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "speedplan.cli", "bench", "--device", "cpu", "--grid", "quick",
                            "--out", f"{tmp}/p", "--no-progress"], cwd=ROOT, check=True)
            out["quick_grid_wall_s"] = round(time.perf_counter() - t0, 1)
            out["quick_grid_leave_one_out"] = summary(leave_one_out(Path(tmp) / "p"))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
