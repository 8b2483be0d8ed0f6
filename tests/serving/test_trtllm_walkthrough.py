"""A TensorRT-LLM user's walk: `speedplan sweep --engine trtllm --plan-for trtllm`, then the
YAML it writes held to TensorRT-LLM's own rules (tensorrt_llm/llmapi/llm_args.py @ 0004396720054f:
the validators of DecodingBaseConfig, Eagle3DecodingConfig, MTPDecodingConfig, NGramDecodingConfig
and DraftTargetDecodingConfig; _torch/speculative/utils.py get_draft_len_for_batch_size; the
CudaGraphConfig default of 128), and its draft lengths against the plan's schedule.csv."""

import bisect
import csv

import pytest
import yaml
from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.serving.plan import OPEN_END_BATCH, ServingPlan
from speedplan.serving.trtllm import CUDA_GRAPH_MAX_BATCH, MAX_BATCH, render

runner = CliRunner()
YAML = "trtllm_extra_llm_api_options.yaml"
# decoding_type literal -> the fields its config class has (DecodingBaseConfig's and its own)
BASE = {"decoding_type", "max_draft_len", "max_total_draft_tokens", "speculative_model", "draft_len_schedule"}
FIELDS = {"Eagle3": BASE | {"use_dynamic_tree", "dynamic_tree_max_topK"}, "MTP": BASE | {"num_nextn_predict_layers"},
          "NGram": BASE | {"max_matching_ngram_size"}, "Draft_Target": BASE}
TOP_LEVEL = {"speculative_config", "cuda_graph_config", "max_batch_size"}  # TorchLlmArgs fields


def trtllm_accepts(cfg: dict) -> None:
    """What TorchLlmArgs(**yaml) would refuse, re-stated from llm_args.py's validators."""
    assert set(cfg) <= TOP_LEVEL, set(cfg) - TOP_LEVEL
    spec = cfg["speculative_config"]
    kind = spec["decoding_type"]
    assert kind in FIELDS and set(spec) <= FIELDS[kind], spec
    d_max = spec["max_draft_len"]
    assert isinstance(d_max, int) and d_max > 0  # "max_draft_len must be > 0 for Eagle / NGram / MTP / DraftTarget"
    if kind in ("Eagle3", "Draft_Target"):
        assert spec.get("speculative_model")  # "Draft model must be provided"
    schedule = spec.get("draft_len_schedule")
    if schedule is not None:  # validate_draft_len_schedule_and_sort
        assert all(isinstance(k, int) and k >= 1 and isinstance(v, int) and v >= 0 for k, v in schedule.items())
        assert schedule[min(schedule)] == d_max and max(schedule.values()) <= d_max
    if spec.get("use_dynamic_tree"):
        top_k, nodes = spec["dynamic_tree_max_topK"], spec["max_total_draft_tokens"]
        assert top_k > 0 and d_max <= nodes <= top_k * d_max
    graphs = cfg.get("cuda_graph_config", {})
    assert set(graphs) <= {"max_batch_size", "batch_sizes", "enable_padding"}


def runtime_draft_len(spec: dict, batch: int) -> int:
    """get_draft_len_for_batch_size: the first key >= batch; above every key 0; no schedule: max_draft_len."""
    schedule = spec.get("draft_len_schedule")
    if schedule is None:
        return spec["max_draft_len"]
    keys = sorted(schedule)
    i = bisect.bisect_left(keys, batch)
    return schedule[keys[i]] if i < len(keys) else 0


def sweep_for_trtllm(tmp_path, *args):
    out = tmp_path / "rep"
    proc = runner.invoke(app, ["sweep", "--engine", "trtllm", "--plan-for", "trtllm", *args, "--out", str(out)])
    assert proc.exit_code == 0, proc.output
    cfg = yaml.safe_load((out / YAML).read_text())  # what trtllm-serve does with the file
    rows = [r for r in csv.DictReader((out / "schedule.csv").open()) if r["engine"] == "trtllm"]
    return out, proc.stdout, cfg, rows


@pytest.mark.parametrize("args", [
    ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--mechanism", "eagle3"],
    ["--model", "deepseek-v3", "--hardware", "h200-sxm", "--tp", "8", "--mechanism", "mtp", "--batch", "1,8,64,256"],
])
def test_cli_file_is_what_trtllm_accepts_and_runs_the_planned_d(tmp_path, args):
    out, stdout, cfg, rows = sweep_for_trtllm(tmp_path, *args)
    trtllm_accepts(cfg)
    spec = cfg["speculative_config"]
    assert rows and "trtllm" in stdout
    for row in rows:  # every planned batch size runs the D schedule.csv planned for it
        assert runtime_draft_len(spec, int(row["batch"])) == int(row["draft_len"]), row
    largest = max(int(r["runs_at_batch"]) for r in rows)
    # CUDA graphs cover every planned batch: the engine profile prices each step as a graph replay
    assert cfg.get("cuda_graph_config", {}).get("max_batch_size", CUDA_GRAPH_MAX_BATCH) >= largest
    assert ("cuda_graph_config" in cfg) == (largest > CUDA_GRAPH_MAX_BATCH)
    serve = (out / "trtllm_serve.sh").read_text()
    assert f"--extra_llm_api_options {YAML}" in serve and "--backend pytorch" in serve
    assert "eagle3_one_model" not in spec  # ignored field
    # deprecated on main (dropped where max_draft_len is given) but where releases before PR #12341 read D:
    # written equal to max_draft_len for MTP only (tests/serving/test_trtllm_versions.py)
    assert spec.get("num_nextn_predict_layers", spec["max_draft_len"]) == spec["max_draft_len"]
    assert ("num_nextn_predict_layers" in spec) == (spec["decoding_type"] == "MTP")


