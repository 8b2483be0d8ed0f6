"""Inputs a fuzzing run of 2026-12-04 (1,794 mutated engine profiles, SGLang logs, benchmark
files and config.json files) found crashing with a traceback or accepted silently. Each is now
exit 2 with one line naming the file and field, and writes nothing."""

from __future__ import annotations

import copy
import json

import pytest

from speedplan.cli.app import run
from speedplan.engine.profile import PRESET_DIR
from tests.specs.test_moe_decoder_families import GRANITE_MOE_SHARED, OLMO3_7B, OLMOE_1B_7B

BIG = 10 ** 400  # valid JSON; float() refuses it


def _refused(capsys, argv, out, words):
    code = run(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and words in err, err
    assert not out.exists()


def _edit(data: dict, path: str, value):
    keys = path.split(".")
    node = data
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[keys[-1]] = value
    return data


@pytest.mark.parametrize("base, path, value, words", [
    ("vllm", "memory.share", BIG, "memory.share must be a number in (0, 1]"),
    ("trtllm", "memory", None, "'memory' is null"),
    ("vllm", "terms.host_step_us.value", BIG, "terms.host_step_us: expected"),
    ("sglang", "fit.fitted", None, "fit.fitted must be a list of term names"),
    ("sglang", "fit.rows.0.batch", BIG, "fit.rows[0].batch must be a finite number"),
    ("sglang", "fit.values.host_step_us", BIG, "fit.values must be an object of {term: finite number}"),
    ("sglang", "fit.median_abs_residual", -1, "fit.median_abs_residual must be a finite number >= 0"),
    ("sglang", "fit.loo_median_error", BIG, "fit.loo_median_error must be a finite number >= 0"),
    ("vllm", "version", "", "field 'version' must be one line of printable text"),
])
def test_engine_profiles(tmp_path, capsys, base, path, value, words):
    data = _edit(json.loads((PRESET_DIR / f"{base}.json").read_text()), path, value)
    f = tmp_path / "e.json"
    f.write_text(json.dumps(data))
    _refused(capsys, ["sweep", "--mechanism", "eagle3", "--batch", "1,8", "--engine", str(f), "--out",
                      str(tmp_path / "r")], tmp_path / "r", words)


LAUNCH = ("[2026-01-12 10:00:01] server_args=ServerArgs(model_path='x', tp_size=1, speculative_algorithm='EAGLE3', "
          "speculative_num_steps={s}, speculative_eagle_topk=1, speculative_num_draft_tokens={t}, "
          "speculative_adaptive=False)")
DECODE = ("[2026-01-12 10:00:31 TP0] Decode batch, #running-req: 8, #token: 9000, token usage: 0.02, "
          "accept len: {al}, {rate}cuda graph: True, gen throughput (token/s): 2400.00, #queue-req: 0")


@pytest.mark.parametrize("lines, at, words", [
    ([DECODE.format(al="2.80", rate="")], "@²", "the draft length after @ must be an integer in 1..64"),
    ([DECODE.format(al="2.80", rate="")], "@1000", "the draft length after @ must be an integer in 1..64"),
    ([DECODE.format(al="2.80", rate="accept rate: 1e-300, ")], "", "give a draft length of 1.8e+300, above 64"),
    ([LAUNCH.format(s=3, t=4), DECODE.format(al="2.00", rate=""), DECODE.format(al="6.50", rate="")], "",
     "accept len 6.5 is above 1 + D = 4"),
    ([LAUNCH.format(s="1_0", t="1_1"), DECODE.format(al="2.80", rate="")], "", "is not a whole number"),
])
def test_sglang_logs(tmp_path, capsys, lines, at, words):
    f = tmp_path / "s.log"
    f.write_text("\n".join(lines) + "\n")
    _refused(capsys, ["sweep", "--mechanism", "eagle3", "--batch", "1,8", "--acceptance", f"eagle3:{f}{at}",
                      "--out", str(tmp_path / "r")], tmp_path / "r", words)


VLLM_RUN = {"max_concurrency": 16, "num_prompts": 320, "completed": 320, "failed": 0, "request_rate": "inf",
            "output_throughput": 2210.5, "mean_tpot_ms": 6.9, "total_input_tokens": 327680,
            "total_output_tokens": 327680, "spec_decode_acceptance_length": 2.71, "spec_decode_num_drafts": 1000,
            "spec_decode_draft_tokens": 3000, "mechanism": "eagle3", "draft_len": 3}
SGLANG_LINE = {"batch_size": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.6, "step_time": 0.0098,
               "completion_tokens": 512}


@pytest.mark.parametrize("engine, change, words", [
    ("vllm", {"mean_tpot_ms": BIG}, "field 'mean_tpot_ms' must be finite"),
    ("vllm", {"output_throughput": BIG}, "field 'output_throughput' must be finite"),
    ("vllm", {"output_throughput": -5}, "field 'output_throughput' must be a positive number"),
    ("vllm", {"num_prompts": -16}, "field 'num_prompts' must be a count >= 1"),
    ("vllm", {"failed": -5}, "field 'failed' must be a count >= 0"),
    ("vllm", {"spec_decode_num_drafts": -1000}, "field 'spec_decode_num_drafts' must be a count >= 0"),
    ("vllm", {"completed": 10 ** 15}, "give less than one token of context"),
    ("sglang", {"steps": BIG}, "field 'steps' must be finite"),
    ("sglang", {"completion_tokens": -256}, "field 'completion_tokens' must be at least 1 token"),
])
def test_benchmark_files(tmp_path, capsys, engine, change, words):
    if engine == "vllm":
        f = tmp_path / "m.json"
        f.write_text(json.dumps({**VLLM_RUN, **change}))
    else:
        f = tmp_path / "b.jsonl"
        f.write_text(json.dumps({**SGLANG_LINE, "steps": 0, "acc_length": 1.0}) + "\n"
                     + json.dumps({**SGLANG_LINE, **change}) + "\n")
    out = tmp_path / "o.json"
    _refused(capsys, ["calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", engine,
                      "--measurements", str(f), "--out", str(out)], out, words)


@pytest.mark.parametrize("cfg, path, value, words", [
    (OLMO3_7B, "rope_scaling", {"rope_type": "yarn", "factor": float("inf"), "original_max_position_embeddings": 8192},
     "rope_scaling factor must be a finite number"),
    (OLMOE_1B_7B, "rope_scaling", {"rope_type": "dynamic", "factor": 1e305}, "rope_scaling factor must be a finite"),
    (OLMOE_1B_7B, "max_position_embeddings", BIG, "'max_position_embeddings' must be an integer in 0.."),
    (OLMO3_7B, "rope_scaling", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": BIG},
     "rope_scaling original_max_position_embeddings must be an integer in 1.."),
    (OLMOE_1B_7B, "num_experts", "", "'num_experts' must be an integer"),
    (OLMOE_1B_7B, "num_experts", 0, "is a mixture of experts, but 'num_experts'"),
    (OLMOE_1B_7B, "tie_word_embeddings", "false", "'tie_word_embeddings' must be true, false or null"),
    (OLMOE_1B_7B, "torch_dtype", [], "torch_dtype [] is not one of"),
    (GRANITE_MOE_SHARED, "shared_intermediate_size", [], "'shared_intermediate_size' must be an integer"),
])
def test_config_files(tmp_path, capsys, cfg, path, value, words):
    data = _edit(copy.deepcopy(cfg), path, value)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(data))
    _refused(capsys, ["sweep", "--model", str(f), "--tp", "2", "--batch", "1,8", "--out", str(tmp_path / "r")],
             tmp_path / "r", words)


def test_a_window_far_beyond_any_context_is_refused(tmp_path, capsys):
    data = {k: v for k, v in OLMO3_7B.items() if k not in ("max_position_embeddings", "rope_scaling")}
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**data, "sliding_window": 10 ** 19}))
    _refused(capsys, ["sweep", "--model", str(f), "--batch", "1", "--out", str(tmp_path / "r")], tmp_path / "r",
             "'sliding_window' must be a positive integer (at most 2**31)")


def test_a_fit_figure_calibrate_can_write_is_read_back(tmp_path):
    """fit.max_abs_residual of 24343384.5 (a row 2.4e7 off: calibrate writes what it measured)
    was refused by a 1e6 cap the message did not name (review, 2026-12-04)."""
    from speedplan.engine.profile import get_engine

    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    data["fit"]["max_abs_residual"] = 24343384.5
    f = tmp_path / "e.json"
    f.write_text(json.dumps(data))
    assert get_engine(str(f)).fit["max_abs_residual"] == 24343384.5
