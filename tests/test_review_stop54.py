"""Stop 54: a profile file given where its folder is meant, an engine profile read from a file
named as a shipped one, and what a short runtime trace's acceptance cannot tell."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from speedplan.cli.app import run
from speedplan.plan.acceptance_notes import small_sample_note
from speedplan.plan.acceptance_sources import parse_acceptance
from speedplan.specs.model import get_model

ENGINES = Path(__file__).resolve().parents[1] / "speedplan" / "specs" / "presets" / "engines"
META = {"type": "meta", "schema": "speedplan.trace/1", "mechanism": "eagle", "draft_len": 3, "tree": None, "batch": 1}


def _trace(tmp_path, accepted):
    path = tmp_path / "t.jsonl"
    steps = [{"type": "step", "batch": 1, "accepted": [a]} for a in accepted]
    path.write_text("\n".join(json.dumps(x) for x in (META, *steps)) + "\n")
    return path


def test_profile_check_on_a_file_names_the_folder_that_holds_it(tmp_path, capsys):
    folder = tmp_path / "prof"
    folder.mkdir()
    (folder / "meta.json").write_text("{}")
    assert run(["profile", "check", str(folder / "meta.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "a file, not a profile folder" in err and str(folder) in err and "\n" not in err
    assert run(["profile", "check", str(tmp_path / "missing")]) == 2
    assert "no such profile folder" in capsys.readouterr().err


def test_an_engine_file_named_as_a_shipped_profile_is_named_as_a_file_in_the_first_line(tmp_path, capsys):
    data = json.loads((ENGINES / "vllm.json").read_text())
    data["terms"]["host_step_us"]["value"] *= 2
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    assert run(["sweep", "--engine", str(path), "--batch", "1", "--mechanism", "eagle3", "--draft-len", "0,2",
                "--out", str(tmp_path / "rep")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert f"engine profile vllm (file {path})" in first


def test_a_short_trace_says_its_widest_rate_interval():
    """Wilson's 95% interval of k = 7 of n = 10 is 0.40-0.89: wider than 0.2, named; of 700 of
    1,000 it is 0.67-0.73: nothing said."""
    few = small_sample_note(np.array([3, 7]), 1)
    assert few == "few samples: position 1's rate 0.7 rests on 10 sequence-steps (95% interval 0.40-0.89)"
    assert small_sample_note(np.array([300, 700]), 1) == ""


def test_a_trace_that_never_saw_a_rejection_says_its_rates_are_clipped(tmp_path):
    acc = parse_acceptance(str(_trace(tmp_path, [3] * 10)))
    assert "10 sequence-steps, D=3; few samples: position 1's rate 1 rests on 10 sequence-steps" in acc.source
    assert "every draft of its 10 sequence-steps was accepted: the rates are clipped to 0.999" in acc.source
    assert acc.source.count("(") == acc.source.count(")")
    many = parse_acceptance(str(_trace(tmp_path, [0, 1, 2, 3] * 100)))
    assert "few samples" not in many.source and "clipped" not in many.source and many.source.endswith("D=3)")


# ---- a notebook user's walkthrough (library calls) -----------------------------------------------------------
def test_list_mechanisms_refuses_what_the_cli_refuses():
    import speedplan

    for kw, words in [({"draft_len": 1000}, "draft_len 1000: must be in 1..16"), ({"draft_len": 2.5}, "must be an integer"),
                      ({"draft_len": True}, "must be an integer"), ({"draft_len": "3"}, "must be an integer"),
                      ({"tp": 0}, "tp 0: must be >= 1")]:
        with pytest.raises(speedplan.SpeedplanInputError, match=words):
            speedplan.list_mechanisms("llama-3.1-8b", **kw)
    with pytest.raises(speedplan.SpeedplanInputError, match="tp and draft_len apply with model"):
        speedplan.list_mechanisms(None, tp=2)
    assert len(speedplan.list_mechanisms("llama-3.1-8b", draft_len=5)) > 0


def test_list_models_and_hardware_take_one_name_as_a_list_of_one():
    import speedplan

    assert speedplan.list_hardware("h100-sxm")["bf16_tflops"].tolist() == [989.4]
    assert len(speedplan.list_models("llama-3.1-8b")) == 1
    for bad in (5, ["h100-sxm", 3]):
        with pytest.raises(speedplan.SpeedplanInputError, match="list_hardware: give a name, a file, or a list"):
            speedplan.list_hardware(bad)


def test_rendering_the_plans_of_a_sweep_where_nothing_fits_says_why():
    import speedplan

    r = speedplan.sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], batches=[1, 8], draft_lens=[0, 2], tp=1)
    plans = speedplan.plan_engines(r)
    assert speedplan.serving_plans(r, plans) == {}
    with pytest.raises(speedplan.SpeedplanInputError, match=r"no engine plan to render \(.*memory_shortfall"):
        speedplan.render_serving_configs(speedplan.serving_plans(r, plans))
    # each engine's plan names its own profile, not the sweep's (which was trtllm's)
    r = speedplan.sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], batches=[1, 8], draft_lens=[0, 2], tp=1, engine="trtllm")
    assert {e: p.profile_name for e, p in speedplan.plan_engines(r).items()} == {e: e for e in ("sglang", "trtllm", "vllm")}
    r = speedplan.sweep("llama-3.1-8b", "mi300x", ["eagle3"], batches=[1, 8], draft_lens=[0, 2], engine="sglang")
    trt = speedplan.plan_engines(r)["trtllm"]
    assert trt.not_run and trt.profile_name == "trtllm" and trt.engine_profile.startswith("trtllm")


def test_results_compare_by_identity_without_raising():
    import pickle

    import speedplan

    r = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1, 8], draft_lens=[0, 2])
    plan = speedplan.plan_engines(r)["vllm"]
    assert (r == pickle.loads(pickle.dumps(r))) is False and r == r and isinstance(hash(r), int)
    assert (plan == pickle.loads(pickle.dumps(plan))) is False and plan == plan and {plan: 1}[plan] == 1


def test_an_acceptance_built_in_python_says_its_numbers_as_the_cli_does():
    import speedplan
    from speedplan import Acceptance

    assert Acceptance.iid(0.7).source == "user: alpha=0.7"
    assert Acceptance.positional([0.85, 0.75]).source == "user: positions=0.85,0.75"
    assert Acceptance.per_rank([0.6, 0.2], match=0.5).source == "user: ranks=0.6,0.2,match=0.5"
    assert Acceptance.iid(0.7, "mine").source == "mine"
    a = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1], draft_lens=[3], acceptance=Acceptance.iid(0.7))
    b = speedplan.sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], batches=[1], draft_lens=[3], acceptance="alpha=0.7")
    assert a.frame.acceptance_source.tolist() == b.frame.acceptance_source.tolist()


# ---- serving files against the engines' sources ---------------------------------------------------------------
def test_vllm_default_budget_follows_its_160_gib_tier():
    """vLLM 0.33.0 EngineArgs.get_batch_defaults: 16384 tokens a step from 160 GiB (B200, MI300X)."""
    from speedplan.serving.vllm import default_batch_limits

    assert default_batch_limits("b200", 1) == (1024, 16384) and default_batch_limits("mi300x", 8) == (1024, 16384)
    assert default_batch_limits("h200-sxm", 1) == (1024, 8192) and default_batch_limits("h100-sxm", 1) == (1024, 8192)


def _big_plan(**kw):
    from speedplan.serving import ServingPlan

    rows = ((1, 4, 2.0, 0.0, 1), (4095, 4, 1.1, 0.0, 4095), (4096, 2, 1.1, 0.0, 4096))
    return ServingPlan(**{"model": "llama-3.1-8b", "mechanism": "eagle3", "draft_len": 4, "schedule": ((1, 4), (4096, 2)),
                          "hardware": "b200", "per_batch": rows, **kw})


def test_trtllm_sets_max_num_tokens_where_a_step_schedules_more_than_8192():
    from speedplan.serving import render_serving_configs

    files = render_serving_configs(_big_plan())
    yaml_text = files["trtllm_extra_llm_api_options.yaml"]
    assert "\nmax_num_tokens: 20475\n" in yaml_text  # 4095 requests of 1 + 4 tokens
    assert "--max-num-batched-tokens 20475" in files["vllm_serve.sh"].replace(" \\\n  ", " ")
    small = render_serving_configs(_big_plan(per_batch=((1, 4, 2.0, 0.0, 1), (64, 4, 1.5, 0.0, 64))))
    assert "max_num_tokens" not in small["trtllm_extra_llm_api_options.yaml"]


def test_sglang_ngram_launch_says_nothing_of_a_draft_tp():
    from speedplan.serving import ServingPlan, render_serving_configs

    ngram = ServingPlan(model="llama-3.1-8b", mechanism="ngram", draft_len=3, schedule=((1, 3),), hardware="h100-sxm")
    eagle = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=3, schedule=((1, 3),), hardware="h100-sxm")
    assert "draft runs with the target's tensor parallel size" not in render_serving_configs(ngram)["sglang_launch.sh"]
    assert "draft runs with the target's tensor parallel size" in render_serving_configs(eagle)["sglang_launch.sh"]


def test_a_utf16_file_is_named_as_such_wherever_it_is_read(tmp_path, capsys):
    """Windows tools save "Unicode" text as UTF-16: the error said "can't decode byte 0xff in
    position 0" (calibrate) or "neither an SGLang server log ... nor JSON" (--acceptance)."""
    wide = tmp_path / "m.csv"
    wide.write_bytes("mechanism,batch\n".encode("utf-16"))
    out = tmp_path / "o.json"
    assert run(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "vllm",
                "--measurements", str(wide), "--out", str(out)]) == 2
    assert f"{wide}: cannot read (UTF-16 text, byte-order mark FF FE: save it as UTF-8)" in capsys.readouterr().err
    assert run(["sweep", "--acceptance", f"eagle3:{wide}", "--out", str(tmp_path / "rep")]) == 2
    assert "UTF-16 text, byte-order mark FF FE" in capsys.readouterr().err
    assert run(["sweep", "--batch-weights", str(wide), "--out", str(tmp_path / "rep")]) == 2
    assert "UTF-16 text" in capsys.readouterr().err
    latin = tmp_path / "l.csv"
    latin.write_bytes(b"mechanism\xe9,batch\n")
    assert run(["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "vllm",
                "--measurements", str(latin), "--out", str(out)]) == 2
    assert "cannot read (not UTF-8 text: byte 0xe9; save it as UTF-8)" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "rep").exists()


