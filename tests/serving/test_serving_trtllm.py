"""TensorRT-LLM serving configs: the extra-options YAML, its draft_len_schedule and what the engine cannot run."""

from __future__ import annotations

import json

import pytest

from speedplan.serving.plan import OPEN_END_BATCH
from speedplan.serving.trtllm import render as render_trtllm
from speedplan.serving.vllm import render as render_vllm
from tests.serving._helpers import (SCHEDULE, TRTLLM_KEYS, TRTLLM_TYPES, flag_values, plan, plan_d, shell_command,
                                    trtllm_lookup)


# ---- TensorRT-LLM ------------------------------------------------------------------------------
def yaml_config(text: str) -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(text)["speculative_config"]


@pytest.mark.parametrize("mechanism", ["draft-model", "eagle3", "mtp"])
def test_trtllm_yaml_schedule_matches_plan(mechanism):
    p = plan(mechanism)
    files = render_trtllm(p)
    cfg = yaml_config(files["trtllm_extra_llm_api_options.yaml"])
    assert set(cfg) <= TRTLLM_KEYS and cfg["decoding_type"] in TRTLLM_TYPES
    schedule = cfg["draft_len_schedule"]
    # llm_args.py validator: keys >= 1, values >= 0, smallest key maps to max_draft_len, all <= it.
    assert schedule[min(schedule)] == cfg["max_draft_len"] == 5 and 1 in schedule
    assert all(k >= 1 and 0 <= v <= cfg["max_draft_len"] for k, v in schedule.items())
    floor = 1 if mechanism == "draft-model" else 0  # Draft_Target runs a 0 as 1 (min_runtime_draft_len): written so
    for batch in (1, 7, 8, 31, 32, 100, 128, 4096):  # the last planned D carries on above the last planned batch
        assert trtllm_lookup(schedule, batch) == max(plan_d(p, batch), floor)
    # above its largest key the engine runs D = 0; a plan ending in D = 2 at batch 32 was keyed up to
    # 32 and so switched speculation off above it (an audit of 2026-12-04): the open end is keyed now
    assert max(schedule) == 65536
    ends_on = yaml_config(render_trtllm(plan(mechanism, schedule=SCHEDULE[:3]))["trtllm_extra_llm_api_options.yaml"])
    assert trtllm_lookup(ends_on["draft_len_schedule"], 33) == trtllm_lookup(ends_on["draft_len_schedule"], 4096) == 2
    argv = shell_command(files["trtllm_serve.sh"])
    assert flag_values(argv)["--extra_llm_api_options"] == "trtllm_extra_llm_api_options.yaml"


def test_trtllm_draft_target_spelling_follows_the_code_and_says_so():
    text = render_trtllm(plan("draft-model"))["trtllm_extra_llm_api_options.yaml"]
    assert yaml_config(text)["decoding_type"] == "Draft_Target"
    assert "there write decoding_type DraftTarget" in text and "Invalid decoding type: Draft_Target" in text
    eagle = render_trtllm(plan("eagle3"))["trtllm_extra_llm_api_options.yaml"]
    assert "there write decoding_type Eagle" in eagle and "Invalid decoding type: Eagle3" in eagle


def test_trtllm_ngram_is_fixed():
    """NGram is not among the modes that follow draft_len_schedule (support_dynamic_draft_len)."""
    cfg = yaml_config(render_trtllm(plan("ngram"))["trtllm_extra_llm_api_options.yaml"])
    assert "draft_len_schedule" not in cfg and cfg["max_draft_len"] == 4


def test_trtllm_caps_a_rising_schedule_and_says_so():
    p = plan("eagle3", schedule=((1, 2), (16, 4), (64, 1)))
    files = render_trtllm(p)
    cfg = yaml_config(files["trtllm_extra_llm_api_options.yaml"])
    assert cfg["max_draft_len"] == 2 and max(cfg["draft_len_schedule"].values()) == 2
    assert "capped at 2" in files["trtllm_extra_llm_api_options.yaml"]
    # vLLM can express the rise, so it keeps it.
    ranges = json.loads(render_vllm(p)["vllm_speculative_config.json"])
    ranges = ranges["num_speculative_tokens_per_batch_size"]
    assert ranges == [[1, 15, 2], [16, 63, 4], [64, OPEN_END_BATCH, 1]]


def test_trtllm_eagle3_tree_uses_dynamic_tree_without_schedule():
    cfg = yaml_config(render_trtllm(plan("eagle3-tree"))["trtllm_extra_llm_api_options.yaml"])
    assert cfg == {"decoding_type": "Eagle3", "max_draft_len": 5,
                   "speculative_model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "use_dynamic_tree": True,
                   "dynamic_tree_max_topK": 4, "max_total_draft_tokens": 16}


@pytest.mark.parametrize("mechanism, words", [("medusa", "no Medusa"), ("eagle", "EAGLE-3 heads only"),
                                              ("eagle-tree", "EAGLE-3 heads only")])
def test_trtllm_reports_what_it_cannot_run(mechanism, words):
    files = render_trtllm(plan(mechanism))
    assert list(files) == ["trtllm_serve.sh"] and "trtllm-serve \\" not in files["trtllm_serve.sh"]
    assert words in files["trtllm_serve.sh"]


def test_trtllm_vanilla_mtp_is_clipped_to_its_layers(monkeypatch):
    """Checkpoints with N > 1 MTP layers run vanilla MTP: max_draft_len is clipped to N and the
    schedule ignored (utils.py update_spec_config_from_model_config)."""
    from speedplan.serving import trtllm

    monkeypatch.setattr(trtllm, "mtp_layers", lambda model: 3)
    cfg = yaml_config(trtllm.render(plan("mtp", draft_len=5, schedule=((1, 5), (8, 2))))["trtllm_extra_llm_api_options.yaml"])
    assert cfg["max_draft_len"] == 3 and "draft_len_schedule" not in cfg
    assert trtllm.support("mtp", 3).modes[0].max_draft_len == 3 and trtllm.support("mtp", 1).modes[0].shape == "first-max"


def test_trtllm_cannot_start_with_speculation_off_and_says_so():
    p = plan("eagle3", draft_len=3, schedule=((1, 0), (4, 3)))
    text = render_trtllm(p)["trtllm_extra_llm_api_options.yaml"]
    cfg = yaml_config(text)
    assert "draft_len_schedule" not in cfg and cfg["max_draft_len"] == 3
    assert "it cannot here" in text and "smallest key must map to max_draft_len" in text
    ranges = json.loads(render_vllm(p)["vllm_speculative_config.json"])
    ranges = ranges["num_speculative_tokens_per_batch_size"]
    assert ranges == [[1, 3, 0], [4, OPEN_END_BATCH, 3]]
