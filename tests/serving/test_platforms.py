"""Engines plan only on hardware they run on: TensorRT-LLM is CUDA-only, so a sweep on an MI300X
(platform "rocm") or the CPU preset plans no TensorRT-LLM launch and writes none of its files,
and the not-planned line names no --engine whose engine cannot run there."""

import json

from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.serving import ENGINES, runs_on
from speedplan.specs.hardware import get_hardware


def test_each_engine_says_where_it_runs():
    assert runs_on("trtllm", "cuda") and not runs_on("trtllm", "rocm") and not runs_on("trtllm", "cpu")
    assert all(runs_on(e, "cuda") for e in ENGINES)
    assert runs_on("vllm", "rocm") and runs_on("sglang", "rocm")
    assert get_hardware("mi300x").platform == "rocm" and get_hardware("h100-sxm").platform == "cuda"


def test_a_rocm_sweep_plans_no_tensorrt_llm_launch(tmp_path):
    out = tmp_path / "rep"
    proc = CliRunner().invoke(app, ["sweep", "--model", "llama-3.1-8b", "--hardware", "mi300x", "--batch", "1,8,64",
                                    "--out", str(out)])
    assert proc.exit_code == 0, proc.output
    assert "trtllm  not planned: trtllm runs on cuda only, and mi300x is a rocm device" in proc.output
    assert not list(out.glob("trtllm*")) and (out / "vllm_serve.sh").exists() and (out / "sglang_launch.sh").exists()
    schedule = (out / "schedule.csv").read_text()
    assert "trtllm" not in schedule and "vllm" in schedule
    engines = json.loads((out / "recommendations.json").read_text())["engines"]
    assert engines["trtllm"]["how"].startswith("not planned: trtllm runs on cuda only")


def test_a_cuda_sweep_still_plans_tensorrt_llm(tmp_path):
    out = tmp_path / "rep"
    proc = CliRunner().invoke(app, ["sweep", "--batch", "1,8", "--out", str(out)])
    assert proc.exit_code == 0, proc.output
    assert (out / "trtllm_serve.sh").exists() and "trtllm  not planned" not in proc.output


def test_naming_an_engine_that_cannot_run_on_the_hardware_is_refused(cli, tmp_path):
    """--plan-for trtllm or --engine trtllm on an MI300X: exit 2, one line naming the option and the
    platform, no report (the first ended in 'expected a ServingPlan ..., got an empty dict', the
    second priced the table with TensorRT-LLM's profile while its plan said it does not run there)."""
    for args, option in ((["--plan-for", "trtllm"], "engines (--plan-for) trtllm"),
                         (["--engine", "trtllm"], "engine (--engine) trtllm")):
        out = tmp_path / option.split()[0]
        proc = cli("sweep", "--hardware", "mi300x", "--batch", "1,8", "--out", str(out), *args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and option in lines[0] and "mi300x is a rocm device" in lines[0], proc.stderr
        assert not out.exists()
