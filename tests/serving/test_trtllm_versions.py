"""The TensorRT-LLM YAML read by the releases it meets, not only by the main-branch copy its names
were checked against (a user walkthrough of 2026-12-05).

MTP: main (tensorrt_llm/llmapi/llm_args.py @ 0004396720054f) takes D from max_draft_len and drops a
num_nextn_predict_layers given beside it, with a deprecation warning
(MTPDecodingConfig._remap_deprecated_num_nextn_predict_layers). Releases before PR #12341 (TRTLLM-11508,
merged 2026-05-08) read D from num_nextn_predict_layers instead (PositiveInt, default 1):
MTPDecodingConfig.set_max_total_draft_tokens sets max_draft_len = num_nextn_predict_layers (GitHub index
copy of llm_args.py, blob 7019226376) and update_spec_config_from_model_config does it again when the
model loads (_torch/speculative/utils.py, blobs 2435382921, 40163558784). A file with max_draft_len only
ran D = 1 there, its draft_len_schedule's key 1 no longer matching.

Draft_Target: the build the trtllm engine profile describes (keep-warm Eagle3 / MTP-Eagle, its
zero_draft_forward source) floors a scheduled draft length at min_runtime_draft_len, 1 for the one-model
Draft_Target path: get_draft_len_for_batch_size returns max(schedule[first key >= B], min_draft_len) and
min_draft_len above the largest key (_torch/speculative/utils.py @ 011d0933dc), and
DecodingBaseConfig.min_runtime_draft_len is 1 where spec_dec_mode.use_one_engine() (llm_args.py @
011d0933dc; tests/unittest/_torch/speculative/hw_agnostic/test_min_runtime_draft_len.py there asserts 1
for DraftTargetDecodingConfig). A plan pricing D = 0 (plain decoding) where that build drafts one token
priced what never runs; the plan now keeps D >= 1 for Draft_Target.
"""

from __future__ import annotations

import bisect
import csv

import pytest
import yaml
from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.serving.plan import ServingPlan
from speedplan.serving.trtllm import render, support

runner = CliRunner()
YAML = "trtllm_extra_llm_api_options.yaml"


# ---- each release's reading of speculative_config, re-stated from its source ---------------------------
def mtp_main(spec: dict) -> int:
    """max_draft_len after MTPDecodingConfig's validators @ 0004396: the before-validator remaps a lone
    num_nextn_predict_layers to max_draft_len and drops it where max_draft_len is given too; the schedule
    validator wants its smallest key's D to be max_draft_len."""
    data = dict(spec)
    if "num_nextn_predict_layers" in data:
        layers = data.pop("num_nextn_predict_layers")
        data.setdefault("max_draft_len", layers)
    d = data["max_draft_len"]
    schedule = data.get("draft_len_schedule")
    assert schedule is None or schedule[min(schedule)] == d, "draft_len_schedule[smallest key] != max_draft_len"
    return d


def mtp_before_12341(spec: dict) -> int:
    """max_draft_len in releases before PR #12341: the draft_len_schedule field validator checks key 1
    against the max_draft_len given (info.data), then set_max_total_draft_tokens overwrites it with
    num_nextn_predict_layers (default 1), and update_spec_config_from_model_config once more at load."""
    schedule = spec.get("draft_len_schedule")
    if schedule is not None:
        assert 1 in schedule, "draft_len_schedule must include batch_size=1"
        given = spec.get("max_draft_len")
        assert given is None or schedule[1] == given
    d = spec.get("num_nextn_predict_layers", 1)
    assert schedule is None or schedule[1] == d, f"runs D = {d} while draft_len_schedule[1] = {schedule[1]}"
    return d


def draft_target_runs(spec: dict, batch: int, floor: int) -> int:
    """get_draft_len_for_batch_size @ 011d093 with min_draft_len = `floor` (1: Draft_Target in the build the
    trtllm profile describes; 0: builds before the floor, @ 0004396): the first key >= batch, floored;
    above every key the floor."""
    schedule = spec.get("draft_len_schedule")
    if schedule is None:
        return spec["max_draft_len"]
    keys = sorted(schedule)
    i = bisect.bisect_left(keys, batch)
    return max(schedule[keys[i]], floor) if i < len(keys) else floor


def sweep_files(tmp_path, *args):
    out = tmp_path / "rep"
    proc = runner.invoke(app, ["sweep", *args, "--out", str(out)])
    assert proc.exit_code == 0, proc.output
    text = (out / YAML).read_text()
    rows = [r for r in csv.DictReader((out / "schedule.csv").open()) if r["engine"] == "trtllm"]
    return text, yaml.safe_load(text)["speculative_config"], rows


