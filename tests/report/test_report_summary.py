"""The terminal summary: its table, provenance, plan lines, and what it says is not planned or cannot run."""

from __future__ import annotations

from dataclasses import replace

from speedplan.plan.sweep import sweep
from speedplan.report.summary import provenance, render_summary
from tests.report._report_helpers import MEASURED, SMALL, small_sweep  # noqa: F401 (the fixture `result`)


def test_summary_lists_every_batch_and_provenance(result):
    text = render_summary(result)
    lines = text.splitlines()
    table = lines[2:2 + len(result.best)]
    assert [int(line.split()[0]) for line in table] == list(result.best["batch"])
    for line, row in zip(table, result.best.itertuples()):
        tree = row.verify_tokens > row.draft_len + 1  # a tree's nodes follow its name: "eagle-tree (32 nodes)"
        cells = line.replace(f" ({row.verify_tokens - 1} nodes)", "").split() if tree else line.split()
        assert tree == (f"{row.mechanism} ({row.verify_tokens - 1} nodes)" in line)
        assert cells[1:3] == [row.mechanism, str(row.draft_len)]
        assert cells[3] == f"{row.acceptance_length:.2f}"
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
    whole = render_summary(result, max_rows=11)  # hiding one row would cost the note's line: none hidden
    assert "rows shown" not in whole and len(whole.splitlines()) == len(text.splitlines()) + 12 - 5 - 1
    assert "(10 of 12 rows shown" in render_summary(result, max_rows=10)


def test_measured_profile_is_named_with_its_fallback_rows(result):
    frame = result.frame.assign(cost_source="profile")
    frame.loc[frame.index[:3], "cost_source"] = "mixed"
    measured = replace(result, frame=frame, meta={**result.meta, "cost_origin": "measured"})
    assert provenance(measured).startswith(
        f"latency: measured profile h100-sxm (roofline fallback for some ops in 3 of {len(frame)} rows")


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

    r = speedplan.sweep(mechanisms=["eagle3-tree", "eagle3"], batches=(1, 8), draft_lens=(0, 4, 8), contexts=[2000])
    text = render_summary(r)  # context 2000: within the published head's 2,048 positions (plan/drafter_positions.py)
    assert "note: vLLM cannot run eagle3-tree" in text
    eagle1 = speedplan.sweep(mechanisms=["eagle"], batches=(1, 8), draft_lens=(0, 2, 4), engine="trtllm")
    files = speedplan.render_serving_configs(speedplan.serving_plans(eagle1, speedplan.plan_engines(eagle1)))
    assert "it cannot run eagle, which the sweep also priced" in files["trtllm_serve.sh"]


def test_a_cell_that_fits_at_a_shorter_context_only_is_named_as_not_planned():
    """--context 1024,8192 --batch 1,8,64: B = 64 fits at 1024 and not at 8192, and that cell
    dropped out of the table and the plans without a word (an audit of 2026-12-04)."""
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 8, 64], [0, 3], contexts=[1024, 8192])
    assert not r.frame.query("batch == 64 and context == 8192").feasible.any()
    line = next(x for x in render_summary(r).splitlines() if x.startswith("not planned"))
    assert "at context 8192, B = 64 nothing fits in memory (at a shorter context it does)" in line
    assert "context 1024" not in line


