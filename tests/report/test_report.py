"""The sweep report: figures are real PNGs, the HTML links everything, provenance is stated."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from speedplan.plan.sweep import sweep
from speedplan.report.html import write_report
from speedplan.report.summary import provenance, render_summary, short_provenance
from speedplan.report.figures import FIGURES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MEASURED = "measured (AIConfigurator 0.12, vLLM 0.24 kernels) h100-sxm"  # the shipped h100-sxm profile
SMALL = dict(model="llama-3.1-8b", hardware="h100-sxm", mechanisms=["eagle", "ngram", "eagle-tree"],
             batches=[1, 8, 64], draft_lens=range(0, 5), contexts=[4096])


@pytest.fixture(scope="module")
def result():
    return sweep(**SMALL, min_tokens_per_user=100.0)


def _files(out: Path) -> list[str]:
    names = ["sweep.csv", "pareto.csv", "recommendations.json", "serving/vllm.sh"]
    (out / "serving").mkdir(exist_ok=True)
    for name in names:
        (out / name).write_text("x\n")
    return names


def _check_pngs(paths: list[Path]) -> None:
    pngs = [p for p in paths if p.suffix == ".png"]
    assert sorted(p.name for p in pngs) == sorted(FIGURES.values())
    for p in pngs:
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC, p
        assert len(data) > 10_000, (p, len(data))


def test_report_writes_pngs_and_html_linking_everything(result, tmp_path):
    files = _files(tmp_path)
    written = write_report(result, tmp_path, files)
    assert all(p.exists() and p.parent == tmp_path for p in written)
    _check_pngs(written)
    assert tmp_path / "report.html" in written
    page = (tmp_path / "report.html").read_text()
    links = set(re.findall(r'href="([^"]+)"', page))
    assert set(files) <= links
    images = set(re.findall(r'<img src="([^"]+)"', page))
    assert images == set(FIGURES.values())
    assert all((tmp_path / name).exists() for name in images | links)
    assert not re.search(r'(src|href)="(https?:)?//', page), "report must open offline"
    assert MEASURED in page
    for mechanism, source in result.meta["acceptance"].items():
        assert html.escape(f"{mechanism}: {source}") in page
    pick = result.slo_pick
    assert f"SLO pick (&gt;= 100 tokens/s/user): {pick['mechanism']} D={pick['draft_len']}" in page
    for row in result.best.itertuples():  # the recommendation table has every batch
        shown = "off (plain decoding)" if row.mechanism == "none" else row.mechanism
        assert f"<td>{row.batch}</td><td>{row.context}</td><td class=\"l\">{shown}</td>" in page


def test_every_figure_says_where_numbers_came_from(result, tmp_path):
    caption = short_provenance(result)
    # each acceptance names the row it came from, whole (until 2026-12-03 the cut fell inside
    # "published_cases.csv: ...", so that no caption named its paper or table)
    assert caption.startswith(f'latency: {MEASURED}; engine profile vllm; acceptance: eagle: published: "EAGLE-3 paper Tab.1"')
    assert 'ngram: published: "' in caption and "…" not in caption
    page = write_report(result, tmp_path, [])[-1].read_text()
    assert page.count(html.escape(caption)) == len(FIGURES)  # under each figure, as inside it
    assert page.count(html.escape(provenance(result))) == 1


def test_summary_lists_every_batch_and_provenance(result):
    text = render_summary(result)
    lines = text.splitlines()
    table = lines[2:2 + len(result.best)]
    assert [int(line.split()[0]) for line in table] == list(result.best["batch"])
    for line, row in zip(table, result.best.itertuples()):
        assert line.split()[1:3] == [row.mechanism, str(row.draft_len)]
        assert line.split()[3] == f"{row.acceptance_length:.2f}"
    latency = next(line for line in lines if line.startswith("latency: "))
    assert latency.startswith(f"latency: {MEASURED} (roofline fallback for some ops in")  # elementwise ops: no table
    assert any(line.startswith("acceptance: eagle: published: published_cases.csv") for line in lines)
    pick = result.slo_pick
    assert f"SLO pick (>= 100 tokens/s/user): {pick['mechanism']} D={pick['draft_len']} at B={pick['batch']}" in text


def test_summary_caps_rows_and_names_contexts():
    result = sweep(**{**SMALL, "batches": [1, 2, 4, 8, 16, 32], "contexts": [1024, 8192]})
    assert len(result.best) == 12
    text = render_summary(result, max_rows=5)
    assert "(5 of 12 rows shown" in text
    assert text.splitlines()[1].split()[:3] == ["B", "context", "mechanism"]
    assert "SLO pick: none asked" in text


def test_measured_profile_is_named_with_its_fallback_rows(result):
    frame = result.frame.assign(cost_source="profile")
    frame.loc[frame.index[:3], "cost_source"] = "mixed"
    measured = replace(result, frame=frame, meta={**result.meta, "cost_origin": "measured"})
    assert provenance(measured).startswith(
        f"latency: measured profile h100-sxm (roofline fallback for some ops in 3 of {len(frame)} rows")


def test_nothing_feasible_still_renders(tmp_path):
    result = sweep(**{**SMALL, "model": "llama-3.1-405b", "batches": [1, 8]})
    assert not result.frame["feasible"].any() and result.best.empty and result.pareto.empty
    text = render_summary(result)
    assert "no feasible configuration: llama-3.1-405b on h100-sxm at TP 1 fits in memory at no swept batch" in text
    assert f"latency: {MEASURED}" in text
    written = write_report(result, tmp_path, _files(tmp_path))
    _check_pngs(written)
    assert "the weights alone do not fit: try a larger --tp" in (tmp_path / "report.html").read_text()  # the CLI's line


def test_import_is_cheap():
    code = "import sys, speedplan.report; print(sorted(m for m in ('matplotlib', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_report_shows_each_engines_plan_and_the_sensitivity_of_published_defaults(result, tmp_path):
    from speedplan.plan.engine_plan import plan_engines

    plans = plan_engines(result)
    page = write_report(result, tmp_path, [], plans=plans)[-1].read_text()
    assert "<h2>Plan per engine</h2>" in page
    for name, plan in plans.items():
        assert f"<h3>{name}: {html.escape(plan.mechanism)} ({plan.mode})</h3>" in page
    assert "published acceptance at AL &plusmn;10%" in page  # every default here is a published row
    assert "D at AL -10%" in page


def test_summary_prints_one_line_per_engine(result):
    from speedplan.plan.engine_plan import plan_engines

    plans = plan_engines(result)
    text = render_summary(result, plans=plans)
    assert "plan per engine (D at B = 1, 8, 64" in text
    for name, plan in plans.items():
        line = next(l for l in text.splitlines() if l.strip().startswith(name + " "))
        ds = [int(d) for d in line.split(" D ")[1].split("  ")[0].split(" (")[0].split()]  # "(16 nodes)": a tree plan
        assert ds == plan.rows.drop_duplicates("batch")["draft_len"].tolist()


def test_a_tree_setting_is_named_with_its_size():
    """A plan's tree and the best tree it is measured against can share mechanism and D and differ
    in nodes: the plan line, the worst-loss text, the report and schedule.csv say the nodes."""
    from speedplan.plan.engine_plan import plan_engines, schedule_frame
    from speedplan.plan.sweep import sweep
    from speedplan.report.summary import setting_text

    assert setting_text("eagle3-tree", 3, 9) == "eagle3-tree D=3, 8 nodes" and setting_text("eagle3", 3, 4) == "eagle3 D=3"
    assert setting_text("none", 0, 1) == "plain decoding"
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3-tree"], [1, 64], [0, 3, 4], acceptance="eagle3:alpha=0.6")
    plans = plan_engines(r, engines=["trtllm"])
    rows = plans["trtllm"].rows
    line = next(l for l in render_summary(r, plans=plans).splitlines() if l.strip().startswith("trtllm "))
    assert f"({int(rows.verify_tokens.iloc[0]) - 1} nodes)" in line
    assert "nodes reaches" in line or "worst loss 0.0%" in line
    assert "best_verify_tokens" in schedule_frame(plans).columns


def test_report_folder_has_per_engine_schedule_and_configs(result, tmp_path):
    from speedplan.report.folder import write_outputs

    out = tmp_path / "rep"
    write_outputs(result, out)
    recs = json.loads((out / "recommendations.json").read_text())
    schedule = (out / "schedule.csv").read_text().splitlines()
    assert schedule[0].startswith("engine,engine_profile,plan_mechanism,mode,batch,context,weight,draft_len")
    table = pd.read_csv(out / "schedule.csv")
    for name, rec in recs["engines"].items():
        rows = table[table.engine == name]
        assert rows.draft_len.astype(int).tolist() == [x["draft_len"] for x in rec["per_batch"]]
        assert rec["engine_profile"].startswith(rows.engine_profile.iloc[0] + ":")  # the name, then its fit
    assert (out / "sensitivity.csv").exists() and (out / "vllm_serve.sh").exists()
    # each config says where its speedups came from: engine profile, latencies, its mechanism's acceptance
    for name, rec in recs["engines"].items():
        text = next(p for p in out.iterdir() if p.name.startswith(name) and p.suffix in (".sh", ".yaml")).read_text()
        assert f"# Speedups from latency {MEASURED}" in text
        if rec["mechanism"] != "none":  # the whole source: a comment has room for it
            assert f"acceptance {result.meta['acceptance'][rec['mechanism']]}" in text


def test_a_sliding_window_model_says_so_in_the_header():
    from speedplan.specs.model import get_model

    windowed = replace(get_model("llama-3.1-8b"), name="windowed", window=4096, window_layers=16)
    text = render_summary(sweep(windowed, "h100-sxm", ["ngram"], [1], [0, 1]))
    assert text.splitlines()[0].startswith("speedplan: windowed on h100-sxm, TP=1, bf16, attention 4096-token window on 16 of 32 layers")


def test_a_speedup_against_a_plain_step_that_does_not_fit_is_marked():
    """SGLang caps a speculative step at 48 running requests, so at B = 256 its EAGLE-3 rows fit
    where plain decoding does not: the table marks that speedup, the terminal and the report
    say why, and B = 256 is not planned. Under vLLM (no cap) nothing fits there."""
    from speedplan.plan.engine_plan import plan_engines
    from speedplan.plan.sweep import reprice, sweep
    from speedplan.report.html import render_html
    from speedplan.report.summary import plain_unfit_cells

    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 64, 256], [0, 3], contexts=[4096], engine="sglang")
    assert plain_unfit_cells(r.frame) == {(256, 4096)}
    text = render_summary(r, plans=plan_engines(r, engines=["sglang"]))
    rows = {line.split()[0]: line for line in text.splitlines()[2:5]}
    assert rows["256"].split()[4].endswith("x*") and not rows["64"].split()[4].endswith("*")
    assert ("not planned: at B = 256 plain decoding does not fit in memory (plain decoding at B=256, context 4096 "
            "needs") in text
    assert "caps at 48 running requests (spec_max_running)" in text and "marked * are against plain" in text
    assert "plain decoding does not fit in memory" in render_html(r, 4096, [], [], "", "")
    v = reprice(r, "vllm")
    assert plain_unfit_cells(v.frame) == set()
    assert "not planned: at B = 256 nothing fits in memory" in render_summary(v) and "x*" not in render_summary(v)


def test_plain_decoding_that_does_not_fit_is_named_at_the_context_where_it_does_not_fit():
    """Over contexts 1024 and 8192, plain decoding at B = 64 fits at 1024 but not at 8192 (where
    SGLang's capped speculative steps still fit): the line said "at B = 64 plain decoding does not fit
    (plain decoding at B=64, context 1024 needs 24.659 GB ... and 72.000 GB are usable)", a need
    below what is usable, at a context where it fits (an audit of 2026-12-04). At 8192, 64 plain
    sequences need 16.1 GB of weights + 64 x 8193 tokens x 128 KiB = 84.8 GB, above the 71.0 GB
    SGLang 0.5.23's default leaves of the 85.5 GB an H100 reports (0.830 of it); 48 capped EAGLE-3
    steps need about 70.1 GB, within it."""
    from speedplan.report.summary import plain_unfit_cells, unplanned_line

    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 64], [0, 3], contexts=[1024, 8192], engine="sglang")
    assert plain_unfit_cells(r.frame) == {(64, 8192)}
    line = unplanned_line(r)
    assert line.startswith("not planned: at context 8192, B = 64 plain decoding does not fit in memory (plain "
                           "decoding at B=64, context 8192 needs 84.8 GB per GPU")
    assert "context 1024 needs" not in line and "marked * are against plain decoding" in line


def test_summary_says_which_batches_fit_nowhere_and_why_a_plan_loses_everything():
    """Batch sizes at which nothing fits drop out of every table: the terminal names them. A
    plan whose own setting does not fit at some batch says so, not "reaches 1.00x"; the header
    names the engine profile that priced the table; a long batch list is sampled."""
    from dataclasses import replace

    from speedplan.plan.engine_plan import plan_engines
    from speedplan.plan.sweep import sweep

    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 8, 256], [0, 2, 7], contexts=[32768])
    plans = plan_engines(r, engines=["sglang"])
    text = render_summary(r, plans=plans)
    assert text.splitlines()[0].startswith("speedplan: llama-3.1-8b on h100-sxm, TP=1, bf16, engine profile vllm")
    assert "not planned: at B = 256 nothing fits in memory (plain decoding at B=256, context 32768 needs" in text
    plan = plans["sglang"]
    rows = plan.rows.copy()
    rows.loc[rows.batch == 8, ["loss_vs_best", "best_mechanism", "best_draft_len"]] = [1.0, "none", 0]
    text = render_summary(r, plans={"sglang": replace(plan, rows=rows)})
    assert "worst loss 100% (B=8: " in text and "does not fit in memory; plain decoding does)" in text
    rows.loc[rows.batch == 8, "draft_len"] = 0  # off at B = 8, the drafter still loaded
    text = render_summary(r, plans={"sglang": replace(plan, rows=rows)})
    assert f"D = 0 with the {plan.mechanism} drafter loaded does not fit in memory; plain decoding does" in text
    many = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], list(range(1, 41)), [0, 2], contexts=[1024])
    line = next(l for l in render_summary(many, plans=plan_engines(many, engines=["vllm"])).splitlines()
                if l.startswith("plan per engine"))
    assert "of 40; every one in schedule.csv" in line and len(line.split("B = ")[1].split(";")[0].split(",")) == 12


def test_the_roof_and_the_fallback_say_where_they_come_from(result, tmp_path):
    """The report's roofline numbers name their basis (the profile's fastest measured GEMM, an
    assumed copy bandwidth), and the terminal names the op families the roofline fallback prices
    (the H100 profile has no elementwise table); a GPU without a profile names what its fallback
    was fitted to."""
    basis = result.meta["roofline_basis"]
    assert basis.startswith("956 TFLOP/s bf16 (fastest measured GEMM of the profile: 97% of the preset's 989")
    assert "(assumption: 88% of the preset's 3,350 GB/s)" in basis
    page = write_report(result, tmp_path, [])[-1].read_text()
    assert html.escape(basis) in page
    assert "roofline fallback for some ops in" in render_summary(result) and "the profile has no elementwise table" in \
        render_summary(result)
    a100 = sweep("llama-3.1-8b", "a100-80gb", ["eagle"], [1], [0, 2], contexts=[1024])
    assert "datasheet roofline a100-80gb (roofline efficiencies fitted to h100-sxm, h200-sxm, b200)" in render_summary(a100)
    assert a100.meta["roofline_basis"].startswith("234 TFLOP/s bf16 (assumption: 75% of the preset's 312 TFLOP/s peak)")


def test_the_engine_line_says_which_batch_sizes_lie_beyond_the_profiles_fitted_rows(result):
    """The shipped vllm profile was fitted to rows at B = 1 only: a sweep to B = 64 says B = 8–64
    are extrapolated; SGLang's rows reach B = 64, so the same sweep priced by it says nothing."""
    line = next(l for l in render_summary(result).splitlines() if l.startswith("engine:"))
    assert "fitted to 4 rows at B = 1 (" in line
    assert "; B = 8–64 lie beyond its fitted rows: extrapolated there" in line
    assert "lie beyond" in provenance(result)  # the report header carries it too
    sglang = sweep(**SMALL, engine="sglang")
    line = next(l for l in render_summary(sglang).splitlines() if l.startswith("engine:"))
    assert "rows at B = 1–64 (" in line and "lie beyond" not in line
    at_one = sweep(**{**SMALL, "batches": [1]})
    assert "lie beyond" not in render_summary(at_one)


