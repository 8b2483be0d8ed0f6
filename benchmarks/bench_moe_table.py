"""The measured fused-MoE tables: how well they interpolate, and what they change in a forward.

    python benchmarks/bench_moe_table.py

1. Leave-one-out over the shipped `moe.csv` of h100-sxm, h200-sxm and b200 (balanced routing):
   each interior token count of each series is predicted from its two neighbours (log latency
   linear in log tokens, as `speedplan.profile.moe` answers) and compared with its measurement.
2. One MoE layer of each preset MoE model the table covers, at the TP it is served with in
   shared/cases, on h100-sxm: the price the forward op list now uses (measured fused kernel,
   less the expert reads balanced routing adds) against the two grouped GEMMs it replaced, at
   1 to 512 tokens (a decode step of B sequences × (1 + D) tokens).
Prints the figures; docs/profiles.md quotes a run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speedplan.cost.forward import forward_cost  # noqa: E402
from speedplan.cost.ops import PROFILE_DIR, CostModel, load_cost_model  # noqa: E402
from speedplan.profile.load import build_profile  # noqa: E402
from speedplan.specs.model import get_model  # noqa: E402

SYSTEMS = ("h100-sxm", "h200-sxm", "b200")
LAYERS = (("qwen3-30b-a3b", 4), ("qwen3-30b-a3b", 2), ("qwen3-235b-a22b", 8), ("mixtral-8x7b", 2))
TOKENS = np.array([1.0, 2, 4, 8, 16, 32, 64, 128, 512])


def leave_one_out(system: str) -> np.ndarray:
    import pandas as pd

    t = pd.read_csv(PROFILE_DIR / system / "moe.csv")
    t = t[t.distribution == "balanced"]
    errors = []
    for _, s in t.groupby(["hidden", "inter", "experts", "topk", "tp", "ep", "dtype"]):
        s = s.sort_values("tokens")
        x, y = np.log(s.tokens.to_numpy(float)), np.log(s.latency_us.to_numpy(float))
        for i in range(1, len(x) - 1):
            w = (x[i] - x[i - 1]) / (x[i + 1] - x[i - 1])
            errors.append(abs(np.exp(y[i - 1] + w * (y[i + 1] - y[i - 1]) - y[i]) - 1))
    return np.array(errors)


def layer_prices(cost: CostModel, name: str, tp: int) -> tuple[np.ndarray, np.ndarray]:
    """(priced with the table, priced as grouped GEMMs) of one MoE layer, µs, at TOKENS."""
    p = cost.profile
    bare = CostModel(cost.hardware, build_profile(p.path, p.meta, {k: v for k, v in p.tables.items() if k != "moe"}))
    m = get_model(name)
    with_table = forward_cost(cost, m, TOKENS, 1, 1024, tp=tp)
    without = forward_cost(bare, m, TOKENS, 1, 1024, tp=tp)
    e = m.moe
    touched = e.num_experts * (1 - (1 - e.top_k / e.num_experts) ** TOKENS)
    rows = TOKENS * e.top_k / touched
    gemms = (bare.gemm(rows, -(-2 * e.expert_intermediate // tp) * touched, m.hidden, m.dtype).latency_us
             + bare.gemm(rows, m.hidden * touched, -(-e.expert_intermediate // tp), m.dtype).latency_us)
    return (with_table.gemm_s - without.gemm_s) * 1e6 / m.moe_layers + gemms, gemms


def main() -> None:
    print("1. leave-one-out interpolation of the shipped fused-MoE tables (balanced routing)")
    for system in SYSTEMS:
        e = leave_one_out(system)
        print(f"  {system:9s} {len(e):4d} interior points: median {np.median(e):.1%}, p90 {np.percentile(e, 90):.1%}, "
              f"max {e.max():.1%}")
    cost = load_cost_model("h100-sxm")
    print("\n2. one MoE layer on h100-sxm, µs: table price / grouped GEMMs it replaces")
    print("  " + " " * 22 + "".join(f"{int(t):>14d}" for t in TOKENS))
    for name, tp in LAYERS:
        table, gemms = layer_prices(cost, name, tp)
        cells = "".join(f"{a:7.1f}/{b:6.1f}" for a, b in zip(table, gemms))
        print(f"  {name + ' TP' + str(tp):22s}{cells}")


if __name__ == "__main__":
    main()
