"""Acceptance length of the n-gram and EAGLE drafters (D = 7, B = 16, 32 new tokens, greedy) on
the prompt sets `speedplan validate` could use: the first 24 calibration prompts, the first 4 and
16 evaluation prompts, and both whole splits. The splits are ordered by module, so the first few
prompts of a split are a few modules only (see `speedplan.validate.calibration.spread`).

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_prompt_split.py   # about 10 minutes
"""

from speedplan.runtime.api import DrafterOptions, encode_prompts, load_target, make_drafter
from speedplan.runtime.generate import generate
from speedplan.runtime.io.prompts import stdlib_prompts


def main() -> None:
    target = load_target("smollm2")
    tok = target.tokenizer
    calib = encode_prompts(tok, [p.text for p in stdlib_prompts("calibration")], chat=True)
    evals = encode_prompts(tok, [p.text for p in stdlib_prompts("evaluation")], chat=True)
    sets = [("calibration, first 24", calib[:24]), ("evaluation, first 4", evals[:4]),
            ("evaluation, first 16", evals[:16]), ("evaluation, all", evals), ("calibration, all", calib)]
    print(f"{'drafter':8s} {'prompts':24s} {'n':>3s} {'AL':>6s}")
    for mech in ("ngram", "eagle"):
        for name, prompts in sets:
            drafter = make_drafter(mech, target.model, DrafterOptions())
            run = generate(target.model, prompts, drafter, 7, 16, max_new_tokens=32, eos_ids=tok.eos_ids)
            print(f"{mech:8s} {name:24s} {len(prompts):3d} {run.acceptance_length:6.3f}", flush=True)


if __name__ == "__main__":
    main()
