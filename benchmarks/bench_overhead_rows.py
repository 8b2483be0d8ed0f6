"""What calibrating the `speedplan-runtime` terms with overhead_ms rows (the step outside the
target's forward and the drafting) does to validation's step-time error, on stored runs: each
run's calibration refitted without and with them, its evaluation points priced both ways, and
the errors against the same measured step times (a paired comparison: `speedplan.validate.refit`).

    python benchmarks/bench_overhead_rows.py [REPORT_DIR ...]   # default: reports/validation-cpu-*

A run whose stored predictions this code does not rebuild (drafters or planner changed since)
is listed as skipped. Needs torch for runs that keep no drafter shapes (`.[runtime]`)."""

from __future__ import annotations

import sys
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.validate.refit import REPRODUCE_RTOL, has_overhead_rows, refit, reproduction_gap, step_errors
from speedplan.validate.reprice import load_validation

HOST = ("host_step_us", "host_seq_us", "host_spec_seq_us", "host_token_us")
# what a folder that is not a refittable run raises: SpeedplanInputError for a file, field, profile or grid
# point missing (the only one the 26 stored report folders raised, 2026-12-07: a profile folder kept in
# /tmp and the H200 folder, no validation.csv), ImportError without torch (runs before summary.json kept the
# drafters' shapes read them from the shipped weights). Anything else is a bug, and shows its traceback.
SKIPPED = (SpeedplanInputError, ImportError)


def main(folders: list[str]) -> None:
    folders = folders or sorted(str(p) for p in Path("reports").glob("validation-cpu-*") if (p / "summary.json").is_file())
    print(f"{'run':45s} {'rows':>4s}  step error without overhead_ms rows | with them        host_step/seq/spec_seq/token_us without -> with")
    print(f"{'':45s} {'':4s}  median   p90  signed                    | median   p90  signed")
    for folder in folders:
        name = Path(folder).name
        try:
            loaded = load_validation(folder)
            own = has_overhead_rows(loaded[1])
            runs = {own: refit(folder, own, loaded)}  # the run's own rows first: does this code price it as it did?
            gap = reproduction_gap(runs[own][0])
            if gap > REPRODUCE_RTOL:
                print(f"{name:45s} skipped: this code prices it {gap:.1%} away from its stored predictions")
                continue
            runs[not own] = refit(folder, not own, loaded)
            e = {flag: step_errors(merged, "refit_t_step") for flag, (merged, _) in runs.items()}
        except SKIPPED as exc:
            print(f"{name:45s} skipped: {type(exc).__name__}: {exc}")
            continue
        host = {flag: "/".join(f"{info['values'][t]:.0f}" for t in HOST) for flag, (_, info) in runs.items()}
        print(f"{name:45s} {runs[True][1]['rows']:4d}  {e[False]['median']:6.1%} {e[False]['p90']:6.1%} {e[False]['signed']:+6.1%}"
              f"                    | {e[True]['median']:6.1%} {e[True]['p90']:6.1%} {e[True]['signed']:+6.1%}"
              f"   {host[False]} -> {host[True]}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