# ---- the re-read of the stop's diff ---------------------------------------------------------------------------
def test_a_cost_model_of_ones_own_without_the_query_width_still_prices_mla():
    """sweep takes "a CostModel, or one like it": one written to the eight-argument attention
    prices MLA by the stand-in shape, as before, instead of a TypeError."""
    from speedplan.cost.ops import CostModel
    from speedplan.plan.sweep import sweep
    from speedplan.specs.hardware import get_hardware

    class Mine:
        def __init__(self):
            self.inner = CostModel(get_hardware("h100-sxm"))
            self.hardware, self.origin = self.inner.hardware, "mine"

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def attention(self, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype):
            return self.inner.attention(batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype)

    r = sweep("deepseek-v3", Mine(), ["mtp"], [1, 8], [0, 2], tp=8)
    assert r.frame["t_attention_s"].gt(0).all()


def test_batch_zero_through_a_profile_is_zero_not_nan():
    import warnings

    from speedplan.cost.attention_shape import attention_qo_head_dim, attention_shape
    from speedplan.cost.ops import load_cost_model

    cost = load_cost_model("h200-sxm")
    heads, kvh, hd = attention_shape(get_model("deepseek-v3"), 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op = cost.attention(np.array([0.0, 1.0]), 2.0, 4096.0, heads, kvh, hd, "causal", "bf16",
                            qo_head_dim=attention_qo_head_dim(get_model("deepseek-v3")))
    assert np.isfinite(op.latency_us).all() and (op.source == "profile").all()


def test_trtllm_token_budget_counts_tree_nodes_and_a_bare_schedule():
    from speedplan.serving import ServingPlan
    from speedplan.serving.trtllm import launch_options

    tree = {"topk": 8, "depth": 6, "nodes": 40}
    for row in ((256, 6, 1.5, 0.0, 256), (256, 6, 1.5, 0.0)):  # runs_at_batch is optional in per_batch
        plan = ServingPlan(model="llama-3.1-8b", mechanism="eagle3-tree", draft_len=6, schedule=((1, 6),), tree=tree,
                           hardware="h100-sxm", per_batch=(row,))
        assert launch_options(plan)[0]["max_num_tokens"] == 256 * 41
    bare = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=4, schedule=((1, 4), (4096, 2)), hardware="b200")
    assert launch_options(bare)[0]["max_num_tokens"] == 4096 * 3