def test_unplanned_batches_read_as_ranges():
    """README's 70B example listed "at B = 110, 111, ..., 256" as 147 numbers (audit of 2026-12-04)."""
    from speedplan.report.summary import batch_ranges

    assert batch_ranges(range(110, 257)) == "110–256"
    assert batch_ranges([256, 128]) == "128, 256" and batch_ranges([1, 2, 3, 5, 7, 8]) == "1–3, 5, 7, 8"


def test_a_table_winner_the_pricing_engine_cannot_run_is_named():
    """The default table recommends eagle3-tree at B = 1-8 priced by vLLM, which runs no trees; and
    a TensorRT-LLM plan left off because it cannot run EAGLE-1 said speculation loses (an audit of
    2026-12-04)."""
    import speedplan
    from speedplan.report.summary import render_summary

    r = speedplan.sweep(mechanisms=["eagle3-tree", "eagle3"], batches=(1, 8), draft_lens=(0, 4, 8))
    text = render_summary(r)
    assert "note: vLLM cannot run eagle3-tree" in text
    eagle1 = speedplan.sweep(mechanisms=["eagle"], batches=(1, 8), draft_lens=(0, 2, 4), engine="trtllm")
    files = speedplan.render_serving_configs(speedplan.serving_plans(eagle1, speedplan.plan_engines(eagle1)))
    assert "it cannot run eagle, which the sweep also priced" in files["trtllm_serve.sh"]


