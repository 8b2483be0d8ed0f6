"""Inputs mended in stop 57, from an audit of every command's bad input (each ended in a traceback,
was accepted though absurd, or was refused with a misleading line) and from real multimodal
config.json files."""

from __future__ import annotations

import json

import pytest

from speedplan.cli.app import run
from speedplan.errors import SpeedplanInputError
from speedplan.specs.model import PRESET_DIR as MODELS

BIG = "1" * 5000  # more digits than Python's int() converts (4,300)
SMALL = ["sweep", "--batch", "1,8", "--mechanism", "ngram", "--draft-len", "0-2"]
SCRAPE = ('vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0\n'
          'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0\n'
          'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 70.0\n'
          'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="POS"} 30.0\n')


def _error(capsys, argv) -> str:
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("where", ["model", "acceptance", "batch-weights"])
def test_a_number_of_more_digits_than_python_reads_is_one_line(tmp_path, capsys, where):
    f = tmp_path / "big.json"
    if where == "model":
        cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
               "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 1000}
        f.write_text(json.dumps(cfg).replace('"vocab_size": 1000', f'"vocab_size": {BIG}'))
        argv = ["models", str(f)]
    elif where == "acceptance":
        f.write_text('{"eagle3": {"al": %s}}' % BIG)
        argv = [*SMALL, "--acceptance", str(f), "--out", str(tmp_path / "r")]
    else:
        f.write_text('{"8": %s}' % BIG)
        argv = [*SMALL, "--batch-weights", str(f), "--out", str(tmp_path / "r")]
    assert "more than 4,300 digits" in _error(capsys, argv)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv, says", [
    (["--batch", BIG], "is far too large"),
    (["--context", f"1,{BIG}"], "is far too large"),
    (["--acceptance", f"eagle3:al=3@{BIG}"], "expected al=A@D"),
])
def test_options_of_thousands_of_digits_are_refused(tmp_path, capsys, argv, says):
    assert says in _error(capsys, ["sweep", *argv, "--out", str(tmp_path / "r")])


def test_a_batch_weights_file_with_a_huge_batch_says_so_not_pythons_words(tmp_path, capsys):
    f = tmp_path / "w.csv"
    f.write_text(f"batch,weight\n{BIG},1\n")
    err = _error(capsys, [*SMALL, "--batch-weights", str(f), "--out", str(tmp_path / "r")])
    assert "is far too large" in err and "set_int_max_str_digits" not in err
    assert "no such file" in _error(capsys, [*SMALL, "--batch-weights", str(tmp_path / "missing.json")])


@pytest.mark.parametrize("position", ["²", "٣", "1" * 50])
def test_a_metrics_position_must_be_a_plain_number(tmp_path, position):
    from speedplan.engine.readers.vllm_metrics import read_vllm_metrics

    f = tmp_path / "metrics.txt"
    f.write_text(SCRAPE.replace("POS", position))
    with pytest.raises(SpeedplanInputError, match='needs an integer label position="N"'):
        read_vllm_metrics(f)


def test_an_engine_profile_fit_of_the_wrong_shape_is_refused_where_it_is_read(tmp_path, capsys):
    from speedplan.engine.profile import PRESET_DIR

    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    for key, value, says in (("kept", [1], "fit.kept must be an object"),
                             ("kept_values", {"launch_us": "x"}, "fit.kept_values must be an object"),
                             ("acceptance_fitted", {"eagle3": {"p_1": 2, "decay": 1}}, "fit.acceptance_fitted")):
        f = tmp_path / f"{key}.json"
        f.write_text(json.dumps({**data, "fit": {**data["fit"], key: value}}))
        assert says in _error(capsys, ["engines", str(f)])  # `engines FILE` had ended in an AttributeError


def test_an_engine_profile_error_names_the_file_once_and_a_device_is_no_file(tmp_path, capsys):
    from speedplan.engine.profile import PRESET_DIR

    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    data["terms"]["launch_us"]["value"] = -5
    f = tmp_path / "mine.json"
    f.write_text(json.dumps(data))
    err = _error(capsys, ["engines", str(f)])
    assert err == f"speedplan: error: engine profile {f}: launch_us = -5.0 outside 0..100 (µs per kernel launch)\n"
    assert "not a regular file" in _error(capsys, [*SMALL, "--engine", "/dev/null"])
    (tmp_path / "runs.csv").write_text("mechanism,batch\n")
    assert "(give a shipped profile's name" in _error(capsys, ["engines", str(tmp_path / "runs.csv")])


def test_more_mtp_layers_than_a_model_has_are_refused():
    from speedplan.specs.hf_config import from_hf_config

    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
           "intermediate_size": 128, "vocab_size": 1000}
    assert from_hf_config({**cfg, "num_nextn_predict_layers": 1}).mtp_layers == 1
    with pytest.raises(SpeedplanInputError, match="3 MTP layers .* on a model of 2"):
        from_hf_config({**cfg, "num_nextn_predict_layers": 3})
    import dataclasses

    from speedplan.specs.model import get_model

    with pytest.raises(SpeedplanInputError, match="1000 MTP layers .* on a model of 61"):  # a spec built in Python
        dataclasses.replace(get_model("deepseek-v3"), mtp_layers=1000)


