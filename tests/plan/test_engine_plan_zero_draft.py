"""Engine plans at D = 0: a drafter kept warm, skipped, or capped at SGLang's 48 running requests."""

from __future__ import annotations

import pytest

from speedplan.cost.forward import forward_cost
from speedplan.engine.profile import get_engine
from speedplan.plan.engine_plan import engine_pricing, plan_engines, serving_plans
from speedplan.plan.sweep import reprice, sweep
from speedplan.plan.zero_draft import ZeroDraft
from speedplan.serving import ENGINES
from tests._heads import long_heads

ZERO_DRAFT = ("zero_draft_forward", "zero_draft_logits")


def test_sglang_speculation_off_above_its_cap_still_runs_48_requests():
    """A server launched with a speculative algorithm runs at most 48 requests whatever D its
    adaptive buckets pick: its D = 0 cells above 48 deliver plain decoding of 48 requests, not of
    B (they were priced at B, a bucket no such server reaches), and lose against plain decoding
    without a drafter. (The cap alone: the profile's D = 0 step runs no drafter forward here.)"""
    cap_only = get_engine("sglang").with_terms({t: 0 for t in ZERO_DRAFT}, "test: the cap alone")
    r = sweep("llama-3.1-8b", "h100-sxm", long_heads("eagle"), [1, 8, 32, 64], acceptance="eagle:alpha=0.6",
              engine=cap_only)
    plan = plan_engines(r, engines=["sglang"])["sglang"]
    row = plan.rows.set_index("batch").loc[64]
    assert plan.mode == "adaptive" and row.draft_len == 0
    at48 = sweep("llama-3.1-8b", "h100-sxm", long_heads("eagle"), [48], [0], engine=cap_only).frame
    assert row.tokens_per_s_per_gpu == pytest.approx(at48.tokens_per_s_per_gpu.iloc[0])
    assert row.speedup == pytest.approx(48 / 64 * at48.tokens_per_s_per_gpu.iloc[0] / 48 * 64
                                        / engine_pricing(r, "sglang").frame.query("batch == 64 and mechanism == 'none'")
                                        .tokens_per_s_per_gpu.iloc[0])
    assert row.speedup < 1 and row.loss_vs_best > 0 and row.best_mechanism == "none"
    assert (plan.rows.set_index("batch").loc[[1, 8, 32], "draft_len"] > 0).all()


def _off_cell(engine, mech="eagle", batch=256):
    """vLLM-style plan on llama-3.1-8b with a weak EAGLE head, whose schedule turns drafting off
    at B = 256: that row, the plain row, and the sweep."""
    r = sweep("llama-3.1-8b", "h100-sxm", [mech], [1, 8, 64, batch], contexts=[1024],
              acceptance=f"{mech}:alpha=0.6", engine=engine)
    plan = plan_engines(r, engines=["vllm"])["vllm"]
    row = plan.rows.set_index("batch").loc[batch]
    plain = r.frame.query(f"mechanism == 'none' and batch == {batch}").iloc[0]
    return plan, row, plain, r


def test_vllm_d0_in_a_schedule_still_runs_the_drafter_forward():
    """vLLM 0.33 (Model Runner V2) runs the draft prefill over the step's tokens at K = 0, without
    logits: a D = 0 cell of a plan that loads an EAGLE head costs the plain step plus one head
    layer over B tokens (no lm_head) and one draft forward's launches; the GPU bounds that step,
    so the difference in step time is exactly that work."""
    vllm = get_engine("vllm")
    assert (vllm.zero_draft_forward, vllm.zero_draft_logits) == (1, 0)
    plan, row, plain, r = _off_cell("vllm")
    assert plan.mechanism == "eagle" and row.draft_len == 0 and plan.drafter_kept_warm
    t_zero = 256 / row.tokens_per_s_per_gpu
    mech = r.pricing[0][1].mech
    _, _, target, tp, cost = r.pricing
    head = forward_cost(cost, mech.draft, 256, 1, 1024, tp, lm_head=False).total_s
    fuse = cost.gemm(256, target.hidden, 2 * target.hidden, target.dtype).latency_us * 1e-6
    launches = vllm.launch_us * (vllm.draft_step_launches + vllm.layer_launches * 1) * 1e-6
    assert t_zero - plain.t_step_s == pytest.approx(float(head + fuse) + launches, rel=1e-6)
    assert 0.005 < row.loss_vs_best < 0.15 and row.best_mechanism == "none"
    # with logits the same forward costs more (the full 128k-token lm_head of an EAGLE-1 head)
    _, with_logits, _, _ = _off_cell(vllm.with_terms({"zero_draft_logits": 1}, "test"))
    assert with_logits.tokens_per_s_per_gpu < row.tokens_per_s_per_gpu
    # a profile whose D = 0 step runs no drafter forward prices it as plain decoding
    _, free, plain2, _ = _off_cell(vllm.with_terms({"zero_draft_forward": 0}, "test: stale drafter"))
    assert free.tokens_per_s_per_gpu == pytest.approx(plain2.tokens_per_s_per_gpu) and free.loss_vs_best == 0


