"""Serving configs: valid JSON/YAML/shell, option names from the checked list, schedules that the
engines' own lookup rules (re-implemented here from their source) turn back into the plan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from speedplan import serving
from speedplan.plan.mechanisms import MECHANISMS
from speedplan.errors import SpeedplanInputError
from speedplan.serving import ENGINE_VERSIONS, ServingPlan, write_serving_configs
from speedplan.serving.sglang import render as render_sglang
from speedplan.serving.trtllm import render as render_trtllm
from speedplan.serving.vllm import render as render_vllm
from tests.serving._helpers import SCHEDULE, _config_folder, plan, shell_command


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
