"""Engine plans where a launch holds fewer sequences than offered: priced at the most it holds."""

from __future__ import annotations

import pytest

from speedplan.plan.engine_plan import plan_engines
from speedplan.plan.sweep import sweep


def test_a_loaded_drafter_keeps_its_memory_at_d_0():
    """At B = 14 plain decoding of llama-3.1-8b fits 32k-token contexts on one H100 and EAGLE-3
    does not (its head and cache take the last GB: 0.9 of the 85.5 GB the driver reports is 77.0 GB;
    the weights are 16.1 GB and a sequence 4.30 GB, 14.2 sequences; with the head, 16.9 GB and 4.43
    GB, 13.6). Setting D = 0 at B = 14 does not unload the head, so a schedule cannot win that cell
    back by switching off there (until 2026-12-03 the vLLM plan went D 7 7 0 7 for B = 1, 8, 13, 16
    to do just that, when the datasheet's 80 GB made it B = 13). The engine runs the 13 sequences
    that fit and the others wait: the cell gets the plan's tokens/s/GPU with 13 (until 2026-12-04 it
    got 0, so with few batch sizes swept "off" won plans it should lose; then, until later that day,
    B = 8's, the largest swept batch that fitted)."""
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [1, 8, 14, 16], [0, 3, 7], contexts=[1024, 32768])
    f = r.frame.set_index(["mechanism", "batch", "context"])
    assert f.loc[("none", 14, 32768), "feasible"].all() and not f.loc[("eagle3", 14, 32768), "feasible"].any()
    plan = plan_engines(r, engines=["vllm"])["vllm"]
    rows = plan.rows.set_index(["batch", "context"])
    assert plan.mechanism == "eagle3" and rows.loc[(14, 1024), "draft_len"] > 0
    capped = rows.loc[(14, 32768)]
    assert capped["runs_at_batch"] == 13 and rows.loc[(14, 1024), "runs_at_batch"] == 14
    # the same setting swept at 13 sequences fits and makes what the capped cell is priced at
    at13 = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], [13, 14], [int(capped["draft_len"])], contexts=[32768]).frame
    own = at13[(at13.mechanism == "eagle3")].set_index("batch")
    assert own.loc[13, "feasible"] and not own.loc[14, "feasible"]
    assert capped["tokens_per_s_per_gpu"] == pytest.approx(own.loc[13, "tokens_per_s_per_gpu"], rel=1e-9)
    plain14 = float(f.loc[("none", 14, 32768), "tokens_per_s_per_gpu"])
    assert capped["speedup"] == pytest.approx(capped["tokens_per_s_per_gpu"] / plain14)
    assert capped["speedup"] > 0 and 0 <= capped["loss_vs_best"] < 1
    assert capped["best_speedup"] >= capped["speedup"] * (1 - 1e-12)
    from speedplan.report.html import _engine_sections  # the report says why

    assert "runs 13 sequences, the most that fit with the drafter loaded" in "".join(_engine_sections({"vllm": plan}))


def test_the_terminal_names_every_batch_a_capped_launch_is_priced_as():
    """Two contexts cap the launch at different batch sizes (13 sequences of 32k tokens, 27 of
    16k; plain decoding holds 14 and 28 in 0.9 of an H100's 85.5 GB): the terminal named only the
    first capped row's batch (B=14) for both; then only the first context's (B=14 at 32k), not
    that 16k sequences are held short from B=28."""
    from speedplan import render_summary

    from tests._heads import long_heads

    # a head that holds 32k positions (the published one holds 2,048, past which vLLM's V1 runner drafts nothing)
    r = sweep("llama-3.1-8b", "h100-sxm", long_heads("eagle3"), (1, 8, 13, 14, 27, 28), (0, 3, 7),
              contexts=[16384, 32768])
    plans = plan_engines(r, engines=["vllm"])
    rows = plans["vllm"].rows.set_index(["batch", "context"])
    assert rows.loc[(14, 32768), "runs_at_batch"] == 13 and rows.loc[(28, 16384), "runs_at_batch"] == 27
    line = next(x for x in render_summary(r, plans=plans).splitlines() if x.startswith("  vllm"))
    assert "from B=14 at context 32768, B=28 at context 16384 its launch does not hold every sequence" in line
    assert "it runs the most its setting holds at its context (13, 27), priced so (the rest wait)" in line


