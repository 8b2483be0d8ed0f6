"""A runtime trace's acceptance priced for another drafter or target says so, and a sweep that
needs a prefix for it suggests the drafter that ran (a walkthrough: an EAGLE-1 trace was
suggested as eagle3:, and a truncated-drafter trace priced n-gram without a word)."""

from __future__ import annotations

import json

import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance_notes import same_model
from speedplan.plan.acceptance_sources import parse_acceptance
from speedplan.plan.sweep import sweep


def _trace(tmp_path, mechanism: str, model: str = "SmolLM2-135M-Instruct.Q4_1"):
    meta = {"type": "meta", "schema": "speedplan.trace/1", "model": model, "mechanism": mechanism, "draft_len": 3,
            "tree": None, "batch": 1, "temperature": 0.0}
    path = tmp_path / f"{mechanism}.jsonl"
    steps = [{"type": "step", "batch": 1, "accepted": [a]} for a in (3, 1, 0, 2, 3, 2)]
    path.write_text("\n".join(json.dumps(x) for x in (meta, *steps)) + "\n")
    return path


def test_a_trace_records_what_ran(tmp_path):
    acc = parse_acceptance(str(_trace(tmp_path, "eagle")))
    assert acc.measured_by == ("eagle", "SmolLM2-135M-Instruct.Q4_1")


def test_another_drafter_or_target_is_said_and_the_numbers_are_kept(tmp_path):
    acc = parse_acceptance(str(_trace(tmp_path, "truncated")))
    r = sweep("llama-3.1-8b", "h100-sxm", ["ngram"], [1], [0, 3], acceptance=acc)
    source = r.meta["acceptance"]["ngram"]
    assert "; measured with the runtime's truncated drafter, priced for ngram: another drafter's acceptance" in source
    assert "; measured on SmolLM2-135M-Instruct.Q4_1, priced on llama-3.1-8b: another target's acceptance" in source
    own = sweep("smollm2-135m", "cpu-local", ["ngram"], [1], [0, 3], acceptance=parse_acceptance(
        str(_trace(tmp_path, "ngram"))))
    assert "measured with" not in own.meta["acceptance"]["ngram"] and "measured on" not in own.meta["acceptance"]["ngram"]
    same = sweep("smollm2-135m", "cpu-local", ["ngram"], [1], [0, 3], acceptance=parse_acceptance(
        str(_trace(tmp_path, "truncated"))))  # the same trace priced on its own target: the same numbers
    assert r.frame.query("mechanism == 'ngram'").acceptance_length.tolist() == \
        same.frame.query("mechanism == 'ngram'").acceptance_length.tolist()  # used as given, not moved
    tree = sweep("smollm2-135m", "cpu-local", ["eagle-tree"], [1], [0, 3], tree_nodes=[8],
                 acceptance=parse_acceptance(str(_trace(tmp_path, "eagle"))))
    assert "measured with" not in tree.meta["acceptance"]["eagle-tree"]  # one head family


def test_the_prefix_hint_names_the_drafter_that_ran(tmp_path):
    path = _trace(tmp_path, "eagle")
    with pytest.raises(SpeedplanInputError, match=rf"prefix it with that one's name \(eagle:{path}\)"):
        sweep("llama-3.1-8b", "h100-sxm", ["eagle", "eagle3"], [1], [0, 3], acceptance=str(path))


@pytest.mark.parametrize("ran, target, same", [("SmolLM2-135M-Instruct.Q4_1", "smollm2-135m", True),
                                               ("SmolLM2-135M-Instruct.Q4_1", "llama-3.1-8b", False),
                                               ("", "llama-3.1-8b", False)])
def test_same_model(ran, target, same):
    assert same_model(ran, target) is same
