"""A notebook user's walkthrough of the library (2026-12-05, stop 50): inputs that were dropped or
misread without a word, and outputs that drifted from a frame the user had filtered."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import speedplan
from speedplan.errors import SpeedplanInputError


@pytest.fixture(scope="module")
def two():
    # context 2000: within the published EAGLE-3 head's 2,048 positions, where vLLM drafts (plan/drafter_positions.py)
    return speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3", "ngram"], batches=[1, 8, 64], contexts=[2000])


@pytest.mark.parametrize("kw, match", [
    (dict(mechanisms=["eagle3-tree"], tree_nodes=[2], draft_lens=[3, 4]), "mechanism eagle3-tree: nothing to price"),
    (dict(mechanisms=["eagle3-tree:topk=2"], tree_nodes=[64], draft_lens=[1, 2, 3]), "top 2 per level"),
])
def test_a_named_mechanism_with_nothing_to_price_is_refused_not_dropped(kw, match):
    """A tree whose (D, N) band holds no swept pair vanished from every table while the plans said 'off'."""
    with pytest.raises(SpeedplanInputError, match=match) as err:
        speedplan.sweep("llama-3.1-8b", "h100-sxm", batches=[1, 8], **kw)
    assert "\n" not in str(err.value)


def test_a_default_tree_with_nothing_to_price_is_skipped_with_why():
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", batches=[1, 8], draft_lens=[0, 1], tree_nodes=[64])
    trees = [m for m in r.meta["skipped"] if "tree" in m]
    assert trees and all("nothing to price" in r.meta["skipped"][m] for m in trees)
    assert not set(trees) & set(r.meta["mechanisms"]) and not set(trees) & set(r.frame["mechanism"])
    # the two trees share one reason: one line names both (report.table_notes.grouped)
    assert "skipped: eagle3-tree, eagle-tree: nothing to price" in speedplan.render_summary(r)


def test_a_filtered_frame_gets_its_own_tables_plans_and_files(two, tmp_path):
    """Filtering `.frame` left `.best`, `.pareto`, the summary and recommendations.json on the
    rows removed, and the SGLang and TensorRT-LLM plans (repriced from the whole sweep) on them too."""
    kept = dataclasses.replace(two, frame=two.frame[two.frame.mechanism != "eagle3"])
    plans = speedplan.plan_engines(kept)
    assert {p.mechanism for p in plans.values()} <= {"ngram", "none"} and "ngram" in {p.mechanism for p in plans.values()}
    assert set(kept.best["mechanism"]) <= {"ngram", "none"} and set(kept.pareto["mechanism"]) <= {"ngram", "none"}
    assert "eagle3" not in speedplan.render_summary(kept, plans=plans).split("latency:")[0]
    speedplan.write_outputs(kept, tmp_path / "r")
    rec = json.loads((tmp_path / "r" / "recommendations.json").read_text())
    assert {r["mechanism"] for r in rec["per_batch"]} <= {"ngram", "none"}
    small = dataclasses.replace(two, frame=two.frame[two.frame.batch <= 8])
    assert set(speedplan.plan_engines(small)["sglang"].rows["batch"]) == {1, 8}
    assert set(small.best["batch"]) == {1, 8}
    assert two.best["mechanism"].eq("eagle3").any()  # the sweep itself is untouched


def test_a_filtered_and_reindexed_frame_is_refused_for_other_engines(two):
    moved = dataclasses.replace(two, frame=two.frame[two.frame.batch <= 8].iloc[::-1].reset_index(drop=True))
    with pytest.raises(SpeedplanInputError, match="re-indexed"):
        speedplan.plan_engines(moved)


def test_a_leading_tilde_is_the_home_folder(two, tmp_path, monkeypatch):
    """write_outputs crashed with pandas' OSError (its staging folder sat under a literal '~'
    while pandas expanded it); write_serving_configs made a folder named '~' in the cwd."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home").mkdir()
    paths = speedplan.write_outputs(two, "~/reports/x")
    assert all(str(p).startswith(str(tmp_path / "home" / "reports" / "x")) for p in paths)
    speedplan.write_serving_configs(speedplan.serving_plans(two, speedplan.plan_engines(two)), "~/sv")
    assert (tmp_path / "home" / "sv").is_dir() and not (tmp_path / "~").exists()


@pytest.mark.parametrize("column, ours", [("max_num_seqs", "max_running_requests"), ("max_batch_size", "max_running_requests"),
                                         ("temp", "temperature")])
