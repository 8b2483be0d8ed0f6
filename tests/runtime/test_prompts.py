"""The prompt splits: training, calibration and evaluation never share a prompt, a function nor a
module (docs/runtime.md, "Prompts"), and calibration and evaluation hold the same kinds, so that
acceptance fitted on one carries to the other."""

from collections import Counter

from speedplan.runtime.io.prompts import MODULES, TRAINING_MODULES, stdlib_prompts


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


def test_no_prompt_function_nor_module_serves_two_splits():
    splits = {s: stdlib_prompts(s) for s in ("training", "calibration", "evaluation")}
    assert {p.kind for p in splits["training"]} == {"complete"} and len(splits["training"]) >= 60
    functions = {s: {_function(p) for p in v} for s, v in splits.items()}
    modules = {s: {f.split(":")[0] for f in v} for s, v in functions.items()}
    assert not functions["calibration"] & functions["evaluation"]
    assert not functions["training"] & (functions["calibration"] | functions["evaluation"])
    assert not modules["training"] & (modules["calibration"] | modules["evaluation"])
    assert not set(TRAINING_MODULES) & set(MODULES)
    every = stdlib_prompts()
    assert len(every) == sum(len(v) for v in splits.values()) == len({p.id for p in every})
