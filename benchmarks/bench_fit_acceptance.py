"""How far `speedplan calibrate --fit-acceptance` recovers an acceptance it was not given.

    python benchmarks/bench_fit_acceptance.py

Rows of a known engine (the vllm profile with host work 800 µs a step and 60 µs a sequence and
50 launches a draft forward; Llama-3.1-8B on h100-sxm), tokens/s at B 1, 4, 16, 64 x D 0, 1, 3, 5
with no acceptance length, at two acceptances (i.i.d. 0.7; p_1 0.9 decaying x 0.8 a position),
each with five draws of uniform ±2% noise, calibrated with --fit-acceptance from the vllm profile:
per draw the fitted AL at D = 5, the range the rows fit within their scatter, whether the line
calls it loose, and the seconds the calibration took. docs/engine.md quotes a run.
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
            fitted = float(chain_al(*result.rates["eagle3"], 5))
            low, high = (float(x) for x in note.split("for AL ")[1].split(" at D")[0].split("-"))
            inside, called = low - 5e-3 <= true_al <= high + 5e-3, "do not pin it" in note
            held, loose = held + inside, loose + called
            print(f"truth p_1 {truth[0]} x {truth[1]} (AL {true_al:.2f} at D = 5), draw {seed}: fitted AL {fitted:.2f}, "
                  f"rows fit {low:.2f}-{high:.2f} ({'holds' if inside else 'misses'} the truth)"
                  f"{', called loose' if called else ''}; {seconds:.1f} s")
    n = len(TRUTHS) * DRAWS
    print(f"{held} of {n} ranges hold the truth; {loose} of {n} called loose")


if __name__ == "__main__":
    main()
