"""A vLLM serving file with a per-batch-size schedule tells the user of a release without
dynamic speculative decoding what to do instead; a flat plan (one num_speculative_tokens, which
every release takes) does not."""

from __future__ import annotations

from speedplan.serving import ServingPlan
from speedplan.serving.vllm import render


def _serve(schedule) -> str:
    p = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=4, schedule=schedule, hardware="h100")
    return render(p)["vllm_serve.sh"]


def test_a_schedule_says_what_a_release_without_it_should_run():
    text = _serve(((1, 4), (16, 3), (64, 2)))
    assert "num_speculative_tokens_per_batch_size" in text
    assert "vLLM releases before dynamic speculative decoding (vLLM PR #32374)" in text
    assert "set num_speculative_tokens to the D planned above for the batch size you serve most" in text


def test_a_flat_plan_needs_no_fallback():
    text = _serve(((1, 4),))
    assert "fixed num_speculative_tokens = 4" in text and "PR #32374" not in text