def test_an_engines_own_column_name_is_refused_with_ours(column, ours):
    """--max-num-seqs as a column was dropped without a word, and the fit changed."""
    rows = [{"mechanism": "none", "batch": 64, "draft_len": 0, "context": 1024, "tpot_ms": 9.0, column: 48}]
    with pytest.raises(SpeedplanInputError, match=f"column '{column}': calibrate reads it as '{ours}'"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "sglang", rows)
    rows = [{"mechanism": "none", "batch": 8, "num_speculative_tokens": 0, "context": 1024, "tpot_ms": 9.0}]
    with pytest.raises(SpeedplanInputError, match="'num_speculative_tokens': calibrate reads it as 'draft_len'"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "sglang", rows)


def test_calibrate_refuses_an_engine_on_hardware_it_does_not_run_on():
    rows = [{"mechanism": "none", "batch": b, "draft_len": 0, "context": 1024, "tpot_ms": t} for b, t in ((1, 7), (8, 8))]
    with pytest.raises(SpeedplanInputError, match="trtllm: trtllm runs on cuda only"):
        speedplan.calibrate_rows("llama-3.1-8b", "mi300x", 1, "trtllm", rows)


def test_the_table_says_why_it_is_off_where_the_plan_speculates_with_fewer_running():
    from tests._heads import long_heads

    # a head that holds 8k positions (the published one holds 2,048, past which vLLM's V1 runner drafts nothing)
    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", long_heads("eagle3"), batches=[1, 40, 56], contexts=[8192])
    plans = speedplan.plan_engines(r)
    assert r.best.set_index("batch").loc[56, "mechanism"] == "none" and plans["vllm"].running[-1] < 56
    text = speedplan.render_summary(r, plans=plans)
    assert "note: where the table says off" in text and "B = 56: 54 running" in text


def test_a_hardware_object_is_refused_in_one_short_line():
    from speedplan.specs.hardware import get_hardware

    with pytest.raises(SpeedplanInputError, match="give its name, 'h100-sxm'") as err:
        speedplan.sweep("llama-3.1-8b", get_hardware("h100-sxm"))
    assert len(str(err.value)) < 250


def test_a_profile_derives_for_a_chip_without_fp8_leaving_those_rows_out(tmp_path):
    """`profile derive h200-sxm --hardware a100-80gb` failed: 'hardware a100-80gb has no fp8 peak'."""
    from speedplan.profile.tools import derive_profile
    from speedplan.profile.load import load_profile

    out = derive_profile(Path(speedplan.__file__).parent / "data" / "profiles" / "h200-sxm", "a100-80gb", tmp_path / "a100")
    prof = load_profile(out)
    assert prof.origin == "derived" and prof.hardware.name == "a100-80gb"
    assert "fp8" not in set(prof.tables["gemm"]["dtype"]) and "bf16" in set(prof.tables["gemm"]["dtype"])
    assert "fp8 gemm" in json.loads((out / "meta.json").read_text())["note"]


@pytest.mark.parametrize("model, hardware, tp, advice", [
    ("deepseek-v3", "h100-sxm", 8, "try a GPU with more memory (--hardware; --tp stops at the 8 GPUs one h100-sxm node"),
    ("llama-3.1-70b", "cpu-local", 1, "GB of memory (weights"),
    ("llama-3.1-70b", "h100-sxm", 1, "try a larger --tp"),
])
def test_memory_advice_is_one_the_user_can_follow(model, hardware, tp, advice):
    """deepseek-v3 on h100-sxm at TP 8 was told 'try a larger --tp', which TP 16 (two nodes) refuses."""
    r = speedplan.sweep(model, hardware, ["eagle3"] if hardware != "cpu-local" else ["ngram"], batches=[1], tp=tp)
    assert advice in speedplan.memory_shortfall(r)


def test_reprice_refuses_a_gpu_profile_for_a_cpu_run():
    """`validate --reprice <cpu run> --hardware h100-sxm` printed a 65% error instead of refusing."""
    from speedplan.validate.reprice import load_validation, reprice_verify

    folder = Path(__file__).parents[1] / "reports" / "validation-cpu-epyc-zen3-2026-12-05-b"
    table, summary = load_validation(folder)
    with pytest.raises(SpeedplanInputError, match="prices a GPU, and the stored run was measured on a CPU"):
        reprice_verify(table, summary, "h100-sxm")
    assert len(reprice_verify(table, summary, "cpu-local-epyc-zen3")) == len(table)


def test_predict_ops_returns_latency_as_a_number():
    """A DataFrame built from predict_ops had an object column of text ('15.0450')."""
    from speedplan.cost.ops import load_cost_model
    from speedplan.cost.predict import predict_ops

    out = predict_ops(load_cost_model("h100-sxm"), [{"op": "gemm", "m": 1, "n": 4096, "k": 4096, "dtype": "bf16"}])
    assert isinstance(out[0]["latency_us"], float) and out[0]["latency_us"] > 0
    with pytest.raises(SpeedplanInputError, match="column 'n' must be a number, got '4_096'"):
        predict_ops(load_cost_model("h100-sxm"), [{"op": "gemm", "m": 1, "n": "4_096", "k": 4096, "dtype": "bf16"}])