SCHEDULES = [((1, 4),), ((1, 5), (8, 3), (64, 0)), ((1, 3), (8, 0), (32, 2)), ((1, 2), (16, 4)),
             ((1, 6), (4, 6), (128, 1))]


@pytest.mark.parametrize("mechanism", ["eagle3", "mtp", "draft-model", "ngram", "eagle3-tree"])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_hand_made_plans_render_what_trtllm_accepts(mechanism, schedule):
    kw = {"draft-model": {"draft_model": "llama-3.2-1b"}, "eagle3-tree": {"tree": {"topk": 4, "depth": 3, "nodes": 8}}}
    plan = ServingPlan(model="deepseek-v3" if mechanism == "mtp" else "llama-3.1-8b", mechanism=mechanism,
                       draft_len=schedule[0][1], schedule=schedule, **kw.get(mechanism, {}))
    cfg = yaml.safe_load(render(plan)[YAML])
    trtllm_accepts(cfg)
    spec = cfg["speculative_config"]
    if "draft_len_schedule" not in spec:
        return  # a fixed launch: NGram and trees do not follow draft_len_schedule
    first = schedule[0][1]
    floor = 1 if mechanism == "draft-model" else 0  # Draft_Target runs a 0 as 1 (min_runtime_draft_len): written so
    for i, (batch, d) in enumerate(schedule):  # each planned range, capped at the batch-1 D
        last = schedule[i + 1][0] - 1 if i + 1 < len(schedule) else OPEN_END_BATCH
        assert runtime_draft_len(spec, batch) == runtime_draft_len(spec, last) == max(min(d, first), floor)


def test_off_at_batch_one_is_a_fixed_launch_that_says_so():
    """draft_len_schedule's smallest key must map to max_draft_len > 0: TensorRT-LLM cannot start off."""
    plan = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=3, schedule=((1, 0), (8, 3)))
    text = render(plan)[YAML]
    spec = yaml.safe_load(text)["speculative_config"]
    assert "draft_len_schedule" not in spec and spec["max_draft_len"] == 3
    assert "cannot express" in text


def test_large_batches_get_cuda_graphs_and_a_memory_note():
    # planner rows (batch, D, speedup, loss, runs_at_batch): at 512 only 300 fit; at 4096 2500 fit
    rows = ((1, 4, 2.0, 0.0, 1), (512, 2, 1.4, 0.0, 300), (4096, 1, 1.1, 0.0, 2500))
    plan = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=4,
                       schedule=((1, 4), (512, 2), (4096, 1)), per_batch=rows)
    text = render(plan)[YAML]
    cfg = yaml.safe_load(text)
    trtllm_accepts(cfg)
    assert cfg["cuda_graph_config"]["max_batch_size"] == 2500 and cfg["max_batch_size"] == 2500 > MAX_BATCH
    assert "free_gpu_memory_fraction" in text and "captures decode CUDA graphs up to batch 128" in text
    small = ServingPlan(model="llama-3.1-8b", mechanism="eagle3", draft_len=4, schedule=((1, 4), (64, 2)),
                        per_batch=((1, 4, 2.0, 0.0, 1), (64, 2, 1.5, 0.0, 64)))
    assert set(yaml.safe_load(render(small)[YAML])) == {"speculative_config"}


def test_plain_decoding_above_batch_128_gets_cuda_graphs_too():
    """The trtllm profile prices plain steps as graph replays as well: an off plan at B = 256 ran
    without a YAML, so TensorRT-LLM's default graphs stopped at batch 128 (review, 2026-12-04)."""
    off = ServingPlan(model="llama-3.1-8b", mechanism="none", draft_len=0, schedule=((1, 0),),
                      per_batch=((256, 0, 1.0, 0.0, 256), (512, 0, 1.0, 0.0, 512)))
    files = render(off)
    assert yaml.safe_load(files[YAML]) == {"cuda_graph_config": {"max_batch_size": 512}}
    assert "--extra_llm_api_options trtllm_extra_llm_api_options.yaml" in files["trtllm_serve.sh"]
    small = ServingPlan(model="llama-3.1-8b", mechanism="none", draft_len=0, schedule=((1, 0),),
                        per_batch=((1, 0, 1.0, 0.0, 1), (64, 0, 1.0, 0.0, 64)))
    assert set(render(small)) == {"trtllm_serve.sh"}  # within the default graphs: no file needed
