"""The report folder agrees with itself, with the terminal and with docs/outputs.md: the terminal's
first table row for row with recommendations.json and sweep.csv, each engine's plan line with
schedule.csv and its serving file, every CSV column documented (and every documented one written),
and the figures and report.html worded as the planner computes (a capped engine's verify tokens,
the rise a schedule needs, which acceptance rows came from another target)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from speedplan.plan.engine_plan import plan_engines
from speedplan.plan.pick import RISE_GAIN, TIE_TOLERANCE
from speedplan.plan.sweep import sweep
from speedplan.report.folder import write_outputs
from speedplan.report.plan_lines import table_plan_note
from speedplan.report.summary import render_summary, short_acceptance
from tests._heads import long_heads

DOCS = Path(__file__).resolve().parents[1] / "docs" / "outputs.md"


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """A small sweep priced by SGLang's profile, whose speculative steps run at most 48 requests: B = 64 is capped."""
    result = sweep("llama-3.1-8b", "h100-sxm", long_heads("eagle3", "eagle3-tree"), batches=[1, 8, 64],
                   draft_lens=[0, 2, 4], tree_nodes=[8, 16], engine="sglang")  # heads that hold context 4096
    plans = plan_engines(result)
    out = tmp_path_factory.mktemp("report") / "r"
    write_outputs(result, out, plans=plans)
    return result, plans, out


def _documented(section: str) -> list[str]:
    """The column names in the table under `## {section}` of docs/outputs.md."""
    text = DOCS.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", body, flags=re.M)


@pytest.mark.parametrize("name, section", [("sweep.csv", "sweep.csv"), ("pareto.csv", "sweep.csv"),
                                           ("schedule.csv", "schedule.csv"), ("sensitivity.csv", "sensitivity.csv")])
def test_every_csv_column_is_documented_and_every_documented_column_is_written(capped, name, section):
    _, _, out = capped
    written = list(pd.read_csv(out / name).columns)
    documented = _documented(section)
    assert documented, f"docs/outputs.md has no column table for {section}"
    assert [c for c in written if c not in documented] == [], f"{name}: columns docs/outputs.md does not list"
    assert [c for c in documented if c not in written] == [], f"docs/outputs.md lists columns {name} lacks"


def test_every_csv_cell_is_filled(capped):
    _, _, out = capped
    for name in ("sweep.csv", "pareto.csv", "schedule.csv", "sensitivity.csv"):
        frame = pd.read_csv(out / name)
        assert not frame.isna().any().any(), f"{name}: empty cells in {list(frame.columns[frame.isna().any()])}"


def test_terminal_table_matches_recommendations_and_sweep_row_for_row(capped):
    result, plans, out = capped
    lines = render_summary(result, plans=plans).splitlines()
    head = next(i for i, line in enumerate(lines) if re.match(r"\s*B\s+mechanism", line))
    columns = lines[head].split()
    rows = []
    for line in lines[head + 1:]:
        if not re.match(r"\s*\d+\s", line):
            break
        rows.append(dict(zip(columns, re.split(r"\s{2,}", line.strip()))))
    records = json.loads((out / "recommendations.json").read_text())["per_batch"]
    frame = pd.read_csv(out / "sweep.csv")
    assert len(rows) == len(records) == result.best["batch"].nunique()
    for shown, rec in zip(rows, records):
        row = frame[(frame["batch"] == rec["batch"]) & (frame["mechanism"] == rec["mechanism"])
                    & (frame["draft_len"] == rec["draft_len"]) & (frame["verify_tokens"] == rec["verify_tokens"])]
        assert len(row) == 1
        row = row.iloc[0]
        for source in (rec, row):
            assert shown["B"] == str(int(source["batch"])) and shown["D"] == str(int(source["draft_len"]))
            assert shown["AL"] == f"{source['acceptance_length']:.2f}"
            assert shown["speedup"].rstrip("*") == f"{source['speedup']:.2f}x"
            assert shown["tok/s/user"].rstrip("^") == f"{source['tokens_per_s_per_user']:,.1f}"
            assert shown["tok/s/GPU"] == f"{source['tokens_per_s_per_gpu']:,.0f}"
        assert shown["tok/s/user"].endswith("^") == (row["running"] < row["batch"])  # a running request's rate
        assert rec["acceptance_source"] == row["acceptance_source"] == result.meta["acceptance"][rec["mechanism"]]


