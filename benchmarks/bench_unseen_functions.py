"""How much the trained drafters' acceptance owes to having seen the checked prompts' functions.

    python benchmarks/bench_unseen_functions.py            # about 5-10 minutes on 2 cores

Until 2026-12-07 the shipped drafters (speedplan/data/drafters) were trained on the "complete"
prompt (the first half of the code) of the very functions that the calibration and evaluation
prompts `speedplan validate` checks ask about; since then on functions of TRAINING_MODULES, which no
other split reads (docs/runtime.md, "Prompts", gives both drafters' figures). This measures the
acceptance length (greedy, mean over sequence-steps, the bonus token counted) of each drafter at
D = 3 on 16 evaluation prompts and on 16 prompts of the same two kinds ("summarize", "explain"),
built the same way from functions of standard-library modules no split holds (UNSEEN), and prints
the ratio. n-gram lookup, which nothing trained, is the control:
its ratio says how much the two prompt sets differ on their own.

Acceptance does not depend on timing, so no pairing is needed; greedy speculative output equals
plain output (tests/runtime/test_lossless.py), so batch 4 gives batch 1's acceptance.
"""

from __future__ import annotations

import time

from speedplan.runtime.io.prompts import MODULES, TRAINING_MODULES, _module_functions, _text, stdlib_prompts

UNSEEN = ("locale.py", "tokenize.py", "gettext.py", "argparse.py", "configparser.py", "tarfile.py",
          "email/utils.py", "urllib/parse.py", "http/cookies.py", "posixpath.py", "inspect.py", "shutil.py")
PROMPTS, DRAFT_LEN, NEW_TOKENS, BATCH = 16, 3, 64, 4
MECHANISMS = ("eagle", "draft-model", "ngram")


def unseen_prompts(n: int = PROMPTS) -> list[str]:
    """"summarize" and "explain" prompts, alternating, from functions of modules no split holds (up to 2 each)."""
    assert not set(UNSEEN) & (set(MODULES) | set(TRAINING_MODULES))
    return [_text("summarize" if i % 2 == 0 else "explain", module, name, doc, src)
            for i, (module, name, doc, src) in enumerate(_module_functions(UNSEEN, 2))][:n]


def main() -> None:
    from speedplan.runtime.api import DrafterOptions, encode_prompts, load_target, make_drafter
    from speedplan.runtime.generate import generate

    t0 = time.perf_counter()
    target = load_target("smollm2")
    sets = {"evaluation": [p.text for p in stdlib_prompts("evaluation")[:PROMPTS]], "unseen": unseen_prompts()}
    ids = {name: encode_prompts(target.tokenizer, texts, chat=True) for name, texts in sets.items()}
    eos = target.tokenizer.eos_ids
    print(f"AL at D = {DRAFT_LEN} (greedy, {NEW_TOKENS} new tokens, batch {BATCH}); prompts: "
          + ", ".join(f"{name} {len(v)}" for name, v in ids.items()))
    print(f"{'mechanism':<12} {'evaluation':>10} {'unseen':>8} {'eval/unseen':>12}")
    for mech in MECHANISMS:
        al = {}
        for name, prompts in ids.items():
            drafter = make_drafter(mech, target.model, DrafterOptions())
            run = generate(target.model, prompts, drafter, DRAFT_LEN, BATCH, max_new_tokens=NEW_TOKENS, eos_ids=eos, seed=0)
            al[name] = run.acceptance_length
        print(f"{mech:<12} {al['evaluation']:>10.3f} {al['unseen']:>8.3f} {al['evaluation'] / al['unseen']:>12.3f}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
