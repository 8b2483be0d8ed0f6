"""How far `speedplan calibrate --fit-acceptance` recovers an acceptance it was not given.

    python benchmarks/bench_fit_acceptance.py

Rows of a known engine (the vllm profile with host work 800 µs a step and 60 µs a sequence and
50 launches a draft forward; Llama-3.1-8B on h100-sxm), tokens/s at B 1, 4, 16, 64 x D 0, 1, 3, 5
with no acceptance length, at two acceptances (i.i.d. 0.7; p_1 0.9 decaying x 0.8 a position),
each with five draws of uniform ±2% noise, calibrated with --fit-acceptance from the vllm profile:
per draw the fitted AL at D = 5, the range the rows fit within their scatter, whether the line
calls it loose, and the seconds the calibration took.

Then real rows: vLLM PR #32628's EAGLE-3 sweep of gpt-oss-120b (shared/cases; K = 3..8 at
concurrency 1, 2, 4, 8, tokens/s, no GPU stated), its per-position acceptance removed, calibrated
from the shipped vllm profile under each GPU assumed: the fitted AL against the measured one per
K, the range printed, the tokens/s residual, and the K picked per batch against the measured best.
docs/engine.md quotes a run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from speedplan.engine.calibration_acceptance import chain_al  # noqa: E402
from speedplan.engine.run_calibration import calibrate_rows  # noqa: E402
from tests.test_review_stop56 import _throughput_rows  # noqa: E402

TRUTHS = ((0.7, 1.0), (0.9, 0.8))
DRAWS = 5


def main() -> None:
    held = loose = 0
    for truth in TRUTHS:
        rows = _throughput_rows(truth)
        true_al = float(chain_al(*truth, 5))
        for seed in range(DRAWS):
            rng = np.random.default_rng(seed)
            noisy = [{**r, "tokens_per_s": r["tokens_per_s"] * (1 + rng.uniform(-0.02, 0.02))} for r in rows]
            t0 = time.perf_counter()
            result = calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "vllm", noisy, fit_acceptance=True)
            seconds = time.perf_counter() - t0
            note = next(n for n in result.notes if n and n.startswith("acceptance fitted"))
            fitted = float(chain_al(*result.acceptance_shapes["eagle3"], 5))
            low, high = (float(x) for x in note.split("for AL ")[1].split(" at D")[0].split("-"))
            inside, called = low - 5e-3 <= true_al <= high + 5e-3, "do not pin it" in note
            held, loose = held + inside, loose + called
            print(f"truth p_1 {truth[0]} x {truth[1]} (AL {true_al:.2f} at D = 5), draw {seed}: fitted AL {fitted:.2f}, "
                  f"rows fit {low:.2f}-{high:.2f} ({'holds' if inside else 'misses'} the truth)"
                  f"{', called loose' if called else ''}; {seconds:.1f} s")
    n = len(TRUTHS) * DRAWS
    print(f"{held} of {n} ranges hold the truth; {loose} of {n} called loose")
    real_rows()


def real_rows() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_engine_sweeps import SOURCE, pairs_for, sweep_rows

    from speedplan.engine.calibrate import calibrate, predict, price
    from speedplan.engine.calibration_acceptance import fit_rates, with_fitted
    from speedplan.engine.profile import get_engine

    rows = sweep_rows()
    measured = rows.groupby("draft_len").acceptance_length.first()
    ks = np.array(sorted(measured.index))
    print(f"\n{SOURCE}: measured AL at K = {', '.join(map(str, ks))}: "
          + " ".join(f"{a:.2f}" for a in measured.loc[ks]))
    for hardware in ("h100-sxm", "h200-sxm", "b200"):
        pairs = pairs_for(rows, hardware)
        unmeasured = {"eagle3": list(range(len(pairs)))}
        fit = fit_rates(get_engine("vllm"), pairs, unmeasured)
        al = chain_al(*fit.shapes["eagle3"], ks)
        err = np.abs(al / measured.loc[ks].to_numpy() - 1)
        d, low, high = fit.intervals["eagle3"]
        fitted_rows = with_fitted([m for m, _ in pairs], unmeasured, fit.shapes)
        setting = pairs[0][1]
        profile = calibrate(get_engine("vllm"), [(m, setting) for m in fitted_rows], name="fitted",
                            spent=fit.parameters).profile
        pred = predict(profile.values(), price([(m, setting) for m in fitted_rows], profile.spec_max_running))
        table = rows.assign(pred=pred)
        picks = []
        for b, g in table.groupby("batch"):
            k = int(g.loc[g.pred.idxmax(), "draft_len"])
            regret = 1 - float(g[g.draft_len == k].tokens_per_s.iloc[0]) / g.tokens_per_s.max()
            picks.append(f"B={b} K={k} (best {int(g.loc[g.tokens_per_s.idxmax(), 'draft_len'])}, regret {regret:.1%})")
        residual = np.abs(pred / rows.tokens_per_s.to_numpy() - 1)
        print(f"  {hardware} assumed: fitted AL " + " ".join(f"{a:.2f}" for a in al)
              + f" (|error| median {np.median(err):.1%}, max {err.max():.1%}); rows fit AL {low:.2f}-{high:.2f} at "
              f"K = {d}; tokens/s |residual| median {np.median(residual):.1%}; " + ", ".join(picks))


if __name__ == "__main__":
    main()
