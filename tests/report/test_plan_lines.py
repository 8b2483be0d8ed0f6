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
    both = plan.rows.merge(result.best, on=["batch", "context"], suffixes=("", "_table"))
    return both[(both["mechanism_table"] == plan.mechanism) & (both["draft_len_table"] != both["draft_len"])]


def test_note_names_every_batch_where_table_and_plan_differ(swept):
    result, plans = swept
    differ = _differing(result, plans["vllm"])  # the default sweep is priced with the vllm profile
    note = table_plan_note(result, plans)
    if differ.empty:
        assert note is None
        return
    assert note is not None and note in render_summary(result, plans=plans).splitlines()
    for r in differ.itertuples():
        assert f"B = {r.batch}: D={r.draft_len_table} {r.speedup_table:.2f}x and D={r.draft_len} {r.speedup:.2f}x" in note
    assert "within 1% of the most tokens/s/GPU" in note


def test_no_note_where_table_agrees_with_the_plan(swept):
    result, plans = swept
    plan = plans["vllm"]
    best = result.best.set_index(["batch", "context"]).copy()
    rows = plan.rows.set_index(["batch", "context"])
    best.loc[rows.index, "mechanism"] = plan.mechanism
    best.loc[rows.index, "draft_len"] = rows["draft_len"]
    agreeing = replace(result, best=best.reset_index())
    assert table_plan_note(agreeing, plans) is None
    # and one differing batch is named, with the plan's D and the table's
    first = rows.index[0]
    best.loc[first, "draft_len"] = rows.loc[first, "draft_len"] + 1
    note = table_plan_note(replace(result, best=best.reset_index()), plans)
    assert note is not None and f"B = {first[0]}: D={rows.loc[first, 'draft_len'] + 1}" in note
    assert note.count("B = ") == 1


def test_plans_priced_with_another_profile_get_no_note(swept):
    result, plans = swept
    others = {name: p for name, p in plans.items() if name != "vllm"}
    assert table_plan_note(result, others) is None
