"""Serving configs: valid JSON/YAML/shell, option names from the checked list, schedules that the
engines' own lookup rules (re-implemented here from their source) turn back into the plan."""

from __future__ import annotations

import bisect
import json
import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from speedplan import serving
from speedplan.plan.mechanisms import MECHANISMS
from speedplan.errors import SpeedplanInputError
from speedplan.serving import ENGINE_VERSIONS, ServingPlan, write_serving_configs
from speedplan.serving.plan import OPEN_END_BATCH
from speedplan.serving.sglang import render as render_sglang
from speedplan.serving.trtllm import render as render_trtllm
from speedplan.serving.vllm import render as render_vllm

SCHEDULE = ((1, 5), (8, 4), (32, 2), (128, 0))
TREE = {"topk": 4, "depth": 5, "nodes": 16}

# Names checked against each engine's source (docs/serving.md says where each was found).
# vLLM 0.33.0: vllm/config/speculative.py SpeculativeConfig fields and SpeculativeMethod literals.
VLLM_KEYS = {"method", "model", "num_speculative_tokens", "draft_tensor_parallel_size",
             "prompt_lookup_max", "prompt_lookup_min", "num_speculative_tokens_per_batch_size"}
VLLM_METHODS = {"ngram", "draft_model", "eagle", "eagle3", "mtp"}
# SGLang 0.5.23: python/sglang/srt/arg_groups/fields/spec.py field names with dashes.
SGLANG_FLAGS = {"--model-path", "--tp-size", "--speculative-algorithm", "--speculative-draft-model-path",
                "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                "--speculative-ngram-max-bfs-breadth", "--speculative-adaptive", "--speculative-adaptive-config"}
SGLANG_ALGORITHMS = {"NGRAM", "STANDALONE", "EAGLE", "EAGLE3", "NEXTN"}
# TensorRT-LLM llm_args.py @ 0004396: DecodingBaseConfig / Eagle3DecodingConfig / NGram fields and literals.
TRTLLM_KEYS = {"decoding_type", "max_draft_len", "speculative_model", "max_matching_ngram_size",
               "use_dynamic_tree", "dynamic_tree_max_topK", "max_total_draft_tokens", "draft_len_schedule"}
TRTLLM_TYPES = {"NGram", "Draft_Target", "Eagle3", "MTP"}


def plan(mechanism: str = "eagle", **kw) -> ServingPlan:
    base = dict(model="llama-3.1-8b", mechanism=mechanism, draft_len=4, schedule=SCHEDULE, hardware="h100")
    if mechanism == "draft-model":
        base["draft_model"] = "llama-3.2-1b"
    if mechanism in ("eagle-tree", "eagle3-tree", "medusa"):
        base["tree"] = TREE
    if mechanism == "mtp":
        base["model"] = "deepseek-v3"
    base.update(kw)
    return ServingPlan(**base)


def plan_d(p: ServingPlan, batch: int) -> int:
    """The plan's D at a batch: the last schedule point at or below it (batch 1 uses the first)."""
    points = [b for b, _ in p.schedule]
    return p.schedule[max(bisect.bisect_right(points, batch) - 1, 0)][1]


def vllm_lookup(ranges: list[list[int]], k_max: int, batch: int) -> int:
    """vLLM build_dynamic_sd_schedule_lookup for 3-item entries: range K clipped to k_max."""
    for lo, hi, k in ranges:
        if lo <= batch <= hi:
            return min(k, k_max)
    raise AssertionError(f"batch {batch} not covered by {ranges}")


def trtllm_lookup(schedule: dict[int, int], batch: int) -> int:
    """TensorRT-LLM get_draft_len_for_batch_size: first key >= batch; above every key -> 0."""
    keys = sorted(schedule)
    idx = bisect.bisect_left(keys, batch)
    return schedule[keys[idx]] if idx < len(keys) else 0


def sglang_lookup(config: dict, batch: int, cuda_graph_bs=None) -> int:
    """SGLang 0.5.23 AdaptiveSpeculativeParams._route: pad to the next CUDA-graph batch size,
    then the slot with the largest key <= it (clamped to the first); a one-candidate slot keeps it."""
    keys = sorted(int(k) for k in config if k.isdigit())
    if cuda_graph_bs:
        i = bisect.bisect_left(cuda_graph_bs, batch)
        batch = cuda_graph_bs[i] if i < len(cuda_graph_bs) else batch
    key = keys[max(0, bisect.bisect_right(keys, batch) - 1)]
    (steps,) = config[str(key)]["candidate_steps"]
    return steps


def shell_command(text: str) -> list[str]:
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return shlex.split(body.replace("\\\n", " "))


def flag_values(argv: list[str]) -> dict[str, str]:
    return {a: argv[i + 1] for i, a in enumerate(argv) if a.startswith("--")}


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(mechanism="lookahead"), "unknown mechanism"),
        (dict(draft_len=0), "draft_len"),
        (dict(draft_len=2.5), "draft_len"),
        (dict(tp=0), "tp must"),
        (dict(schedule=((8, 2), (1, 4))), "strictly increasing"),
        (dict(schedule=((1, -1),)), "schedule entries"),
        (dict(mechanism="draft-model", draft_model=None), "draft_model"),
        (dict(mechanism="eagle-tree", tree=None), "needs tree"),
        (dict(mechanism="eagle-tree", tree={"topk": 2, "depth": 3, "nodes": 9}), "[depth, topk*depth]"),
        (dict(mechanism="mtp", model="llama-3.1-8b"), "no MTP layers"),
    ],
)
def test_bad_input_raises_one_clear_error(kwargs, words):
    with pytest.raises(SpeedplanInputError) as err:
        plan(**kwargs)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_nothing_is_written_when_an_engine_fails(tmp_path, monkeypatch):
    def broken(p):
        raise SpeedplanInputError("boom")

    monkeypatch.setattr(serving.ENGINES["trtllm"], "render", broken)
    out = tmp_path / "configs"
    with pytest.raises(SpeedplanInputError):
        write_serving_configs(plan(), out)
    assert not out.exists()


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
    cfg = json.loads(render_vllm(plan("eagle3", model="/models/my-llama"))["vllm_speculative_config.json"])
    assert cfg["model"] == "<path-to-eagle3-head-for-/models/my-llama>"
    cfg = json.loads(render_vllm(plan("eagle", model="/models/my-llama"))["vllm_speculative_config.json"])
    assert cfg["model"] == "<path-to-eagle-head-for-/models/my-llama>"


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
    at every planned batch (CUDA-graph batch sizes include them) and turns drafting off at D = 0."""
    p = plan("eagle3", schedule=((1, 6), (8, 4), (32, 2), (128, 0)), mode="adaptive")
    files = render_sglang(p)
    config = json.loads(files["sglang_adaptive_config.json"])
    assert config == {"1": {"candidate_steps": [6]}, "8": {"candidate_steps": [4]},
                      "32": {"candidate_steps": [2]}, "128": {"candidate_steps": [0]}}
    graphs = [1, 2, 4, 8, 16, 24, 32, 64, 128, 256]
    for batch in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        assert sglang_lookup(config, batch, graphs) == plan_d(p, batch)
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
    for batch in (1, 7, 8, 31, 32, 100, 128, 4096):  # the last planned D carries on above the last planned batch
        assert trtllm_lookup(schedule, batch) == plan_d(p, batch)
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
    assert "the docs spell it DraftTarget" in text


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


# ---- what each engine can express (the planner plans within it) -------------------------------
def test_supports_state_each_engines_expressivity():
    from speedplan.serving import sglang, trtllm, vllm

    assert {vllm.support(m).modes[0].shape for m in ("ngram", "draft-model", "eagle", "eagle3", "mtp")} == {"any"}
    assert all(vllm.support(m) is None for m in ("eagle-tree", "eagle3-tree", "medusa"))
    assert [m.shape for m in sglang.support("eagle3").modes] == ["fixed", "any"]
    assert [m.shape for m in sglang.support("draft-model").modes] == ["fixed"]
    assert sglang.support("eagle3-tree").modes[0].trees and sglang.support("medusa") is None
    assert trtllm.support("eagle3").modes[0].shape == "first-max" and trtllm.support("eagle") is None
    assert all(e.draft_tp_options("draft-model", 4) == {4} for e in (vllm, sglang, trtllm))


@pytest.mark.parametrize("render", [render_vllm, render_sglang, render_trtllm])
def test_off_everywhere_is_a_plain_launch(render):
    p = ServingPlan(model="llama-3.1-8b", mechanism="none", draft_len=0, schedule=(), hardware="h100")
    files = render(p)
    text = "".join(files.values())
    assert "speculation loses at every planned batch size" in text and "exit 1" not in text
    (script,) = [t for name, t in files.items() if name.endswith(".sh")]
    argv = shell_command(script)
    assert argv[0] in ("vllm", "python", "trtllm-serve") and not any("speculative" in a for a in argv)
    nothing_fits = "".join(render(replace(p, fits_memory=False)).values())
    assert "fits in memory at no swept batch size" in nothing_fits and "speculation loses" not in nothing_fits
    # off as a whole, though a speculative setting wins at some batch size of its own
    mixed = "".join(render(replace(p, per_batch=((1, 0, 1.0, 0.10), (64, 0, 1.0, 0.0)))).values())
    assert "no setting this engine can express gains over plain decoding across the planned batch" in mixed
    assert "speculation loses at every" not in mixed


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


def test_d0_where_the_drafter_leaves_no_room_is_not_called_speculation_off():
    """A plan that loads a drafter gets D = 0 at batch sizes where drafter and KV cache do not fit
    together (loss 100%): its comments say that, not "speculation off"."""
    p = ServingPlan(model="llama-3.1-70b", mechanism="eagle3", draft_len=3, schedule=((1, 3), (8, 0), (64, 0)),
                    tp=4, per_batch=((1, 3, 2.0, 0.0), (8, 0, 1.0, 0.0), (64, 0, 0.0, 1.0)))
    text = render_vllm(p)["vllm_serve.sh"]
    rows = {line.split()[1]: line for line in text.splitlines() if line.startswith("#  ") and "x " in line}
    assert rows["8"].endswith("(speculation off)")
    assert rows["64"].endswith("(does not fit in memory with the drafter loaded)")
    lines = text.splitlines()
    start = lines.index("# Per-batch draft length planned by speedplan:") + 2
    ranges = lines[start:next(i for i, x in enumerate(lines) if x.startswith("# How this engine gets it"))]
    assert len(ranges) == 2 and ranges[1].endswith(
        "(speculation off; from B = 64 nothing fits in memory with the drafter loaded)")
    only = render_vllm(replace(p, schedule=((1, 3), (64, 0)), per_batch=((1, 3, 2.0, 0.0), (64, 0, 0.0, 1.0))))
    assert only["vllm_serve.sh"].count("    0  (does not fit in memory with the drafter loaded)") == 1


def test_per_engine_plans_are_written_per_engine(tmp_path):
    plans = {"vllm": plan("eagle3"), "sglang": plan("eagle3-tree"), "trtllm": plan("eagle3", schedule=((1, 3),))}
    paths = write_serving_configs(plans, tmp_path)
    names = {p.name for p in paths}
    assert {"vllm_serve.sh", "sglang_launch.sh", "trtllm_extra_llm_api_options.yaml"} <= names
    assert "--speculative-eagle-topk 4" in (tmp_path / "sglang_launch.sh").read_text()
    with pytest.raises(SpeedplanInputError, match="unknown serving engine"):
        write_serving_configs({"tgi": plan()}, tmp_path / "x")


# ---- every file --------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_version_string_in_every_commented_file(mechanism, tmp_path):
    paths = write_serving_configs(plan(mechanism), tmp_path)
    engine_of = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}
    assert {p.parent for p in paths} == {tmp_path} and len(paths) >= 3
    for path in paths:
        text = path.read_text()
        engine = engine_of[path.name.split("_")[0]]
        if path.suffix == ".json":  # pure JSON for --speculative-config; its comment is in vllm_serve.sh
            json.loads(text)
            continue
        assert ENGINE_VERSIONS[engine] in text, path.name
        if path.suffix == ".sh":
            assert os.access(path, os.X_OK)
            assert subprocess.run(["sh", "-n", str(path)]).returncode == 0


def test_import_does_not_load_torch():
    code = "import speedplan.serving, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False", out.stderr


def test_trtllm_cannot_start_with_speculation_off_and_says_so():
    p = plan("eagle3", draft_len=3, schedule=((1, 0), (4, 3)))
    text = render_trtllm(p)["trtllm_extra_llm_api_options.yaml"]
    cfg = yaml_config(text)
    assert "draft_len_schedule" not in cfg and cfg["max_draft_len"] == 3
    assert "it cannot here" in text and "smallest key must map to max_draft_len" in text
    ranges = json.loads(render_vllm(p)["vllm_speculative_config.json"])
    ranges = ranges["num_speculative_tokens_per_batch_size"]
    assert ranges == [[1, 3, 0], [4, OPEN_END_BATCH, 3]]


def test_numpy_integers_from_a_dataframe_are_accepted():
    np = pytest.importorskip("numpy")
    p = plan(draft_len=np.int64(4), schedule=tuple((np.int64(b), np.int64(d)) for b, d in SCHEDULE))
    assert p.schedule == SCHEDULE and type(p.draft_len) is int
    json.loads(render_vllm(p)["vllm_speculative_config.json"])  # numpy ints would not serialise


def test_d0_with_a_drafter_kept_warm_says_the_drafter_still_runs():
    """Where the engine still runs the drafter's forward at D = 0 (vLLM 0.33, SGLang 0.5.23, 2026
    TensorRT-LLM builds), the comments say drafting is off but the drafter updates its KV cache,
    and each engine's notes name the code that does it; without it, "speculation off"."""
    p = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=3, schedule=((1, 3), (64, 0)),
                    per_batch=((1, 3, 2.0, 0.0), (64, 0, 0.97, 0.03)), mode="adaptive", drafter_kept_warm=True)
    vllm = render_vllm(p)["vllm_serve.sh"]
    assert "    0.97x   3.0%  (drafting off, the drafter still updates its KV cache)" in vllm
    assert "num_speculative_tokens = 0" in vllm and "(speculation off)" not in vllm
    assert "#49548" in vllm and "#49548" not in render_vllm(replace(p, schedule=((1, 3), (64, 2))))["vllm_serve.sh"]
    assert "PIECEWISE" in vllm and "PIECEWISE" not in render_vllm(replace(p, schedule=((1, 3),)))["vllm_serve.sh"]
    assert "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND" in render_sglang(p)["sglang_launch.sh"]
    assert "keep_drafter_warm" in render_trtllm(replace(p, mode="schedule"))["trtllm_serve.sh"]
    cold = replace(p, drafter_kept_warm=False)
    assert "(speculation off)" in render_vllm(cold)["vllm_serve.sh"]
    assert "SGLANG_SPEC_SKIP" not in render_sglang(cold)["sglang_launch.sh"]