def test_recommendations_json_carries_the_slo_pick():
    """The SLO pick was in the terminal and report.html only (an audit of 2026-12-04)."""
    import json

    import speedplan
    from speedplan.plan.pick import recommendations

    r = speedplan.sweep(mechanisms=["eagle3"], batches=(1, 8, 64), draft_lens=(0, 2, 4), min_tokens_per_user=50)
    rec = json.loads(json.dumps(recommendations(r)))
    assert rec["slo_pick"]["min_tokens_per_user"] == 50
    assert rec["slo_pick"]["pick"]["tokens_per_s_per_user"] >= 50
    assert rec["slo_pick"]["pick"]["batch"] == int(r.slo_pick.batch)
    assert "slo_pick" not in recommendations(speedplan.sweep(mechanisms=["eagle3"], batches=(1,), draft_lens=(0, 2)))


def test_schedule_csv_says_where_a_plan_does_not_fit():
    """A 70B plan's batch sizes where its launch (drafter loaded) does not hold every sequence:
    fits_memory False and runs_at_batch the sequences it runs (the largest batch that fits),
    priced at that batch's tokens/s/GPU (an audit of 2026-12-04)."""
    import speedplan
    from speedplan.plan.engine_plan import schedule_frame

    # vLLM's 0.9 of the 85.5 GB each of 4 H100s reports holds 124 plain sequences of 4096 tokens (weights
    # 35.3 GB, 0.34 GB a sequence), 120 with EAGLE-3 loaded (B = 109 and 105 of the datasheet's 80 GB)
    r = speedplan.sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], batches=tuple(range(111, 125)),
                        draft_lens=(0, 2, 4), tp=4)
    frame = schedule_frame(speedplan.plan_engines(r))
    assert frame["fits_memory"].dtype == bool and not frame["fits_memory"].all()  # B = 121-124 with EAGLE-3 loaded
    short = frame[~frame["fits_memory"]]
    assert (short["runs_at_batch"] == 120).all() and (short["batch"] >= 121).all() and (short["speedup"] > 1).all()
    assert (frame.loc[frame["fits_memory"], "runs_at_batch"] == frame.loc[frame["fits_memory"], "batch"]).all()