def _no_measuring(*args, **kwargs):
    raise AssertionError("a refused input started measuring")


def test_bench_caps_visits_and_quiet_tries_before_measuring(tmp_path, capsys, monkeypatch):
    runner = pytest.importorskip("microbench.runner")
    monkeypatch.setattr(runner, "run", _no_measuring)  # --visits 100000 had timed for minutes
    assert "--visits must be in 1..50" in _error(capsys, ["bench", "--out", str(tmp_path / "b"), "--visits", "100000"])
    assert "--quiet-tries must be in 1..20" in _error(capsys, ["bench", "--out", str(tmp_path / "b"),
                                                              "--quiet-tries", "1000"])
    assert not (tmp_path / "b").exists()


def test_validate_refuses_an_empty_hardware_instead_of_a_full_run(tmp_path, capsys, monkeypatch):
    import speedplan.validate.run as validate_run

    monkeypatch.setattr(validate_run, "run_validation", _no_measuring)
    assert "--hardware is empty" in _error(capsys, ["validate", "--quick", "--hardware", "", "--out",
                                                    str(tmp_path / "v")])


def test_predict_takes_no_dash_for_standard_streams(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "--out -: predict reads and writes files" in _error(
        capsys, ["predict", "ops", "--hardware", "h100-sxm", "--in", "ops.csv", "--out", "-"])
    assert "--in -: predict reads and writes files" in _error(
        capsys, ["predict", "ops", "--hardware", "h100-sxm", "--in", "-", "--out", "pred.csv"])
    assert not (tmp_path / "-").exists()


def test_run_refuses_a_random_model_the_runtime_cannot_build(tmp_path, capsys):
    pytest.importorskip("torch")
    cfg = json.loads((MODELS / "smollm2-135m.json").read_text())
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    f = tmp_path / "odd.json"
    f.write_text(json.dumps({**cfg, "head_dim": 63}))
    err = _error(capsys, ["run", "--prompt", "hi", "--max-new-tokens", "2", "--no-compare", "--weights", f"random:{f}"])
    assert "head_dim must be even for RoPE" in err
    f.write_text(json.dumps({**cfg, "max_position_embeddings": 4}))
    err = _error(capsys, ["run", "--prompt", "hi", "--raw", "--max-new-tokens", "8", "--mechanism", "none",
                          "--no-compare", "--weights", f"random:{f}"])
    assert "exceeds the random:" in err and "model's 4 positions" in err


def test_profile_check_of_a_preset_without_a_profile_and_a_null_preset(tmp_path, capsys):
    assert "a hardware preset with no measured profile shipped" in _error(capsys, ["profile", "check", "a100-80gb"])
    from speedplan.profile.load import profile_hardware

    with pytest.raises(SpeedplanInputError, match="'hardware_preset' must name a hardware preset, got None"):
        profile_hardware({"hardware_preset": None, "origin": "measured"}, {}, tmp_path)


def test_a_profile_measured_on_a_cpu_cannot_name_a_gpu_preset(tmp_path):
    """A CPU's tables with hardware_preset "h100-sxm" had priced a sweep "on h100-sxm" (validate
    refused the same folder)."""
    from speedplan.profile.load import profile_hardware

    for device, preset in (("cpu", "h100-sxm"), ("cuda", "cpu-local")):
        with pytest.raises(SpeedplanInputError, match=f"measured on device '{device}' but names the preset"):
            profile_hardware({"hardware_preset": preset, "origin": "measured", "device": device}, {}, tmp_path)
    assert profile_hardware({"hardware_preset": "h200-sxm", "origin": "datasheet-roofline", "device": "cuda"},
                            {}, tmp_path).name == "h200-sxm"


def test_a_prompts_file_messages_field_must_be_a_list(tmp_path):
    from speedplan.runtime.options import read_prompts

    f = tmp_path / "p.jsonl"
    f.write_text('{"messages": "hi"}\n')
    with pytest.raises(SpeedplanInputError, match="field 'messages' must be a list"):
        read_prompts(f)
    f.write_text('{"prompt": "hi"}\n{"messages": [{"role": "user", "content": "hi"}]}\n')
    assert read_prompts(f) == ["hi", [{"role": "user", "content": "hi"}]]


@pytest.mark.parametrize("ranks, ok", [([[1, 2]], True), ([[0, 2]], False), ([[1, 9]], False), ([[1]], False)])
def test_a_tree_traces_accepted_ranks_are_checked_against_the_tree(tmp_path, ranks, ok):
    """Ranks of 0 or above topk, or a path shorter than its accepted count, had been dropped in silence."""
    from speedplan.plan.acceptance_sources import read_trace

    meta = {"type": "meta", "schema": "speedplan.trace/1", "mechanism": "eagle-tree", "draft_len": 4,
            "tree": {"depth": 4, "topk": 4}, "batch": 1}
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps(meta) + "\n" + json.dumps({"type": "step", "batch": 1, "accepted": [2],
                                                       "accepted_ranks": ranks}) + "\n")
    if ok:
        assert read_trace(f)[1][0]["accepted_ranks"] == ranks
    else:
        with pytest.raises(SpeedplanInputError, match=r"accepted_ranks\[0\] .* must hold 2 ranks .* in 1..4"):
            read_trace(f)


