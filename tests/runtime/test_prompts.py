"""The prompt splits: training, calibration and evaluation never share a prompt, calibration and
evaluation never share a function (training holds every function's "complete" prompt: see
docs/runtime.md), and calibration and evaluation hold the same kinds, so that acceptance fitted
on one carries to the other."""

from collections import Counter

from speedplan.runtime.io.prompts import KINDS, stdlib_prompts


def _function(prompt) -> str:
    return prompt.id.rsplit(":", 1)[0]


def test_calibration_and_evaluation_hold_the_same_kinds():
    calib, evals = stdlib_prompts("calibration"), stdlib_prompts("evaluation")
    assert len(calib) >= 24 and len(evals) >= 16
    kinds_c, kinds_e = Counter(p.kind for p in calib), Counter(p.kind for p in evals)
    assert set(kinds_c) == set(kinds_e) == {"summarize", "explain"}
    assert abs(kinds_c["summarize"] - kinds_c["explain"]) <= 1 and abs(kinds_e["summarize"] - kinds_e["explain"]) <= 1
    # the prompts validate reads first (24 for calibration, up to 16 for evaluation) mix both kinds too
    assert len({p.kind for p in calib[:4]}) == 2 and len({p.kind for p in evals[:4]}) == 2


def test_no_prompt_serves_two_splits_nor_a_function_calibration_and_evaluation():
    splits = {s: stdlib_prompts(s) for s in ("training", "calibration", "evaluation")}
    assert {p.kind for p in splits["training"]} == {"complete"}
    assert not {_function(p) for p in splits["calibration"]} & {_function(p) for p in splits["evaluation"]}
    every = stdlib_prompts()
    assert len(every) == sum(len(v) for v in splits.values()) == len({p.id for p in every})
    assert len(every) == len(KINDS) * len(splits["training"])