def test_ngram_d0_has_no_drafter_to_keep_warm():
    """An n-gram lookup keeps no KV cache: its D = 0 cells are plain decoding under any profile."""
    plan = plan_engines(sweep("llama-3.1-8b", "h100-sxm", ["ngram"], [1, 64, 256], contexts=[1024]),
                        engines=["vllm"])["vllm"]
    assert not plan.drafter_kept_warm
    zero = plan.rows[plan.rows.draft_len == 0]
    assert len(zero) and (zero.loss_vs_best.abs() < 1e-12).all()


def test_sglang_d0_bucket_runs_the_draft_extend_with_its_logits():
    """SGLang 0.5.23 runs the draft extend with its logits at 0 steps: under its profile the D = 0
    bucket is slower than plain decoding, and slower than the same forward without logits."""
    sglang = get_engine("sglang")
    assert (sglang.zero_draft_forward, sglang.zero_draft_logits) == (1, 1)
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle"], [1, 8, 32], acceptance="eagle:alpha=0.6", engine="sglang")
    cells = r.frame.query("mechanism == 'none'").set_index(["batch", "context"]).index
    warm = ZeroDraft(r, cells).throughput("eagle")
    no_logits = ZeroDraft(reprice(r, sglang.with_terms({"zero_draft_logits": 0}, "test")), cells).throughput("eagle")
    plain = r.frame.query("mechanism == 'none'").tokens_per_s_per_gpu.to_numpy()
    assert (warm < no_logits).all() and (no_logits < plain).all()


def test_trtllm_draft_target_never_plans_d0_and_its_eagle3_keeps_warm():
    """The TensorRT-LLM builds the trtllm profile describes floor Draft_Target's draft length at 1
    (min_runtime_draft_len, _torch/speculative/utils.py @ 011d093), so its plan takes the best D >= 1
    at every batch size instead of a D = 0 it would not run (until 2026-12-05 such cells were priced
    as plain decoding); a D = 0 step of a drafter that is not run is plain decoding's own. Its Eagle3
    path keeps the head warm."""
    r = sweep("llama-3.1-70b", "h100-sxm", ["draft-model"], [1, 8, 32, 64, 128, 256], contexts=[1024],
              acceptance="draft-model:alpha=0.35", engine="trtllm", tp=4)
    plan = plan_engines(r, engines=["trtllm"])["trtllm"]
    assert plan.mechanism.startswith("draft-model") and not plan.drafter_kept_warm
    assert (plan.rows.draft_len >= 1).all() and (plan.rows.loss_vs_best > 0).any()
    cells = r.frame.query("mechanism == 'none'").set_index(["batch", "context"]).index
    assert ZeroDraft(r, cells).throughput(plan.mechanism, runs=False) is None  # skipped: plain decoding's own
    text = ENGINES["trtllm"].render(serving_plans(r, {"trtllm": plan})["trtllm"])["trtllm_serve.sh"]
    assert "min_runtime_draft_len" in text and "drafter still updates" not in text
    e3 = sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], [256], contexts=[1024], engine="trtllm", tp=4)
    warm = ZeroDraft(e3, e3.frame.query("mechanism == 'none'").set_index(["batch", "context"]).index)
    assert warm.throughput("eagle3")[0] < e3.frame.query("mechanism == 'none'").tokens_per_s_per_gpu.iloc[0]


def test_sglang_d0_above_the_cap_is_48_requests_plus_the_draft_extend():
    """The shipped SGLang profile at B = 64, 128: a D = 0 bucket runs 48 requests (the cap) and the
    draft extend over them, so both cells price alike. Its host work (4.3 ms per step, 218 µs per
    sequence, 76% overlapped) then outlasts the GPU's, which hides the draft extend: plain
    decoding of 48 requests' throughput, where at B = 8 the draft extend shows."""
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle"], [8, 64, 128], contexts=[1024], acceptance="eagle:alpha=0.6",
              engine="sglang")
    cells = r.frame.query("mechanism == 'none'").set_index(["batch", "context"]).index
    zero = ZeroDraft(r, cells)
    warm = zero.throughput("eagle")
    assert zero.kept_warm["eagle"] and warm[1] == pytest.approx(warm[2])
    cold = ZeroDraft(reprice(r, get_engine("sglang").with_terms({"zero_draft_forward": 0}, "test")), cells)
    capped = cold.throughput("eagle")  # the cap alone: plain decoding of 48 requests
    at48 = sweep("llama-3.1-8b", "h100-sxm", ["eagle"], [48], [1], contexts=[1024], engine="sglang").frame
    plain48 = at48.query("mechanism == 'none'").tokens_per_s_per_gpu.iloc[0]
    assert capped[1] == pytest.approx(plain48) and warm[0] < capped[0]
    assert warm[1:] == pytest.approx(capped[1:])