def test_a_tree_row_without_its_nodes_is_refused():
    """It was priced as D nodes (a chain's verify) without a word."""
    rows = [{"mechanism": "eagle3-tree", "batch": 1, "draft_len": 4, "context": 1024, "tpot_ms": 5.0,
             "acceptance_length": 3.5}, {"mechanism": "none", "batch": 1, "draft_len": 0, "context": 1024, "tpot_ms": 7.0}]
    with pytest.raises(SpeedplanInputError, match="a tree row .eagle3-tree, depth 4. needs field 'tree_nodes'"):
        speedplan.calibrate_rows("llama-3.1-8b", "h100-sxm", 1, "sglang", rows)


def test_report_html_says_what_the_terminal_says(tmp_path):
    """report.html left out the plan lines' advice (SGLang's cap making it slower than plain decoding:
    set --max-running-requests or serve those loads without speculation), the table/plan notes and
    the skipped mechanisms; on a CPU an engine that does not run there got '0 tokens/s/GPU' filler."""
    import html

    r = speedplan.sweep("llama-3.1-70b", "h200-sxm", ["eagle3"], batches=[1, 64, 256], tp=4)
    plans = speedplan.plan_engines(r)
    speedplan.write_outputs(r, tmp_path / "g", plans=plans)
    text = html.unescape((tmp_path / "g" / "report.html").read_text())
    assert "that cap makes it slower than plain decoding: set --max-running-requests" in text
    d = speedplan.sweep("smollm2-135m", "cpu-local", batches=[1, 4], engine="speedplan-runtime")
    speedplan.write_outputs(d, tmp_path / "c")
    text = html.unescape((tmp_path / "c" / "report.html").read_text())
    assert "<h3>trtllm: not planned</h3>" in text and "skipped: mtp: the model has no MTP layers" in text
    assert "note: on a CPU the sglang and vllm plans are priced with the shipped profile of each engine" in text


def test_the_slo_pick_says_to_cap_the_server_at_its_batch():
    """An SLO pick at B = 32 under SGLang's default cap of 48 ran slower than the SLO at B = 64, and
    neither the report nor the launch file said to cap concurrency (a report walkthrough)."""
    from speedplan.report.summary import slo_line

    r = speedplan.sweep("qwen3-8b", "a100-80gb", ["eagle3"], batches=[1, 8, 16, 32, 64], engine="sglang",
                        min_tokens_per_user=80)
    b = int(r.slo_pick["running"])
    assert f"it holds while at most {b} requests run at once" in slo_line(r)
    assert f"SGLang --max-running-requests {b}" in slo_line(r)


def test_a_placeholder_head_is_named_in_the_summary():
    """The 70B's launch files loaded <path-to-eagle3-head-for-llama-3.1-70b> while the report
    recommended 4.35x with nothing saying no head was supplied (a report walkthrough)."""
    r = speedplan.sweep("llama-3.1-70b", "h200-sxm", ["eagle3"], batches=[1, 8], tp=4)
    text = speedplan.render_summary(r, plans=speedplan.plan_engines(r))
    assert "note: speedplan knows no published head of llama-3.1-70b for sglang, trtllm and vllm" in text
    d = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8])
    assert "knows no published head" not in speedplan.render_summary(d, plans=speedplan.plan_engines(d))


def test_what_speedplan_ships_is_listed_from_python():
    """A notebook user had to find speedplan.specs.model.preset_names, specs.hardware.PRESETS and
    engine.profile.preset_names; the hardware table was built in the CLI."""
    hw = speedplan.list_hardware()
    assert {"h100-sxm", "cpu-local", "cpu-local-epyc-zen3"} <= set(hw["hardware"])
    assert hw.set_index("hardware").loc["h100-sxm", "bf16_tflops"] == 989.4
    assert set(speedplan.list_engines()["engine"]) == {"vllm", "vllm-async", "sglang", "trtllm", "speedplan-runtime"}
    assert "llama-3.1-8b" in set(speedplan.list_models()["model"])
    with pytest.raises(SpeedplanInputError, match="unknown hardware 'nope'"):
        speedplan.list_hardware(["nope"])


def test_a_numpy_float32_temperature_is_stored_as_written():
    """np.float32(0.7) was stored in meta.json as 0.699999988079071."""
    import numpy as np
    from speedplan.plan.temperature import check_temperature

    assert check_temperature(np.float32(0.7)) == 0.7 and check_temperature(np.int64(1)) == 1.0
    assert check_temperature(0.7) == 0.7
