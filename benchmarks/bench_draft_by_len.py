"""How validation prices the drafting at each draft length D, on stored runs: the signed error of the
predicted drafting time per step (`pred_t_draft / meas_t_draft - 1`, median over the batch sizes) per
drafting mechanism and D. Calibration times every drafter at one draft length (`calibration_draft_len`,
7 in the full grid), so its fit cannot tell a drafter's cost per drafting step (the first pass,
launches) from its cost per drafted token; a slope in D here is that.

    python benchmarks/bench_draft_by_len.py [REPORT_DIR ...]   # default: reports/validation-cpu-*

Prints one line per run and mechanism (D = 1 .. 7), then per mechanism the median over the runs at each
D. A folder without per-part timings (runs before 2026-12-02) is listed as skipped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

DRAFTING = ("eagle", "eagle-tree", "draft-model:smollm2-student")
NEEDED = ("mechanism", "batch", "draft_len", "pred_t_draft", "meas_t_draft")


def draft_errors(table: pd.DataFrame) -> pd.DataFrame:
    """Signed drafting error, median over batch sizes: rows mechanism, columns D (fractions)."""
    spec = table[table["mechanism"].isin(DRAFTING) & (table["draft_len"] > 0) & (table["meas_t_draft"] > 0)]
    spec = spec.assign(error=spec["pred_t_draft"] / spec["meas_t_draft"] - 1.0)
    return spec.pivot_table(index="mechanism", columns="draft_len", values="error", aggfunc="median")


def main(folders: list[str]) -> None:
    folders = folders or sorted(str(p) for p in Path("reports").glob("validation-cpu-*") if (p / "validation.csv").is_file())
    per_run = []
    print(f"{'run':45s} {'mechanism':28s} drafting error, signed median over B, at D = 1 .. 7   (calibrated at D)")
    for folder in folders:
        name = Path(folder).name
        table = pd.read_csv(Path(folder) / "validation.csv")
        missing = [c for c in NEEDED if c not in table.columns]
        if missing:
            print(f"{name:45s} skipped: no {missing[0]} column")
            continue
        summary = json.loads((Path(folder) / "summary.json").read_text())
        cal_d = (summary.get("grid") or {}).get("calibration_draft_len", "?")
        errors = draft_errors(table)
        per_run.append(errors)
        for mech, row in errors.iterrows():
            cells = " ".join(f"{row[d]:+6.1%}" for d in row.index)
            print(f"{name:45s} {mech:28s} {cells}   ({cal_d})")
    if per_run:
        print("\nmedian over the runs:")
        stacked = pd.concat(per_run, keys=range(len(per_run)))
        for mech, group in stacked.groupby(level=1):
            med = group.median()
            print(f"{'':45s} {mech:28s} " + " ".join(f"{med[d]:+6.1%}" for d in med.index) + f"   ({len(group)} runs)")


if __name__ == "__main__":
    main(sys.argv[1:])