def test_plan_lines_schedule_and_serving_files_name_the_same_draft_lengths(capped):
    result, plans, out = capped
    text = render_summary(result, plans=plans)
    batches = [int(b) for b in re.search(r"D at B = ([\d, ]+);", text).group(1).split(", ")]
    schedule = pd.read_csv(out / "schedule.csv")
    engines = json.loads((out / "recommendations.json").read_text())["engines"]
    files = {"vllm": "vllm_serve.sh", "sglang": "sglang_launch.sh", "trtllm": "trtllm_serve.sh"}
    for name, plan in plans.items():
        rows = schedule[schedule["engine"] == name].set_index("batch")
        line = next(line for line in text.splitlines() if line.startswith(f"  {name} "))
        ds = re.search(r" D ([\d ]+?)(?:  | \()", line).group(1).split()
        assert [int(d) for d in ds] == [int(rows.at[b, "draft_len"]) for b in batches], line
        assert [r["draft_len"] for r in engines[name]["per_batch"]] == rows["draft_len"].tolist()
        assert [r["running"] for r in engines[name]["per_batch"]] == rows["running"].tolist()
        served = (out / files[name]).read_text()
        assert f"Priced with engine profile {rows['engine_profile'].iloc[0]}" in served
        table = re.findall(r"^#\s+(\d+)\s+(\d+)\s+([\d.]+)x\s+([\d.]+)%", served, flags=re.M)
        assert [(int(b), int(d), s, p) for b, d, s, p in table] == [
            (b, int(r.draft_len), f"{r.speedup:.2f}", f"{100 * r.loss_vs_best:.1f}") for b, r in rows.iterrows()]


def test_roofline_labels_count_the_requests_a_capped_step_runs(capped, tmp_path, monkeypatch):
    """SGLang's profile runs 48 requests in a speculative step at B = 64; the roofline's label said 64·(1+D)
    tokens while the point sat at 48·(1+D)."""
    from matplotlib.axes import Axes

    from speedplan.report.data import figure_set
    from speedplan.report.figures import draw_figures

    result, _, _ = capped
    best = result.best[result.best["batch"] == 64].iloc[0]
    assert best["mechanism"] != "none" and best["running"] == 48
    labels = []
    annotate = Axes.annotate
    monkeypatch.setattr(Axes, "annotate",
                        lambda self, text, *a, **k: labels.append(text) or annotate(self, text, *a, **k))
    draw_figures(figure_set(result, 4096), tmp_path, "caption", names=("roofline",))
    tokens = {int(t) for label in labels for t in re.findall(r"\d+", label) if "," in label or label.isdigit()}
    assert 48 * int(best["verify_tokens"]) in tokens
    assert 64 * int(best["verify_tokens"]) not in tokens


def test_html_says_what_a_schedule_rise_needs_and_how_the_tables_pick(capped):
    _, _, out = capped
    page = (out / "report.html").read_text()
    assert f"gains more than {RISE_GAIN:.0%} of a batch size" in page  # the plan's hysteresis (pick.RISE_GAIN)
    assert "gains more than 1%" not in page
    assert f"fewest tokens within {TIE_TOLERANCE:.0%}" in page  # the heatmap's stars, as best_per_batch picks
    assert "its fastest D (the highest speedup, not the shortest draft" in page  # sensitivity.csv's rule
    assert "EAGLE/EAGLE3/MTP chains" in page  # SGLang's adaptive mode runs MTP chains too


@pytest.mark.parametrize("source, tag", [
    ('published: published_cases.csv: "Spec-Bench leaderboard (RTX3090)", Vicuna-7B-v1.3, EAGLE2: AL 4.36; '
     "geometric per-rank alpha 0.564; no row for deepseek-v3: the family's row for another target", "(other target)"),
    ('published: published_cases.csv: "Leviathan et al. 2023 Tab.2", T5-XXL target, EnDe, T=0; no row for '
     "llama-3.1-70b with llama-3.2-1b: alpha from the draft's size, 0.787 at draft/target params 0.018",
     "(by draft size)"),
])
def test_a_caption_says_how_a_default_without_its_own_row_was_got(source, tag):
    """A row borrowed from another target was captioned "(extrapolated)", as a draft model's size fit is."""
    text = short_acceptance(source)
    assert text.endswith(tag) and "extrapolated" not in text and len(text) <= 60


def test_the_tree_note_names_the_tables_rule_for_trees(capped):
    """For trees the table takes the fewest verified tokens, then the fastest: it can take the deeper of two
    equal-node trees, which "the shortest draft" contradicted."""
    result, plans, _ = capped
    plan = plans["sglang"]
    assert plan.mechanism == "eagle3-tree"
    rows = plan.rows.set_index(["batch", "context"])
    best = result.best.set_index(["batch", "context"]).copy()
    first = rows.index[0]
    best.loc[first, ["mechanism", "verify_tokens"]] = [plan.mechanism, rows.loc[first, "verify_tokens"]]
    best.loc[first, "draft_len"] = rows.loc[first, "draft_len"] + 1  # deeper, same nodes
    best.loc[first, "speedup"] = rows.loc[first, "speedup"] * 1.001
    note = table_plan_note(replace(result, best=best.reset_index()), plans)
    assert note is not None and "fewest tokens" in note and "shortest draft" not in note