PRESETS = Path(__file__).resolve().parents[2] / "speedplan" / "specs" / "presets" / "models"


def _config_folder(tmp_path: Path, preset: str, name: str, **changes) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    cfg = {k: v for k, v in json.loads((PRESETS / f"{preset}.json").read_text()).items() if k != "_source"}
    (folder / "config.json").write_text(json.dumps({**cfg, **changes}))
    return folder


def test_models_given_as_config_folders_are_served_from_those_folders(tmp_path, monkeypatch):
    """A target or draft given as a config.json folder was written as the folder's bare name, a
    Hugging Face repo no engine finds (an audit of 2026-12-04)."""
    from speedplan.plan.engine_plan import plan_engines, serving_plans
    from speedplan.plan.sweep import sweep

    draft = _config_folder(tmp_path, "llama-3.2-1b", "mydraft")
    monkeypatch.chdir(tmp_path)
    result = sweep(mechanisms=["draft-model:mydraft"], batches=(1, 8), draft_lens=(2, 4))
    plans = serving_plans(result, plan_engines(result))
    files = serving.render_serving_configs(plans)
    assert plans["vllm"].draft_model == str(draft.resolve())
    text = "".join(files.values())
    assert str(draft.resolve()) in text and '"mydraft"' not in text and "path mydraft" not in text


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


