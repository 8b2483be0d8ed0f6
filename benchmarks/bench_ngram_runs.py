"""n-gram lookup's AL at D = 1..7 on the prompt sets `speedplan validate` uses, against what each
acceptance model predicts from the D = 7 runs alone: the chain (`fit_positions`, each step's first
draft accepted alike whatever D) and the runs of copied text (`fit_runs`). Greedy, 32 new tokens,
SmolLM2-135M on this CPU; the prompts are `validate.calibration.spread`'s.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_ngram_runs.py   # about 15 minutes on 2 cores
"""

import numpy as np

from speedplan.plan.acceptance import Acceptance, fit_positions, fit_runs
from speedplan.runtime.api import encode_prompts, load_target, make_drafter
from speedplan.runtime.generate import generate
from speedplan.runtime.io.prompts import stdlib_prompts
from speedplan.validate.calibration import spread

SETS = (("calibration", 24, 1), ("evaluation", 16, 4))  # split, prompts, batch (validation's calibration, its B = 16)


def main() -> None:
    target = load_target("smollm2")
    tok = target.tokenizer
    for split, n, batch in SETS:
        prompts = spread(encode_prompts(tok, [p.text for p in stdlib_prompts(split)], chat=True), n)
        measured, histogram = [], None
        for d in range(1, 8):
            run = generate(target.model, prompts, make_drafter("ngram", target.model), d, batch, max_new_tokens=32,
                           eos_ids=tok.eos_ids)
            measured.append(run.acceptance_length)
            histogram = np.bincount([a for s in run.steps for a in s.accepted], minlength=d + 1)
        print(f"{split}, {n} prompts, B = {batch}; D = 7 histogram {histogram.tolist()}")
        print(f"  {'D':>14s} " + " ".join(f"{d:>6d}" for d in range(1, 8)))
        print(f"  {'measured':>14s} " + " ".join(f"{m:6.3f}" for m in measured))
        for name, fit in (("fit_positions", fit_positions), ("fit_runs", fit_runs)):
            al = Acceptance.positional(tuple(np.maximum(fit(histogram, 7), 1e-6)), name).chain_al(np.arange(1, 8))
            err = al / np.array(measured) - 1
            print(f"  {name:>14s} " + " ".join(f"{a:6.3f}" for a in al)
                  + f"   error {' '.join(f'{100 * e:+.1f}%' for e in err[:6])} (D = 1..6)")


if __name__ == "__main__":
    main()
