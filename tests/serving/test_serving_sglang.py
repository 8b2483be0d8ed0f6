"""SGLang serving configs: launch flags, the adaptive per-bucket config and the 48-request running cap."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from speedplan import serving
from speedplan.serving import ServingPlan
from speedplan.serving.sglang import render as render_sglang
from tests.serving._helpers import SGLANG_FLAGS, flag_values, plan, plan_d, sglang_lookup, shell_command


# ---- SGLang ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["ngram", "draft-model", "eagle", "eagle3", "eagle-tree", "eagle3-tree", "mtp"])
def test_sglang_flags_are_checked_names(mechanism):
    chain_head = mechanism in ("eagle", "eagle3", "mtp")  # a hand-made plan of these goes adaptive (next test)
    text = render_sglang(plan(mechanism, mode="fixed") if chain_head else plan(mechanism))["sglang_launch.sh"]
    argv = shell_command(text)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    flags = flag_values(argv)
    assert set(flags) <= SGLANG_FLAGS
    expected = {"ngram": "NGRAM", "draft-model": "STANDALONE", "eagle": "EAGLE", "eagle-tree": "EAGLE",
                "eagle3": "EAGLE3", "eagle3-tree": "EAGLE3", "mtp": "NEXTN"}
    assert flags["--speculative-algorithm"] == expected[mechanism]
    tokens = int(flags["--speculative-num-draft-tokens"])
    if mechanism.endswith("-tree"):
        steps, topk = int(flags["--speculative-num-steps"]), int(flags["--speculative-eagle-topk"])
        assert (steps, topk, tokens) == (5, 4, 17)
    else:
        assert tokens == 4 + 1  # the reference D plus the root token
    # a fixed launch of a varying plan says so, and why
    assert ("this plan is the fixed launch (--speculative-adaptive could vary it" if chain_head
            else "no per-batch-size option") in text
    if chain_head:  # the same plan made by hand (no mode) runs adaptive, since its D varies
        assert "sglang_adaptive_config.json" in render_sglang(plan(mechanism))


def test_sglang_adaptive_config_pins_the_plan_per_bucket():
    """--speculative-adaptive with one candidate per bucket: SGLang's routing gives the plan's D
    at every planned batch (CUDA-graph batch sizes include them) and turns drafting off at D = 0.
    Keys are running batches: the launch leaves --max-running-requests unset, so SGLang runs at most 48
    and the planned B = 128 reaches the bucket keyed 48 (a key of 128 was never reached:
    tests/serving/test_sglang_buckets.py); without a cap the keys are the planned batches."""
    p = plan("eagle3", schedule=((1, 6), (8, 4), (32, 2), (128, 0)), mode="adaptive")
    files = render_sglang(p)
    config = json.loads(files["sglang_adaptive_config.json"])
    assert config == {"1": {"candidate_steps": [6]}, "8": {"candidate_steps": [4]},
                      "32": {"candidate_steps": [2]}, "48": {"candidate_steps": [0]}}
    graphs = [1, 2, 4, 8, 16, 24, 32, 64, 128, 256]
    for batch in (1, 8, 32, 128):
        assert sglang_lookup(config, min(batch, 48), graphs) == plan_d(p, batch)
    uncapped = json.loads(render_sglang(replace(p, spec_max_running=0.0))["sglang_adaptive_config.json"])
    assert uncapped == {**{k: v for k, v in config.items() if k != "48"}, "128": {"candidate_steps": [0]}}
    for batch in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        assert sglang_lookup(uncapped, batch, graphs) == plan_d(p, batch)
    flags = flag_values(shell_command(files["sglang_launch.sh"]))
    assert flags["--speculative-adaptive-config"] == "sglang_adaptive_config.json"
    assert flags["--speculative-eagle-topk"] == "1"
    # speculative_hook.py: --speculative-num-steps must be one of the candidates
    assert int(flags["--speculative-num-steps"]) in {s for v in config.values() for s in v["candidate_steps"]}
    assert "--speculative-adaptive" in shell_command(files["sglang_launch.sh"])


def test_sglang_says_when_its_default_running_cap_priced_the_plan():
    """SGLang runs at most 48 requests with speculation unless --max-running-requests is set, D = 0
    buckets of a speculative launch included: a plan with batch sizes above 48 says so, one whose
    batch sizes stop at 48 does not."""
    capped = render_sglang(plan("eagle3", schedule=((1, 4), (64, 2))))["sglang_launch.sh"]
    assert "at most 48 requests" in capped and "--max-running-requests" in capped
    assert "--max-running-requests" not in shell_command(capped)  # the launch keeps SGLang's default
    off_above = render_sglang(plan("eagle3", schedule=((1, 4), (32, 2), (64, 0))))["sglang_launch.sh"]
    assert "at most 48 requests" in off_above and "D = 0 buckets included" in off_above
    below = render_sglang(plan("eagle3", schedule=((1, 4), (32, 2), (48, 0))))["sglang_launch.sh"]
    assert "at most 48 requests" not in below


def test_sglang_adaptive_is_only_for_eagle_and_nextn_chains():
    """SGLang 0.5.23's adaptive_unsupported_reason takes EAGLE and EAGLE3 with topk 1; NEXTN is EAGLE by
    then (speculative_hook.py _resolve_speculative_algorithm_alias), so an MTP chain runs adaptive too."""
    for mechanism in ("draft-model", "eagle3-tree", "ngram"):
        files = render_sglang(plan(mechanism, mode="adaptive"))
        assert "sglang_adaptive_config.json" not in files and "--speculative-adaptive" not in files["sglang_launch.sh"]
    files = render_sglang(plan("mtp", mode="adaptive"))
    flags = flag_values(shell_command(files["sglang_launch.sh"]))
    assert flags["--speculative-algorithm"] == "NEXTN" and "--speculative-adaptive" in flags
    assert flags["--speculative-eagle-topk"] == "1" and "sglang_adaptive_config.json" in files
    assert serving.sglang.support("mtp", 1).modes[-1].name == "adaptive"


def test_sglang_medusa_is_reported_unsupported():
    text = render_sglang(plan("medusa"))["sglang_launch.sh"]
    assert "sglang.launch_server" not in text and "exit 1" in text


def test_sglang_launch_follows_the_cap_its_plan_was_priced_with():
    """A plan priced with spec_max_running other than SGLang's default 48 launches with that cap
    (0: every planned request); priced with 48 it keeps the default and says so."""
    p = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=3, schedule=((1, 3), (64, 2)),
                    spec_max_running=48.0)
    argv = shell_command(render_sglang(p)["sglang_launch.sh"])
    assert "--max-running-requests" not in argv
    assert "without --max-running-requests SGLang runs at most 48" in render_sglang(p)["sglang_launch.sh"]
    for cap, flag in ((0.0, "64"), (32.0, "32"), (96.0, "96")):
        argv = shell_command(render_sglang(replace(p, spec_max_running=cap))["sglang_launch.sh"])
        assert argv[argv.index("--max-running-requests") + 1] == flag


def test_sglang_cap_note_names_the_profile_that_priced_the_plan():
    """A plan priced with a calibrated SGLang profile (`--engine my-sglang.json`) whose cap is SGLang's 48
    named the shipped profile in the cap note ("engine profile sglang: spec_max_running"), and a
    hand-made plan (priced by nothing) said its batch sizes above 48 "were priced that way" (an audit
    of 2026-12-04)."""
    p = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=3, schedule=((1, 3), (64, 2)),
                    spec_max_running=48.0, priced_by="my-sglang: 2 of 16 terms fitted to 4 rows at B = 1–64")
    text = render_sglang(p)["sglang_launch.sh"]
    assert "were priced that way (the others wait, engine profile my-sglang: spec_max_running)" in text
    assert "engine profile sglang:" not in text
    shipped = render_sglang(replace(p, priced_by="sglang: 7 of 16 terms fitted"))["sglang_launch.sh"]
    assert "(the others wait, engine profile sglang: spec_max_running)" in shipped
    hand = render_sglang(replace(p, priced_by=""))["sglang_launch.sh"]
    assert "without --max-running-requests SGLang runs at most 48" in hand and "priced that way" not in hand