def test_an_acceptance_built_in_python_keeps_its_digits():
    from speedplan import Acceptance

    assert Acceptance.iid(0.7123456).source == "user: alpha=0.7123456"


def test_an_out_folder_of_a_long_name_is_written_and_its_stale_staging_found(tmp_path, capsys):
    """A 250-character --out failed with "File name too long": its staging folder's name added
    the staging suffix to the whole name. It now carries a hash of a long name."""
    import subprocess
    import sys

    from speedplan import outputs

    out = tmp_path / ("a" * 250)
    for _ in range(2):  # the second run moves the first folder aside under the same short name
        assert run(["sweep", "--batch", "1", "--mechanism", "eagle3", "--draft-len", "0,2", "--out", str(out)]) == 0
    assert (out / "sweep.csv").is_file() and [p.name for p in tmp_path.iterdir()] == [out.name]
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    stale = Path(str(outputs._prefix(out)).replace(f"-{os.getpid()}-", f"-{proc.pid}-") + "abc_123")
    (tmp_path / stale).mkdir()
    assert len(stale.name) < 255 and outputs.remove_stale(out) == [tmp_path / stale]


def test_an_fp8_checkpoints_router_is_held_at_16_bits_on_every_rank():
    """vLLM builds the MoE gate with quant_config=None (deepseek_v2.py, qwen3_moe.py, mixtral.py): an
    fp8 checkpoint's router was 0.1 GB short per rank of DeepSeek-V3, at any TP."""
    from speedplan.cost.weights import replicated_params, weight_bytes_per_rank

    v3 = get_model("deepseek-v3")
    router = v3.moe_layers * v3.moe.num_experts * v3.hidden
    assert router == 58 * 256 * 7168
    assert weight_bytes_per_rank(v3, 1) == pytest.approx(v3.weight_bytes() + router)  # 1 byte more a parameter
    whole = replicated_params(v3)
    assert weight_bytes_per_rank(v3, 8) == pytest.approx((v3.weight_bytes() - whole) / 8 + whole + router)
    bf16 = get_model("qwen3-30b-a3b")  # already 16 bits: nothing more
    assert weight_bytes_per_rank(bf16, 1) == pytest.approx(bf16.weight_bytes())