def test_a_launch_that_holds_fewer_sequences_still_beats_switching_off():
    """70B on 4 H100s, EAGLE-3 and a 1B draft model, B = 1, 64, 119, 121, 124: EAGLE-3's launch
    holds 120 sequences in vLLM's 0.9 of the 85.5 GB each H100 reports, plain decoding 124 (weights
    35.3 GB, 0.34 GB a sequence: 124.2). With such batch sizes scored 0 (before 2026-12-04, when
    they were B = 106 and 109 of the datasheet's 80 GB), vLLM's and TensorRT-LLM's plans were "off",
    losing 62.6% and 64.6% at B = 1; the engine runs 120 with EAGLE-3 at about 1.6x plain decoding's
    tokens/s/GPU, so the plan keeps EAGLE-3 and loses nothing. TensorRT-LLM's memory rule (the
    weights plus 0.9 of the memory free after them) holds all 124 (since 2026-12-04; before, every
    engine had vLLM's 0.9 of the device)."""
    r = sweep("llama-3.1-70b", "h100-sxm", ["eagle3", "draft-model:llama-3.2-1b"], batches=(1, 64, 119, 121, 124),
              draft_lens=(0, 2, 4), tp=4)
    plans = plan_engines(r, engines=["vllm", "trtllm"])
    rows = plans["vllm"].rows.set_index("batch")
    assert plans["vllm"].mechanism == "eagle3" and plans["vllm"].objective == pytest.approx(1.0)
    assert list(rows["runs_at_batch"]) == [1, 64, 119, 120, 120] and (rows["speedup"] > 1.5).all()
    assert (rows["loss_vs_best"] < 1e-9).all() and (rows["loss_vs_any"] < 1e-9).all()
    trt = plans["trtllm"].rows
    assert plans["trtllm"].mechanism == "eagle3" and (trt["runs_at_batch"] == trt["batch"]).all()
    assert (trt["speedup"] > 1.5).all()
    # the serving files' comment tables say which rows run as fewer sequences (they showed plain speedups)
    from speedplan import render_serving_configs, serving_plans

    files = render_serving_configs(serving_plans(r, plans))
    for name, expect in (("vllm_serve.sh", ["121", "124"]), ("trtllm_extra_llm_api_options.yaml", [])):
        table = [line for line in files[name].splitlines() if line.startswith("#  ") and line[3:8].strip().isdigit()]
        capped = [line.split()[1] for line in table if "(runs 120 sequences, the most that fit" in line]
        assert capped == expect, (name, table)


def test_sweeping_more_draft_lengths_cannot_make_a_plan_worse():
    """Each setting that does not fit a cell runs the most sequences that setting holds (a review of 2026-12-04: with the fit decided per drafter, D = 8 scored 0 at B = 12,
    context 27,192, once D = 1 fitted there, and SGLang's plan fell from D = 8, J = 1, to D = 1,
    J = 0.83, when D = 1 was added to the sweep)."""
    plans = []
    for draft_lens in ((0, 8), (0, 1, 8)):
        r = sweep("llama-3.1-8b", "h100-sxm", ["draft-model:llama-3.2-1b"], batches=(1, 8, 14), draft_lens=draft_lens,
                  contexts=[27192])
        plans.append(plan_engines(r, engines=["sglang"])["sglang"])
    assert plans[1].tokens_per_s_per_gpu >= plans[0].tokens_per_s_per_gpu * (1 - 1e-9)
    rows = plans[1].rows.set_index("batch")
    # B = 14 (B = 12 of the review, on the datasheet's 80 GB): D = 8 holds 11 sequences there under SGLang's
    # memory rule (0.830 of the 85.5 GB an H100 reports, 71.0 GB: weights 18.5 GB, 4.46 GB a sequence, 11.8);
    # 13 under vLLM's 0.9 (77.0 GB: 13.1), the sweep's own, below
    assert rows.loc[14, "draft_len"] == 8 and rows.loc[14, "runs_at_batch"] == 11
    at = sweep("llama-3.1-8b", "h100-sxm", ["draft-model:llama-3.2-1b"], batches=(13, 14), draft_lens=(8,),
               contexts=[27192]).frame.query("mechanism != 'none'").set_index("batch")
    assert at.loc[13, "feasible"] and not at.loc[14, "feasible"]


def test_a_launch_that_holds_fewer_is_priced_at_the_most_it_holds_not_at_a_swept_batch():
    """Swept at B = 1, 64, 121 only, 70B on 4 H100s with EAGLE-3 holds 120 sequences at B = 121
    (the sweep's own memory model says 120 fit and 121 do not, in 0.9 of the 85.5 GB each H100
    reports; 105 and 106 of the datasheet's 80 GB): the plan prices that cell at 120 sequences, not
    at B = 64, the largest swept batch that fits (24% fewer tokens/s/GPU)."""
    from speedplan.plan.capacity import Capacity

    r = sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], batches=(1, 64, 121), draft_lens=(0, 2), tp=4)
    rows = plan_engines(r, engines=["vllm"])["vllm"].rows.set_index("batch")
    assert rows.loc[121, "draft_len"] == 2 and rows.loc[121, "runs_at_batch"] == 120
    direct = sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], batches=(64, 120, 121), draft_lens=(2,), tp=4).frame
    own = direct[direct.mechanism == "eagle3"].set_index("batch")
    assert own.loc[120, "feasible"] and not own.loc[121, "feasible"]
    assert rows.loc[121, "tokens_per_s_per_gpu"] == pytest.approx(own.loc[120, "tokens_per_s_per_gpu"], rel=1e-9)
    assert rows.loc[121, "tokens_per_s_per_gpu"] > 1.25 * own.loc[64, "tokens_per_s_per_gpu"]
    # D = 0 in that launch holds what its best-fitting setting holds, priced as plain decoding of that many
    cap = Capacity(r)
    plain = direct[direct.mechanism == "none"].set_index("batch")
    assert cap.plain_throughput("eagle3", False, [120], [4096])[0] == pytest.approx(plain.loc[120, "tokens_per_s_per_gpu"])
    assert list(cap.most_sequences("eagle3", 2, 3, [121, 64, 2], [4096] * 3)) == [120, 63, 1]  # at most B - 1