def test_figures_stay_readable_with_hundreds_of_batch_sizes(tmp_path):
    """--batch 1-256 drew one bar per batch size (an 8,208-pixel-wide step_breakdown.png) and
    256 overlapping batch labels: the figures now thin their labels and bars."""
    from PIL import Image

    from speedplan.report.axes import thin

    batches = list(range(1, 257))
    assert [batches[i] for i in thin(batches, 14)] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # log axis
    assert [batches[i] for i in thin(batches, 8, linear=True)] == [1, 50, 100, 150, 200, 250]  # columns
    assert thin([1, 8, 64], 12) == [0, 1, 2]
    assert len(thin(list(range(96, 110)), 8)) <= 8  # no power of two there: evenly spaced
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=tuple(batches), draft_lens=(0, 2, 4))
    written = write_report(r, tmp_path, [])
    with Image.open(tmp_path / "step_breakdown.png") as img:
        assert img.size[0] < 1000
    assert all(p.exists() for p in written)


def test_the_heatmap_stars_the_table_pick():
    """The heatmap starred the fastest D at each batch while the table picks, within
    TIE_TOLERANCE of the fastest, the fewest verified tokens: on llama-3.1-8b / H100 with EAGLE-3
    alone they differed at some batch sizes, and for a tree a longer D with fewer nodes can be the
    pick (a review of 2026-12-04: eagle3-tree starred D = 6 at B = 8 where the table says 7). Now
    the star sits on the table's D wherever the table speculates, and nowhere else."""
    from speedplan.report.data import figure_set

    for mechs in (["eagle3"], ["eagle3-tree"]):
        r = sweep("llama-3.1-8b", "h100-sxm", mechs, batches=[1, 2, 4, 8, 16, 32, 64, 128], draft_lens=range(0, 9))
        heat = figure_set(r, 4096).heatmap
        batches, drafts, _ = heat["grids"][mechs[0]]
        starred = {b: drafts[k] for b, k in zip(batches, heat["stars"][mechs[0]]) if k >= 0}
        best = r.best.set_index("batch")
        assert starred == {b: int(best.loc[b, "draft_len"]) for b in batches
                           if b in best.index and best.loc[b, "mechanism"] == mechs[0]}  # B = 128 fits nowhere
        rows = r.frame[r.frame.mechanism == mechs[0]]
        fastest = {b: int(g.loc[g.speedup.idxmax(), "draft_len"]) for b, g in rows.groupby("batch")}
        assert any(fastest[b] != d for b, d in starred.items()), mechs  # where the old star (the fastest D) was elsewhere


