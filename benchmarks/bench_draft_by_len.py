"""How validation prices the drafting at each draft length D, on stored runs: the signed error of the
predicted drafting time per step (`pred_t_draft / meas_t_draft - 1`, median over the batch sizes) per
drafting mechanism and D. Calibration times every drafter at one draft length (`calibration_draft_len`,
7 in the full grid), so its fit cannot tell a drafter's cost per drafting step (the first pass,
launches) from its cost per drafted token; a slope in D here is that.

    python benchmarks/bench_draft_by_len.py [REPORT_DIR ...]   # default: reports/validation-cpu-*
    python benchmarks/bench_draft_by_len.py --lines REPORT_DIR ...

Prints one line per run and mechanism (D = 1 .. 7), then per mechanism the median over the runs at each
D. A folder without per-part timings (runs before 2026-12-02) is listed as skipped. With --lines, per
run, mechanism and batch size instead: the least-squares line of the drafting time per step in D, ms,
measured (intercept + slope·D) against predicted: a fixed cost per step the model lacks shows as a
measured intercept above the predicted one with a measured slope below."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from speedplan.errors import SpeedplanInputError
from speedplan.validate.reprice import load_validation

DRAFTING = ("eagle", "eagle-tree", "draft-model:smollm2-student")
NEEDED = ("pred_t_draft", "meas_t_draft")  # beside what `load_validation` checks


def load(folder: str) -> tuple[pd.DataFrame, dict]:
    """The run's table and summary (`reprice.load_validation`), with the drafting columns this reads;
    else a SpeedplanInputError naming what is missing."""
    table, summary = load_validation(folder)
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise SpeedplanInputError(f"no {missing[0]} column")
    return table, summary


def draft_errors(table: pd.DataFrame) -> pd.DataFrame:
    """Signed drafting error, median over batch sizes: rows mechanism, columns D (fractions)."""
    spec = table[table["mechanism"].isin(DRAFTING) & (table["draft_len"] > 0) & (table["meas_t_draft"] > 0)]
    spec = spec.assign(error=spec["pred_t_draft"] / spec["meas_t_draft"] - 1.0)
    return spec.pivot_table(index="mechanism", columns="draft_len", values="error", aggfunc="median")


def draft_lines(table: pd.DataFrame) -> list[tuple]:
    """(mechanism, batch, measured (intercept, slope), predicted (intercept, slope)) in ms of drafting
    per step against D, least squares over the run's draft lengths."""
    out = []
    spec = table[table["mechanism"].isin(DRAFTING) & (table["draft_len"] > 0)]
    for (mech, batch), g in spec.groupby(["mechanism", "batch"]):
        if g["draft_len"].nunique() < 2:
            continue
        lines = [np.polyfit(g["draft_len"], g[col] * 1e3, 1)[::-1] for col in ("meas_t_draft", "pred_t_draft")]
        out.append((mech, int(batch), tuple(lines[0]), tuple(lines[1])))
    return out


def print_lines(folders: list[str]) -> None:
    print(f"{'run':45s} {'mechanism':28s} {'B':>3s}  drafting per step, ms: measured a + b·D | predicted")
    for folder in folders:
        try:
            table, _ = load(folder)
        except SpeedplanInputError as e:
            print(f"{Path(folder).name:45s} skipped: {e}")
            continue
        for mech, batch, (ma, mb), (pa, pb) in draft_lines(table):
            print(f"{Path(folder).name:45s} {mech:28s} {batch:3d}  {ma:6.2f} + {mb:5.2f}·D | {pa:6.2f} + {pb:5.2f}·D")


def main(folders: list[str]) -> None:
    if folders[:1] == ["--lines"]:
        print_lines(folders[1:])
        return
    folders = folders or sorted(str(p) for p in Path("reports").glob("validation-cpu-*") if (p / "validation.csv").is_file())
    per_run = []
    print(f"{'run':45s} {'mechanism':28s} drafting error, signed median over B, at D = 1 .. 7   (calibrated at D)")
    for folder in folders:
        name = Path(folder).name
        try:
            table, summary = load(folder)
        except SpeedplanInputError as e:
            print(f"{name:45s} skipped: {e}")
            continue
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
