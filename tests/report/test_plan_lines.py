"""The terminal's engine-plan lines: the note where the first table and a plan differ in D."""

from __future__ import annotations

from dataclasses import replace

import pytest

from speedplan.plan.engine_plan import plan_engines
from speedplan.plan.sweep import sweep
from speedplan.report.plan_lines import table_plan_note
from speedplan.report.summary import render_summary


@pytest.fixture(scope="module")
def swept():
    result = sweep()
    return result, plan_engines(result)


def _differing(result, plan):
    """Rows where the table and the plan take the same mechanism with another setting, speedups within 1%."""
    both = plan.rows.merge(result.best, on=["batch", "context"], suffixes=("", "_table"))
    other = (both["draft_len_table"] != both["draft_len"]) | (both["verify_tokens_table"] != both["verify_tokens"])
    tie = (both["speedup"] / both["speedup_table"] - 1).abs() <= 0.0101
    return both[(both["mechanism_table"] == plan.mechanism) & other & tie]


def test_note_names_every_batch_where_table_and_plan_differ(swept):
    result, plans = swept
    differ = _differing(result, plans["vllm"])  # the default sweep is priced with the vllm profile
    note = table_plan_note(result, plans)
    if differ.empty:
        assert note is None
        return
    assert note is not None and note in render_summary(result, plans=plans).splitlines()
    for r in differ.itertuples():
        assert f"B = {r.batch}: D={r.draft_len_table}" in note and f"D={r.draft_len} {r.speedup:.2f}x" in note
    assert "within 1% of the most tokens/s/GPU" in note


def test_no_note_where_table_agrees_with_the_plan(swept):
    result, plans = swept
    plan = plans["vllm"]
    best = result.best.set_index(["batch", "context"]).copy()
    rows = plan.rows.set_index(["batch", "context"])
    best.loc[rows.index, "mechanism"] = plan.mechanism
    best.loc[rows.index, "draft_len"] = rows["draft_len"]
    best.loc[rows.index, "verify_tokens"] = rows["verify_tokens"]
    agreeing = replace(result, best=best.reset_index())
    assert table_plan_note(agreeing, plans) is None
    # and one differing batch is named, with the plan's D and the table's
    first = rows.index[0]
    best.loc[first, "draft_len"] = rows.loc[first, "draft_len"] + 1
    best.loc[first, "speedup"] = rows.loc[first, "speedup"] * 0.995  # within 1%: a tie the table broke its way
    note = table_plan_note(replace(result, best=best.reset_index()), plans)
    assert note is not None and f"B = {first[0]}: D={rows.loc[first, 'draft_len'] + 1}" in note
    assert note.count("B = ") == 1
    # a plan held 17% off by what its engine runs is no tie: its line's worst loss says so, not this note
    best.loc[first, "speedup"] = rows.loc[first, "speedup"] * 1.2
    assert table_plan_note(replace(result, best=best.reset_index()), plans) is None


def test_a_tree_setting_names_its_nodes(swept):
    result, _ = swept
    sglang = sweep(engine="sglang")
    plans = plan_engines(sglang)
    note = table_plan_note(sglang, plans)
    differ = _differing(sglang, plans["sglang"])
    assert (note is None) == differ.empty
    for r in differ.itertuples():
        if r.verify_tokens > r.draft_len + 1:
            assert f"D={r.draft_len}, {r.verify_tokens - 1} nodes {r.speedup:.2f}x" in note


def test_plans_priced_with_another_profile_get_no_note(swept):
    result, plans = swept
    others = {name: p for name, p in plans.items() if name != "vllm"}
    assert table_plan_note(result, others) is None