def test_a_plan_over_several_contexts_says_so():
    """Every header said "Planned for this engine at context 1024 tokens" for a plan chosen over
    1024 and 8192 (an audit of 2026-12-04)."""
    rows = ((1, 5, 2.0, 0.0), (8, 4, 1.6, 0.01))
    text = render_vllm(plan("eagle", context=1024, contexts=(1024, 8192), per_batch=rows))["vllm_serve.sh"]
    assert "over contexts 1024, 8192 tokens, one D per batch size for all; the table is at context 1024" in text
    assert "serves contexts 1024, 8192" in text
    assert "at context 1024 tokens" in render_vllm(plan("eagle", context=1024, per_batch=rows))["vllm_serve.sh"]


def test_the_serving_header_says_which_ops_the_roofline_fallback_priced():
    """The shipped H100 profile has no elementwise table: the terminal said so, the serving files'
    "Speedups from latency measured (AIConfigurator ...)" did not (an audit of 2026-12-04)."""
    from speedplan.plan.engine_plan import plan_engines, serving_plans
    from speedplan.plan.sweep import sweep

    result = sweep(mechanisms=["eagle3"], batches=[1, 8])
    plans = serving_plans(result, plan_engines(result, engines="vllm"))
    assert "h100-sxm (roofline fallback for some ops: the profile has no elementwise table)" in plans["vllm"].sources
    roofline = sweep(hardware="a100-80gb", mechanisms=["eagle3"], batches=[1, 8])  # no profile: no such note
    assert "roofline fallback for some ops" not in serving_plans(roofline, plan_engines(roofline, engines="vllm"))["vllm"].sources


