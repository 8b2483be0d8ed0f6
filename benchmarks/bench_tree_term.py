"""What freeing `tree_level_us` (µs of host work per level of a dynamic tree's drafting: its top-k
and the bookkeeping that grows the tree) does to validation's step-time error, on stored runs: each run's
calibration refitted with the terms its own calibration could free, then with this one too, its
evaluation points priced both ways against the same measured step times (a paired comparison,
`speedplan.validate.refit`).

    python benchmarks/bench_tree_term.py [REPORT_DIR ...]   # default: reports/validation-cpu-*

Prints per run the step-time median / p90 / signed median, the EAGLE chain's and the EAGLE tree's
signed medians, both ways, and the term's fitted value. A run whose own calibration fitted the term
(forward selection freed it; runs since 2026-12-07 23:29, marked +) is refitted without it for the
left-hand figures, its own fit on the right. Both fits take overhead_ms rows; a run
whose own calibration had none (marked *) gets them as its steps less their parts
(`validate.refit.calibration_rows`), so its first figures are not its stored ones. A run this code
does not rebuild as it ran (drafters or planner changed since) is listed as skipped."""

from __future__ import annotations

import sys
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.validate.refit import REPRODUCE_RTOL, has_overhead_rows, refit, reproduction_gap
from speedplan.validate.reprice import load_validation

TERM = "tree_level_us"
SKIPPED = (SpeedplanInputError, ImportError)  # a folder that is not a refittable run (bench_overhead_rows.py)


def errors(merged) -> str:
    e = merged["refit_t_step"] / merged["meas_t_step"] - 1
    by = {m: e[merged["mechanism"] == m].median() for m in ("eagle", "eagle-tree")}
    return (f"{e.abs().median():6.1%} {e.abs().quantile(0.9):6.1%} {e.median():+6.1%}   "
            f"{by['eagle']:+6.1%} {by['eagle-tree']:+6.1%}")


def main(folders: list[str]) -> None:
    folders = folders or sorted(str(p) for p in Path("reports").glob("validation-cpu-*") if (p / "summary.json").is_file())
    print(f"{'run':45s} step median / p90 / signed, EAGLE / tree signed: without {TERM} | with it      fitted")
    for folder in folders:
        name = Path(folder).name
        try:
            loaded = load_validation(folder)
            if "eagle-tree" not in set(loaded[0]["mechanism"]):
                print(f"{name:45s} skipped: no EAGLE tree")
                continue
            rows = has_overhead_rows(loaded[1])
            gap = reproduction_gap(refit(folder, rows, loaded)[0])  # as it ran: does this code price it so?
            if gap > REPRODUCE_RTOL:
                print(f"{name:45s} skipped: this code prices it {gap:.1%} away from its stored predictions")
                continue
            freed = TERM in (((loaded[1].get("engine") or {}).get("fit") or {}).get("fitted") or ())
            without, _ = refit(folder, True, loaded, without_terms=(TERM,))
            name += "" if rows else " *"
            name += " +" if freed else ""
            more, info = refit(folder, True, loaded, extra_terms=(TERM,))
        except SKIPPED as e:
            print(f"{name:45s} skipped: {e}")
            continue
        print(f"{name:45s} {errors(without)} | {errors(more)}   {info['values'][TERM]:.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