def test_a_profile_tables_shapes_are_whole_numbers(tmp_path):
    from speedplan.profile.tables import TABLES, read_table

    f = tmp_path / "gemm.csv"
    f.write_text("m,n,k,dtype,latency_us\n2,576,576,fp32,125.4\n1.5,576,576,fp32,116.9\n")
    with pytest.raises(SpeedplanInputError, match="column 'm' line 3: '1.5' is not a positive whole number"):
        read_table(f, TABLES["gemm"])
    f.write_text("m,n,k,dtype,latency_us\n2,576,576,fp32,125.4\n1.0,576,576,fp32,0.5\n")  # 1.0 is M = 1
    assert read_table(f, TABLES["gemm"])["latency_us"].tolist() == [125.4, 0.5]


def test_sglang_bench_speculative_fields_are_named_as_the_file_names_them(tmp_path):
    """topk 1000 was refused as field 'mechanism', a field the file has not."""
    from speedplan.engine.readers.measurements import read_measurements

    row = {"batch_size": 8, "steps": 3, "topk": 1000, "num_draft_tokens": 4, "acc_length": 2.5, "step_time": 0.01,
           "speed": 800, "completion_tokens": 256, "input_len": 512}
    f = tmp_path / "b.jsonl"
    f.write_text(json.dumps(row) + "\n")
    with pytest.raises(SpeedplanInputError, match=r"field 'topk' must be in 1..64, got 1000"):
        read_measurements(f)


def test_predict_says_a_row_is_short_where_its_dtype_is_missing(tmp_path, capsys):
    (tmp_path / "ops.csv").write_text("op,m,n,k,dtype\ngemm,1,2,3\n")
    err = _error(capsys, ["predict", "ops", "--hardware", "h100-sxm", "--in", str(tmp_path / "ops.csv"),
                          "--out", str(tmp_path / "pred.csv")])
    assert "row 2: column 'dtype' must be one of" in err and "fewer cells than the header" in err


def test_the_default_report_folder_of_a_hardware_file_takes_the_files_name(tmp_path, capsys, monkeypatch):
    """A file of one's own named like a preset (kept, stop 44) wrote reports/MODEL-h100-sxm-ENGINE, the
    preset's own folder: it is named by the file now."""
    from speedplan.specs.hardware import PRESET_DIR as HARDWARE

    data = json.loads((HARDWARE / "h100-sxm.json").read_text())
    data["hbm_bytes_per_s"]["value"] /= 2
    (tmp_path / "slow-h100.json").write_text(json.dumps(data))
    monkeypatch.chdir(tmp_path)
    assert run(["sweep", "--batch", "1,8", "--mechanism", "ngram", "--draft-len", "0-2",
                "--hardware", "slow-h100.json"]) == 0
    assert (tmp_path / "reports" / "llama-3.1-8b-slow-h100-vllm" / "report.html").is_file()
    assert not (tmp_path / "reports" / "llama-3.1-8b-h100-sxm-vllm").exists()


def test_the_models_table_names_an_mla_latent_cache():
    """DeepSeek-V3's row read kv_heads 1 and attention "full": its cache is the 512+64 latent."""
    from speedplan.report.catalog import model_rows

    rows = {r["model"]: r["attention"] for r in model_rows()}
    assert rows["deepseek-v3"] == "MLA latent 512+64; full" and rows["llama-3.1-8b"] == "full"
    assert rows["deepseek-v3.2"].startswith("MLA latent 512+64; sparse top-2048")


def test_a_loop_of_links_is_refused_where_pathlib_says_eloop(tmp_path, monkeypatch):
    """Python 3.13's resolve(strict=True) raises OSError(ELOOP) for a loop, not RuntimeError."""
    import errno
    from pathlib import Path

    from speedplan.cli.options import check_output

    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")

    def eloop(self, strict=False):
        raise OSError(errno.ELOOP, "Too many levels of symbolic links", str(self))

    monkeypatch.setattr(Path, "resolve", eloop)
    with pytest.raises(SpeedplanInputError, match="a loop of symbolic links"):
        check_output(tmp_path / "a", "--trace", folder=False, kind="runtime trace")
