"""Which MoE routing prices the engine rows better: balanced tables converted to random routing
(what the shipped profiles do) or AIConfigurator's skewed power-law routing, used as measured?

    pip install 'speedplan[aic]'        # aiconfigurator-core: the power-law tables are not shipped
    python benchmarks/bench_moe_routing.py

For each routing it imports the H100, H200 and B200 tables (`speedplan profile import-aic
--moe-routing R`, vLLM 0.24 kernels, into a temporary folder), points the preset names at them
for this process only, and prints:

1. the GEMM time of one forward pass (MoE experts included) of the two Qwen3-MoE presets at
   1..512 sequences of one token;
2. the SGLang engine profile fitted to its 20 rows of ../shared/cases (fit_engine_profiles.py):
   |residual| and leave-one-out error;
3. held-out batch sizes (bench_calibration.py): AngelSlim #163 and the SGLang #22246 grid,
   fitted on three batch sizes, and the grid's B = 4 row of each draft length.

AIConfigurator's own estimates route Qwen3-MoE and Mixtral with power_law_1.2 and DeepSeek
with power_law_1.01 (aiconfigurator_core/sdk/models/moe.py and deepseek.py, 0.12.0); balanced
rows are what it measures as the even case. Nothing here changes the shipped profiles.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_calibration  # noqa: E402
import fit_engine_profiles  # noqa: E402
from engine_cases import load_cases  # noqa: E402

import speedplan.cost.ops as ops  # noqa: E402
from speedplan.cost.forward import forward_cost  # noqa: E402
from speedplan.errors import SpeedplanInputError  # noqa: E402
from speedplan.profile.import_aic import import_aic  # noqa: E402
from speedplan.specs.model import get_model  # noqa: E402

SYSTEMS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm", "b200": "b200_sxm"}
ROUTINGS = ("balanced", "power_law_1.01", "power_law_1.2")
TOKENS = np.array([1, 2, 4, 8, 16, 32, 64, 128, 512], dtype=float)
LAYERS = (("qwen3-30b-a3b", 4), ("qwen3-235b-a22b", 8))


_SHIPPED = ops.shipped_profile  # the package's own lookup of a preset's folder


def use_profiles(folders: dict[str, Path]) -> None:
    """Make the preset names resolve to `folders` in this process (load_cost_model asks
    ops.shipped_profile for a preset's folder); the shipped folders for the others."""
    ops.shipped_profile = lambda name: folders.get(name.strip().lower()) or _SHIPPED(name)


def forward_gemm_us(model: str, tp: int) -> np.ndarray:
    """GEMM time of one forward pass of T sequences × 1 token on h100-sxm (µs), MoE experts
    included: what the routing changes."""
    cost, m = ops.load_cost_model("h100-sxm"), get_model(model)
    return forward_cost(cost, m, TOKENS, 1, 1024, tp=tp).gemm_s * 1e6


def report() -> dict:
    cases, _ = load_cases()
    profile, _ = fit_engine_profiles.fit("sglang", cases)
    f = profile.fit
    out = {"fit": (f["median_abs_residual"], f["max_abs_residual"], f["loo_median_error"], f["loo_max_error"])}
    batches = [r for r in bench_calibration.held_out_batches() if r["profile"].startswith("fitted")]
    out["angelslim"] = (batches[0]["median error"], batches[0]["max error"]) if batches else None
    fitted = [r for r in bench_calibration.held_out_grid() if r["profile"].startswith("fitted")]
    grid = np.concatenate([r["errors"] for r in fitted])
    out["grid"] = (float(np.median(grid)), float(grid.max()))
    out["grid_b4"] = [float(r["errors"][r["test B"].index(4)]) for r in fitted]  # one per draft length
    out["layers"] = {model: forward_gemm_us(model, tp) for model, tp in LAYERS}
    return out


def main() -> int:
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:  # every import first: without aiconfigurator-core this is one line and exit 2
            folders = {routing: {name: import_aic(system, "vllm", None, Path(tmp) / routing / name, moe_routing=routing)
                                 for name, system in SYSTEMS.items()} if routing != "balanced" else {}
                       for routing in ROUTINGS}
        except SpeedplanInputError as exc:
            print(f"bench_moe_routing: {exc}", file=sys.stderr)
            return 2
        for routing in ROUTINGS:
            use_profiles(folders[routing])
            results[routing] = report()
    print("1. GEMM time of one forward pass (every layer, MoE experts included) of T sequences x 1 token, "
          "context 1024, h100-sxm, µs, by T")
    for model, tp in LAYERS:
        print(f"  {model} TP{tp}")
        print("    " + f"{'routing':16s}" + "".join(f"{int(t):>9d}" for t in TOKENS))
        for routing, r in results.items():
            print("    " + f"{routing:16s}" + "".join(f"{v:9.0f}" for v in r["layers"][model]))
    print("\n2. SGLang profile fitted to its rows of engine_measurements.csv: |residual| median / max, "
          "leave-one-out median / max")
    for routing, r in results.items():
        print(f"  {routing:16s} " + " / ".join(f"{v:.1%}" for v in r["fit"]))
    print("\n3. held-out batch sizes, fitted on 3 (median / max)")
    for routing, r in results.items():
        a = " / ".join(f"{v:.1%}" for v in r["angelslim"]) if r["angelslim"] else "-"
        g = " / ".join(f"{v:.1%}" for v in r["grid"])
        b4 = " ".join(f"{v:.1%}" for v in r["grid_b4"])
        print(f"  {routing:16s} AngelSlim #163 {a}   SGLang #22246 grid (24 rows) {g}; its B = 4 rows, D = 1..6: {b4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