# ---- the report review ---------------------------------------------------------------------------------------
def test_no_priced_gemm_is_drawn_above_the_roof_of_a_fitted_preset():
    """A100 (no profile): the fitted fallback prices GEMMs up to the datasheet peak, while the roof
    was drawn at the plain roofline's 75%: 121 of 525 rows of a 70B TP 4 sweep sat above it."""
    import speedplan

    for hw, tp in (("a100-80gb", 4), ("mi300x", 1), ("h100-sxm", 1)):
        r = speedplan.sweep("llama-3.1-70b" if tp == 4 else "llama-3.1-8b", hw, tp=tp, batches=[1, 32, 64, 128])
        f = r.frame[r.frame.feasible]
        roof = np.minimum(f["gemm_flops_per_byte"] * r.meta["bytes_per_s"], r.meta["peak_flops_per_s"])
        assert (f["gemm_flops_per_s"] <= roof * 1.0001).all(), hw


def test_the_html_names_a_tree_plans_size_and_the_batch_weights(tmp_path):
    import html as html_lib

    out = tmp_path / "rep"
    # context 2000: within the published heads' positions (past them SGLang's drafter runs on for nothing)
    assert run(["sweep", "--engine", "sglang", "--batch", "1,8,64", "--batch-weights", "1=3,8=1", "--context", "2000",
                "--out", str(out)]) == 0
    page = html_lib.unescape((out / "report.html").read_text())
    assert "<h3>sglang: eagle3-tree (fixed, 64 nodes)</h3>" in page  # the terminal: "D 8 8 8 (64 nodes)"
    assert "(weighted by --batch-weights: B=1 0.75, B=8 0.25, B=64 0)" in page
    assert "may give up tokens/s/GPU for tokens/s per user" in page and "can be one more" not in page
