"""vLLM serving configs: the speculative-config JSON, its per-batch-size ranges and the serve script's notes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from speedplan import serving
from speedplan.serving.plan import OPEN_END_BATCH
from speedplan.serving.vllm import render as render_vllm
from tests.serving._helpers import (VLLM_KEYS, VLLM_METHODS, _config_folder, flag_values, plan, plan_d,
                                    shell_command, vllm_lookup)


# ---- vLLM --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["ngram", "draft-model", "eagle", "eagle3", "mtp"])
def test_vllm_json_keys_and_schedule(mechanism):
    p = plan(mechanism)
    files = render_vllm(p)
    cfg = json.loads(files["vllm_speculative_config.json"])
    assert set(cfg) <= VLLM_KEYS and cfg["method"] in VLLM_METHODS
    assert cfg["num_speculative_tokens"] == 5  # the schedule's max D, not the reference D
    ranges = cfg["num_speculative_tokens_per_batch_size"]
    # vLLM's validator: 3-item entries, first range starts at 1, sorted and non-overlapping, K >= 0.
    assert all(len(r) == 3 for r in ranges)
    assert ranges[0][0] == 1 and ranges[-1][1] == OPEN_END_BATCH
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:]))
    for batch in (1, 7, 8, 31, 32, 100, 128, 4096):
        assert vllm_lookup(ranges, cfg["num_speculative_tokens"], batch) == plan_d(p, batch)
    argv = shell_command(files["vllm_serve.sh"])
    target = "deepseek-ai/DeepSeek-V3" if mechanism == "mtp" else "meta-llama/Llama-3.1-8B-Instruct"
    assert argv[:3] == ["vllm", "serve", target]
    assert json.loads(flag_values(argv)["--speculative-config"]) == cfg
    expected = {"ngram": None, "draft-model": "meta-llama/Llama-3.2-1B-Instruct", "mtp": None,
                "eagle": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "eagle3": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
    assert cfg.get("model") == expected[mechanism]
    assert "context-aware" in files["vllm_serve.sh"]  # says why it has no (batch, context) entries


def test_vllm_eagle_is_eagle1_and_eagle3_is_eagle3():
    """Price what you emit: `eagle` is an EAGLE-1/2 head (method eagle), `eagle3` an EAGLE-3 head."""
    assert json.loads(render_vllm(plan("eagle"))["vllm_speculative_config.json"])["method"] == "eagle"
    assert json.loads(render_vllm(plan("eagle3"))["vllm_speculative_config.json"])["method"] == "eagle3"


def test_vllm_flat_schedule_has_no_ranges_and_no_schedule_keeps_reference_d():
    flat = render_vllm(plan("eagle3", schedule=((1, 4), (64, 4))))
    assert "num_speculative_tokens_per_batch_size" not in json.loads(flat["vllm_speculative_config.json"])
    bare = json.loads(render_vllm(plan("eagle3", schedule=()))["vllm_speculative_config.json"])
    assert bare == {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                    "num_speculative_tokens": 4}


def test_vllm_draft_tp_is_the_one_planned():
    cfg = json.loads(render_vllm(plan("draft-model", tp=4, model="llama-3.1-70b"))["vllm_speculative_config.json"])
    assert cfg["draft_tensor_parallel_size"] == 4


@pytest.mark.parametrize("mechanism, words", [("eagle-tree", "#42121"), ("eagle3-tree", "#42121"),
                                              ("medusa", "no medusa")])
def test_vllm_reports_what_it_cannot_run(mechanism, words):
    files = render_vllm(plan(mechanism))
    assert list(files) == ["vllm_serve.sh"]
    assert words in files["vllm_serve.sh"] and "exit 1" in files["vllm_serve.sh"]
    assert "vllm serve" not in files["vllm_serve.sh"]


def test_unknown_target_gets_placeholder_head():
    """Named by the model's folder or repo name, not its whole path (a walkthrough found
    <path-to-eagle3-head-for-/tmp/walk/nemo> in every launch file)."""
    cfg = json.loads(render_vllm(plan("eagle3", model="/models/my-llama"))["vllm_speculative_config.json"])
    assert cfg["model"] == "<path-to-eagle3-head-for-my-llama>"
    cfg = json.loads(render_vllm(plan("eagle", model="/models/my-llama/config.json"))["vllm_speculative_config.json"])
    assert cfg["model"] == "<path-to-eagle-head-for-my-llama>"
    cfg = json.loads(render_vllm(plan("eagle3", model="acme/Llama-Next-9B"))["vllm_speculative_config.json"])
    assert cfg["model"] == "<path-to-eagle3-head-for-Llama-Next-9B>"


def test_vllm_mtp_note_says_lower_acceptance_only_where_the_published_default_lowers_it():
    """The note on MTP positions past the model's layers said "speedplan priced those positions with a
    lower acceptance" under `--acceptance mtp:alpha=0.8` too, which prices every position at 0.8 (an
    audit of 2026-12-04)."""
    published = plan("mtp", draft_len=3, schedule=(), sources="latency x; acceptance published: engine_measurements.csv")
    assert "priced those positions with a lower acceptance" in render_vllm(published)["vllm_serve.sh"]
    user = render_vllm(replace(published, sources="latency x; acceptance user: alpha=0.8",
                               acceptance_published=False))["vllm_serve.sh"]
    assert "lower acceptance" not in user and "with the acceptance named above, as given" in user
    # the flag comes from the sweep (meta published_acceptance), not from the wording of the sources
    from speedplan.plan.engine_plan import plan_engines, serving_plans
    from speedplan.plan.sweep import sweep

    for acceptance, published_default in ((None, True), ({"mtp": "alpha=0.8"}, False)):
        r = sweep("glm-4.7-flash", mechanisms=["mtp"], batches=[1, 8], acceptance=acceptance)
        assert serving_plans(r, plan_engines(r, engines="vllm"))["vllm"].acceptance_published is published_default


def test_vllm_mtp_past_two_layers_asks_for_a_multiple_of_them(tmp_path):
    """vLLM refuses num_speculative_tokens 3 over 2 MTP layers ("must be divisible by n_predict",
    config/speculative.py, 0.33.0): it is written as 4, the schedule holding the planned 3."""
    model = _config_folder(tmp_path, "deepseek-v3", "ds2", num_nextn_predict_layers=2)
    cfg = json.loads(render_vllm(plan("mtp", model=str(model), draft_len=3, schedule=()))["vllm_speculative_config.json"])
    assert cfg["num_speculative_tokens"] == 4
    assert cfg["num_speculative_tokens_per_batch_size"] == [[1, OPEN_END_BATCH, 3]]
    for batch in (1, 64, 4096):
        assert vllm_lookup(cfg["num_speculative_tokens_per_batch_size"], cfg["num_speculative_tokens"], batch) == 3
    one = json.loads(render_vllm(plan("mtp", draft_len=3, schedule=()))["vllm_speculative_config.json"])
    assert one == {"method": "mtp", "num_speculative_tokens": 3}  # one layer divides every K


def test_a_vllm_plan_priced_by_the_shipped_profile_says_what_it_assumes_of_the_release():
    """The shipped vllm profile describes 2025 releases (overlap_spec 0) while the file is for 0.33:
    its comments say speculation may lose less at large batches there (async scheduling with EAGLE/MTP,
    vLLM PR #31998); a plan priced by the user's calibrated file says nothing of the kind."""
    vllm = serving.engine_module("vllm")
    shipped = replace(plan("eagle3"), priced_by="vllm: 3 of 16 terms fitted to 4 rows")
    mine = replace(plan("eagle3"), priced_by="vllm: file /tmp/mine.json; 5 of 16 terms fitted to 9 rows")
    assert "describes 2025 releases" in vllm.render(shipped)["vllm_serve.sh"]
    assert "describes 2025 releases" not in vllm.render(mine)["vllm_serve.sh"]