def test_a_cell_that_fits_at_a_shorter_context_only_is_named_as_not_planned():
    """--context 1024,8192 --batch 1,8,64: B = 64 fits at 1024 and not at 8192, and that cell
    dropped out of the table and the plans without a word (an audit of 2026-12-04)."""
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 8, 64], [0, 3], contexts=[1024, 8192])
    assert not r.frame.query("batch == 64 and context == 8192").feasible.any()
    line = next(x for x in render_summary(r).splitlines() if x.startswith("not planned"))
    assert "at context 8192, B = 64 nothing fits in memory (at a shorter context it does)" in line
    assert "context 1024" not in line


def test_a_model_named_in_emoji_draws_without_a_warning(tmp_path):
    """A config folder named 'ünicode🙂' wrote two matplotlib 'Glyph 128578 missing' warnings to
    stderr on an otherwise clean run (an audit of 2026-12-04): the glyph is a box in the title."""
    import warnings

    folder = tmp_path / "ünicode🙂"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}))
    r = sweep(str(folder), "h100-sxm", ["ngram"], [1, 8], [0, 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_report(r, tmp_path, [])
    assert not [w for w in caught if "Glyph" in str(w.message)], [str(w.message) for w in caught]
    assert (tmp_path / "pareto.png").exists()


def test_the_slo_pick_says_when_the_pricing_engine_cannot_run_it():
    """--min-tokens-per-user 300 on the default picked eagle3-tree under the vllm profile without
    saying vLLM cannot run it (the table's own note said so; the SLO line did not)."""
    from speedplan.report.summary import slo_line

    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3", "eagle3-tree"], [1, 8, 64], range(0, 9), min_tokens_per_user=300)
    assert r.slo_pick["mechanism"] == "eagle3-tree"
    assert "(vLLM cannot run eagle3-tree: the best any mechanism reaches under its profile)" in slo_line(r)
    chain = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 8, 64], range(0, 9), min_tokens_per_user=300)
    assert chain.slo_pick["mechanism"] == "eagle3" and "cannot run" not in slo_line(chain)