def test_an_off_plan_that_holds_fewer_sequences_does_not_blame_a_drafter():
    """Plain decoding can hold fewer sequences than offered under an engine's own memory rule; the
    comment said "the most that fit with the drafter loaded" where no drafter was loaded."""
    rows = ((64, 0, 1.0, 0.0, 64), (256, 0, 1.0, 0.0, 180))
    off = ServingPlan(model="llama-3.1-8b", mechanism="none", draft_len=0, schedule=((1, 0),), per_batch=rows)
    text = render_vllm(off)["vllm_serve.sh"]
    assert "(runs 180 sequences, the most that fit; the rest wait)" in text and "drafter loaded" not in text
    on = replace(off, mechanism="eagle3", draft_len=3, schedule=((1, 3),),
                 per_batch=((64, 3, 1.5, 0.0, 64), (256, 3, 1.2, 0.0, 180)))
    assert "(runs 180 sequences, the most that fit with the drafter loaded; the rest wait)" in render_vllm(on)["vllm_serve.sh"]


def test_a_vllm_plan_priced_by_the_shipped_profile_says_what_it_assumes_of_the_release():
    """The shipped vllm profile describes 2025 releases (overlap_spec 0) while the file is for 0.33:
    its comments say speculation may lose less at large batches there (async scheduling with EAGLE/MTP,
    vLLM PR #31998); a plan priced by the user's calibrated file says nothing of the kind."""
    vllm = serving.engine_module("vllm")
    shipped = replace(plan("eagle3"), priced_by="vllm: 3 of 16 terms fitted to 4 rows")
    mine = replace(plan("eagle3"), priced_by="vllm: file /tmp/mine.json; 5 of 16 terms fitted to 9 rows")
    assert "describes 2025 releases" in vllm.render(shipped)["vllm_serve.sh"]
    assert "describes 2025 releases" not in vllm.render(mine)["vllm_serve.sh"]
