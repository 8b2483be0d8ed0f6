"""Regret in stored validation runs with the pick read two ways: the point with the most predicted
tokens/s (validate's reading until 2026-12-07) and the point the planner recommends by its own
rule (`plan.pick.best_per_batch`: within 1% of the most, the fewest verified tokens, then the
fastest; `validate.run.picked_row`, validate's reading since). No runtime run: each run's stored
predictions and measurements (validation.csv) are re-read.

    python benchmarks/bench_planner_pick.py [REPORT_DIR ...]     # default: every reports/validation-cpu*

Prints, per run, the regret per batch size both ways and, where the picks differ, both picks with
their predicted and measured speedups.
"""

from __future__ import annotations

import sys
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.validate.reprice import load_validation
from speedplan.validate.run import picked_row

ROOT = Path(__file__).resolve().parent.parent


def regret_both_ways(table) -> list[tuple]:
    """Per batch: (batch, regret with the most predicted tokens/s, regret with the planner's pick, the
    first pick's row, the planner's row), regret against the best measured speedup at that batch."""
    out = []
    for batch, g in table.groupby("batch"):
        most = g.loc[g.pred_tokens_per_s.idxmax()]
        planner = g.iloc[picked_row(g.pred_tokens_per_s, g.verify_tokens)]
        best = g.meas_speedup.max()
        out.append((int(batch), 1 - most.meas_speedup / best, 1 - planner.meas_speedup / best, most, planner))
    return out


def _point(row) -> str:
    return (f"{row.mechanism} D={int(row.draft_len)} (pred {row.pred_speedup:.3f}x, "
            f"meas {row.meas_speedup:.3f}x)")


def main(folders: list[Path]) -> None:
    print("run                                 regret per batch: most predicted tokens/s -> the planner's pick")
    moved = []
    for folder in folders:
        try:
            table, _ = load_validation(folder)
        except SpeedplanInputError as exc:
            print(f"{folder.name:35s} skipped: {exc}")
            continue
        rows = regret_both_ways(table)
        print(f"{folder.name:35s} " + " ".join(f"B{b} {a:.1%}->{p:.1%}" for b, a, p, _, _ in rows))
        moved += [(folder.name, b, a, p, most, planner) for b, a, p, most, planner in rows
                  if (most.mechanism, most.draft_len) != (planner.mechanism, planner.draft_len)]
    print(f"\n{len(moved)} batch sizes where the two picks differ:")
    for name, b, a, p, most, planner in moved:
        print(f"  {name} B={b}: {_point(most)} -> {_point(planner)}; regret {a:.1%} -> {p:.1%}")


if __name__ == "__main__":
    args = [Path(a) for a in sys.argv[1:]] or sorted(p for p in (ROOT / "reports").glob("validation-cpu*") if p.is_dir())
    main(args)