def test_the_sglang_cap_is_named_wherever_a_plan_runs_fewer_requests(tmp_path):
    """SGLang runs at most 48 requests at once with speculative decoding: sweep.csv said running 48 at
    B = 64, but schedule.csv and recommendations.json said runs_at_batch 64 and the terminal and
    report.html said nothing (a new user's walkthrough, 2026-12-04)."""
    import json

    import pandas as pd

    from speedplan.plan.engine_plan import plan_engines
    from speedplan.plan.sweep import sweep
    from speedplan.report.folder import write_outputs
    from speedplan.report.summary import engine_plan_lines

    result = sweep("qwen3-8b", "h200-sxm", ["eagle3"], batches=[32, 64], contexts=[8192])
    plans = plan_engines(result, engines="sglang,vllm")
    write_outputs(result, tmp_path / "r", plans=plans)
    schedule = pd.read_csv(tmp_path / "r" / "schedule.csv").set_index(["engine", "batch"])
    assert schedule.loc[("sglang", 64), "running"] == 48 and schedule.loc[("sglang", 64), "runs_at_batch"] == 64
    assert schedule.loc[("vllm", 64), "running"] == 64 and schedule.loc[("sglang", 32), "running"] == 32
    recs = json.loads((tmp_path / "r" / "recommendations.json").read_text())["engines"]
    assert [r["running"] for r in recs["sglang"]["per_batch"]] == [32, 48]
    line = next(x for x in engine_plan_lines(plans) if x.lstrip().startswith("sglang"))
    assert "from B=64 a step runs 48 requests, the engine's cap with speculative decoding" in line
    assert "48 (the engine&#x27;s cap with speculative decoding" in (tmp_path / "r" / "report.html").read_text()


def test_an_slo_nothing_reaches_names_the_most_any_configuration_reaches():
    """"no feasible configuration reaches it" left the user guessing how far off the SLO was (a new
    user's walkthrough, 2026-12-04)."""
    from speedplan.plan.sweep import sweep
    from speedplan.report.summary import slo_line

    result = sweep(mechanisms=["eagle3"], batches=[1, 8], min_tokens_per_user=5000)
    top = result.frame[result.frame["feasible"]]["tokens_per_s_per_user"].max()
    assert slo_line(result).startswith(f"SLO pick (>= 5000 tokens/s/user): no feasible configuration reaches it; "
                                       f"the most is {top:.1f} tokens/s/user (eagle3 D=")