# ---- MTP ---------------------------------------------------------------------------------------------
def test_mtp_yaml_runs_the_planned_d_on_main_and_on_releases_before_the_split(tmp_path):
    """The walkthrough's command: DeepSeek-V3 (one MTP layer, the MTP-Eagle path) on 8 H200s."""
    text, spec, rows = sweep_files(tmp_path, "--model", "deepseek-v3", "--hardware", "h200-sxm", "--tp", "8",
                                   "--engine", "sglang", "--plan-for", "trtllm", "--mechanism", "mtp")
    planned = {int(r["batch"]): int(r["draft_len"]) for r in rows}
    assert spec["decoding_type"] == "MTP" and spec["max_draft_len"] == planned[1] > 1
    assert mtp_main(spec) == mtp_before_12341(spec) == planned[1]
    assert spec["num_nextn_predict_layers"] == spec["max_draft_len"] and "PR #12341" in text
    without = {k: v for k, v in spec.items() if k != "num_nextn_predict_layers"}  # the file as it was
    assert mtp_main(without) == planned[1]
    with pytest.raises(AssertionError, match="runs D = 1"):
        mtp_before_12341(without)


@pytest.mark.parametrize("schedule", [((1, 4),), ((1, 5), (8, 3), (64, 0)), ((1, 2), (16, 1))])
def test_hand_made_mtp_plans_read_alike_on_both(schedule):
    plan = ServingPlan(model="deepseek-v3", mechanism="mtp", draft_len=schedule[0][1], schedule=schedule)
    spec = yaml.safe_load(render(plan)[YAML])["speculative_config"]
    assert mtp_main(spec) == mtp_before_12341(spec) == schedule[0][1]


def test_vanilla_mtp_writes_the_clipped_d_to_both_fields(monkeypatch):
    """More than one MTP layer (vanilla MTP): D is clipped to the layers, in both fields."""
    from speedplan.serving import trtllm

    monkeypatch.setattr(trtllm, "mtp_layers", lambda model: 3)
    plan = ServingPlan(model="deepseek-v3", mechanism="mtp", draft_len=5, schedule=((1, 5), (8, 2)))
    spec = yaml.safe_load(trtllm.render(plan)[YAML])["speculative_config"]
    assert spec["max_draft_len"] == spec["num_nextn_predict_layers"] == 3
    assert mtp_main(spec) == mtp_before_12341(spec) == 3


def test_only_mtp_writes_num_nextn_predict_layers():
    for mechanism, kw in (("eagle3", {}), ("draft-model", {"draft_model": "llama-3.2-1b"}), ("ngram", {})):
        plan = ServingPlan(model="llama-3.1-8b", mechanism=mechanism, draft_len=3, schedule=((1, 3),), **kw)
        assert "num_nextn_predict_layers" not in yaml.safe_load(render(plan)[YAML])["speculative_config"]


# ---- Draft_Target --------------------------------------------------------------------------------------
def test_draft_target_plan_prices_what_the_described_build_runs(tmp_path):
    """The walkthrough's command: gpt-oss-120b drafted by gpt-oss-20b on a B200. Its TensorRT-LLM plan
    was `D 2 0 0 0 0 2 2 2 1` with B = 2-16 priced as plain decoding, while the file's `31: 0` drafts one
    token there in the build the trtllm profile describes."""
    text, spec, rows = sweep_files(tmp_path, "--model", "gpt-oss-120b", "--hardware", "b200", "--mechanism",
                                   "draft-model:gpt-oss-20b")
    assert spec["decoding_type"] == "Draft_Target" and rows
    assert 0 not in spec["draft_len_schedule"].values()
    for row in rows:  # every planned batch size: priced D == what that build runs (and what older builds run)
        batch, d = int(row["batch"]), int(row["draft_len"])
        assert d >= 1 and draft_target_runs(spec, batch, floor=1) == draft_target_runs(spec, batch, floor=0) == d
        assert int(row["verify_tokens"]) == d + 1
    assert "2026 builds raise a 0 to 1" not in text and "min_runtime_draft_len" in text
    # the loss line stays honest: where plain decoding (no draft model loaded) is faster, the loss says so
    assert any(r["best_mechanism"] == "none" and float(r["loss_vs_best"]) > 0 for r in rows)


def test_draft_target_mode_has_no_zero_and_other_modes_keep_theirs():
    (mode,) = support("draft-model").modes
    assert mode.shape == "first-max" and not mode.off and "min_runtime_draft_len" in mode.how
    assert support("eagle3").modes[0].off and support("mtp", 1).modes[0].off  # keep-warm paths may run D = 0


def test_hand_made_draft_target_zero_is_written_as_the_one_it_runs():
    plan = ServingPlan(model="llama-3.1-8b", mechanism="draft-model", draft_model="llama-3.2-1b", draft_len=4,
                       schedule=((1, 4), (8, 2), (32, 0)))
    text = render(plan)[YAML]
    spec = yaml.safe_load(text)["speculative_config"]
    assert spec["draft_len_schedule"] == {1: 4, 7: 4, 31: 2, 65536: 1}
    for batch in (1, 7, 8, 31, 32, 4096, 65536):  # up to the open end's key (above it the builds differ: 1 or 0)
        assert draft_target_runs(spec, batch, floor=1) == draft_target_runs(spec, batch, floor=0) >= 1
    assert "written as D = 1" in text
