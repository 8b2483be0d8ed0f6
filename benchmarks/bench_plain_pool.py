"""Plain decoding's measured step time in stored validation runs, read two ways: the fastest of
its own rounds (how validate read it until 2026-12-07), and the fastest of as many timings as
it took, as read on average over its own rounds and the plain runs paired with the batch's
speculative points (`speedplan.validate.timing.plain_step_s`, how validate reads it since). No runtime
run: the stored timings (summary.json "timings") and predictions (validation.csv) are re-read.

    python benchmarks/bench_plain_pool.py [REPORT_DIR ...]     # default: every reports/validation-cpu*

Prints, per run, plain decoding's step-time error (predicted / measured - 1) at each batch size
both ways, and the run's step-time median / p90 over all its points with plain decoding's rows
read each way (the speculative points' rows are the same both ways).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from speedplan.errors import SpeedplanInputError
from speedplan.validate.reprice import load_validation
from speedplan.validate.timing import plain_step_s

ROOT = Path(__file__).resolve().parent.parent


def plain_both_ways(folder: Path) -> dict | None:
    """{batch: (own fastest, pooled)} in seconds and the run's table, or None where the run kept no paired timings."""
    table, summary = load_validation(folder)
    timings = summary.get("timings") or []
    if not any(t.get("plain_s") for t in timings):
        return None
    paired = {tuple(t["point"]): t["plain_s"] for t in timings if t["point"][2] > 0}
    out = {int(t["point"][1]): (min(t["step_s"]), plain_step_s(t["step_s"], paired, t["point"][1]))
           for t in timings if t["point"][2] == 0}
    return {"plain": out, "table": table}


def main(folders: list[Path]) -> None:
    all_own, all_pool, worse = [], [], []
    print("run                                 plain step error per batch: own rounds' fastest -> pooled (pairs)"
          "   | run step median / p90: own -> pooled")
    for folder in folders:
        try:
            got = plain_both_ways(folder)
        except SpeedplanInputError as exc:
            print(f"{folder.name:35s} skipped: {exc}")
            continue
        if got is None:
            print(f"{folder.name:35s} skipped: no paired plain timings kept")
            continue
        table = got["table"]
        err = {}
        for way, i in (("own", 0), ("pool", 1)):
            meas = table.meas_t_step.to_numpy(dtype=float).copy()
            for j in np.flatnonzero(table.draft_len.to_numpy() == 0):
                meas[j] = got["plain"][int(table.batch.iloc[j])][i]
            err[way] = np.asarray(table.pred_t_step, float) / meas - 1
        plain = (table.draft_len == 0).to_numpy()
        all_own += list(err["own"][plain])
        all_pool += list(err["pool"][plain])
        worse += [f"{folder.name} B{int(b)} {o:+.1%}->{p:+.1%}" for b, o, p in
                  zip(table.batch[plain], err["own"][plain], err["pool"][plain]) if abs(p) > abs(o) + 0.02]
        per_batch = " ".join(f"B{int(b)} {o:+.1%}->{p:+.1%}" for b, o, p in
                             zip(table.batch[plain], err["own"][plain], err["pool"][plain]))
        stats = {w: (np.median(np.abs(e)), np.quantile(np.abs(e), 0.9)) for w, e in err.items()}
        print(f"{folder.name:35s} {per_batch}   | {stats['own'][0]:.1%} / {stats['own'][1]:.1%} -> "
              f"{stats['pool'][0]:.1%} / {stats['pool'][1]:.1%}")
    if all_own:
        signed_own, signed_pool = np.array(all_own), np.array(all_pool)
        own, pool = np.abs(signed_own), np.abs(signed_pool)
        print(f"plain decoding over {len(own)} points: |error| median {np.median(own):.1%} -> {np.median(pool):.1%}, "
              f"p90 {np.quantile(own, 0.9):.1%} -> {np.quantile(pool, 0.9):.1%}, beyond 12%: {(own > 0.12).sum()} -> "
              f"{(pool > 0.12).sum()}; signed median {np.median(signed_own):+.1%} -> {np.median(signed_pool):+.1%}; "
              f"better by over 2 points at {int((pool < own - 0.02).sum())}, worse at {len(worse)}:")
        for line in worse:
            print(f"  {line}")


if __name__ == "__main__":
    args = [Path(a) for a in sys.argv[1:]] or sorted(p for p in (ROOT / "reports").glob("validation-cpu*") if p.is_dir())
    main(args)