def test_the_slo_pick_is_one_the_pricing_engine_runs():
    """--min-tokens-per-user 300 on the default picked eagle3-tree under the vllm profile, which
    vLLM cannot run (a walkthrough: a vLLM user got a pick they cannot deploy, in the terminal and
    recommendations.json). The pick is now among what the engine runs, and the line names the
    better one it cannot run; SGLang, which runs trees, keeps the tree."""
    from speedplan.plan.pick import slo_pick
    from speedplan.report.summary import slo_line
    from tests._heads import long_heads

    # a head that holds context 4096 (the published one holds 2,048 positions, past which vLLM's V1 runner drafts nothing)
    both = long_heads("eagle3", "eagle3-tree")
    r = sweep("llama-3.1-8b", "h100-sxm", both, [1, 8, 64], range(0, 9), min_tokens_per_user=300)
    anyone = slo_pick(r.frame, 300)
    assert anyone["mechanism"] == "eagle3-tree" and r.slo_pick["mechanism"] == "eagle3"
    assert r.slo_pick["tokens_per_s_per_user"] >= 300 and r.slo_pick["tokens_per_s_per_gpu"] < anyone["tokens_per_s_per_gpu"]
    assert (f"; among what vLLM runs (the best of any mechanism, eagle3-tree D={int(anyone['draft_len'])} at "
            f"B={int(anyone['batch'])}, gives {anyone['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU: vLLM cannot run it)"
            in slo_line(r))
    chain = sweep("llama-3.1-8b", "h100-sxm", both[:1], [1, 8, 64], range(0, 9), min_tokens_per_user=300)
    assert chain.slo_pick["mechanism"] == "eagle3" and "cannot run" not in slo_line(chain)
    sglang = sweep("llama-3.1-8b", "h100-sxm", both, [1, 8, 64], range(0, 9), min_tokens_per_user=300, engine="sglang")
    assert sglang.slo_pick["mechanism"] == "eagle3-tree" and "cannot run" not in slo_line(sglang)
    # only the tree reaches it: nothing vLLM runs does, and the line says which would
    high = sweep("llama-3.1-8b", "h100-sxm", both, [1, 8, 64], range(0, 9), min_tokens_per_user=380)
    assert high.slo_pick is None
    assert slo_line(high).startswith("SLO pick (>= 380 tokens/s/user): nothing vLLM runs reaches it (eagle3-tree D=")
    assert "; the most is " in slo_line(high) and "(eagle3 D=" in slo_line(high)


def test_an_slo_nothing_reaches_names_the_most_any_configuration_reaches():
    """"no feasible configuration reaches it" left the user guessing how far off the SLO was (a new
    user's walkthrough, 2026-12-04)."""
    from speedplan.plan.sweep import sweep
    from speedplan.report.summary import slo_line

    result = sweep(mechanisms=["eagle3"], batches=[1, 8], contexts=[2000], min_tokens_per_user=5000)
    top = result.frame[result.frame["feasible"]]["tokens_per_s_per_user"].max()
    assert slo_line(result).startswith(f"SLO pick (>= 5000 tokens/s/user): no feasible configuration reaches it; "
                                       f"the most is {top:.1f} tokens/s/user (eagle3 D=")


def test_the_plan_line_says_when_sglangs_cap_makes_speculation_lose():
    """DeepSeek-V3 MTP under SGLang: at B = 256 a speculative step runs 48 requests (SGLang's default
    cap) while plain decoding runs all 256, and the plan was 0.43x of plain there with only "worst
    loss 56.7%" to say so (a user walkthrough). The line now says the cap does it and the way out;
    the default sweep's SGLang plan, capped but not slower, says nothing of it."""
    from speedplan.plan.engine_plan import plan_engines
    from speedplan.report.plan_lines import engine_plan_lines

    r = sweep("deepseek-v3", "h200-sxm", ["mtp"], [1, 2, 4, 8, 16, 32, 64, 128, 256], range(0, 6), tp=8, engine="sglang")
    plans = plan_engines(r, engines="sglang")
    line = next(x for x in engine_plan_lines(plans) if x.lstrip().startswith("sglang"))
    slow = sorted(plans["sglang"].rows.query("speedup < 1 and batch > 48")["batch"].unique())
    assert slow and slow[-1] == 128  # B = 256's bf16 KV cache does not fit on 8 H200s (ModelSpec.kv_dtype)
    assert (f"; at B = {', '.join(map(str, slow))} that cap makes it slower than plain decoding: set "
            "--max-running-requests to run more (not priced)") in line
    from tests._heads import long_heads

    default = sweep("llama-3.1-8b", "h100-sxm", long_heads("eagle3"), [1, 64, 128], range(0, 5), engine="sglang")
    line = next(x for x in engine_plan_lines(plan_engines(default, engines="sglang")) if x.lstrip().startswith("sglang"))
    assert "a step runs 48 requests" in line and "slower than plain decoding" not in line
