"""Inputs a fuzzing run of the new input features (hardware "platform" and driver-reported
memory_bytes, the engine profiles' "device less reserve" memory rule, the serving files' context
limit from a config.json's max_position_embeddings and rope_scaling, engines' PLATFORMS) found
crashing with a traceback or accepted silently. Each is now exit 2 with one line naming the file
and field (or a SpeedplanInputError naming the field, from the library), and writes nothing; the
last tests keep the good paths: a ROCm device of one's own plans no TensorRT-LLM, and an engine
profile of one's own with "device less reserve" prices."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest

from speedplan.cli.app import run
from speedplan.engine.memory_rule import DEVICE_LESS_RESERVE, MemoryRule
from speedplan.engine.profile import PRESET_DIR as ENGINES, get_engine
from speedplan.errors import SpeedplanInputError
from speedplan.specs.hardware import PRESET_DIR as HARDWARE, get_hardware
from speedplan.specs.model import PRESET_DIR as MODELS, get_model

SMALL = ["sweep", "--batch", "1,8", "--mechanism", "ngram", "--draft-len", "0-2"]


def _refused(capsys, argv, out, words):
    code = run(argv + ["--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and words in err, err
    assert not out.exists()
    return err


def _file(tmp_path, kind: str, base: str, path: str, value, name: str = "in.json"):
    """A copy of the preset `base` (hardware, engines or models) with `path` (a.b.c) set to `value`."""
    folder = {"hardware": HARDWARE, "engines": ENGINES, "models": MODELS}[kind]
    data = json.loads((folder / f"{base}.json").read_text())
    node, keys = data, path.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    f = tmp_path / name
    f.write_text(json.dumps(data, allow_nan=True))
    return f


# 1. A rate near zero per second overflowed the step times: the report's figures raised "All-NaN slice
#    encountered" (hbm_bytes_per_s, peak FLOP/s; link_bytes_per_s at TP 2), or an efficiency of 1e-300
#    was accepted and drew overflowing figures.
@pytest.mark.parametrize("path, value, extra, words", [
    ("hbm_bytes_per_s.value", 1e-300, [], "hbm_bytes_per_s must be at least 1e6 B/s"),
    ("peak_flops_per_s.bf16.value", 1e-300, [], "peak_flops_per_s.bf16 must be at least 1e6 FLOP/s"),
    ("link_bytes_per_s.value", 1e-300, ["--tp", "2"], "link_bytes_per_s must be at least 1e6 B/s"),
    ("bandwidth_efficiency.value", 1e-300, [], "hbm_bytes_per_s × bandwidth_efficiency = 3.35e-288 B/s, below 1e6"),
])
def test_a_rate_near_zero_is_refused(tmp_path, capsys, path, value, extra, words):
    f = _file(tmp_path, "hardware", "h100-sxm", path, value)
    _refused(capsys, SMALL + extra + ["--hardware", str(f)], tmp_path / "r", f"{f}: {words}")


# 2. A hardware name with a control character or a line break was printed as it is, in every output.
def test_a_hardware_name_must_be_one_printable_line(tmp_path, capsys):
    f = _file(tmp_path, "hardware", "h100-sxm", "name", "my\nh100")
    _refused(capsys, SMALL + ["--hardware", str(f)], tmp_path / "r", "'name' must be one line of printable text")


# 3. A default_dtype with a line break made the error two lines.
def test_a_default_dtype_with_a_line_break_is_one_line(tmp_path, capsys):
    f = _file(tmp_path, "hardware", "h100-sxm", "default_dtype", "bf16\nfp8")
    _refused(capsys, SMALL + ["--hardware", str(f)], tmp_path / "r", "default dtype 'bf16\\nfp8' has no peak FLOP/s")


# 4. A malformed {"value", "source"} entry was quoted whole: memory_bytes' source is ~700 characters.
def test_a_malformed_number_entry_is_quoted_short(tmp_path, capsys):
    f = _file(tmp_path, "hardware", "h100-sxm", "memory_bytes.value", "80e9")
    err = _refused(capsys, SMALL + ["--hardware", str(f)], tmp_path / "r",
                   f"{f}: memory_bytes: expected {{\"value\": number, \"source\": text}}, got {{'value': '80e9'")
    assert len(err) < 250, err


# 5. Library: a Hardware of memory_bytes inf fell through SGLang's memory classes (AssertionError
#    "unreachable"); "80e9" or None raised a TypeError.
@pytest.mark.parametrize("value", [float("inf"), "80e9", None])
def test_a_hardware_built_in_python_checks_its_memory(value):
    with pytest.raises(SpeedplanInputError, match="memory_bytes must be a finite number > 0"):
        get_hardware("h100-sxm").with_overrides(memory_bytes=value)


# 6. Library: an engine profile's memory rule was not checked: None, a share of None or "0.8", "Device"
#    or an unknown reserve failed in the planner (AttributeError, TypeError, MemoryError, KeyError).
@pytest.mark.parametrize("make, words", [
    (lambda: None, "memory must be a MemoryRule"),
    (lambda: MemoryRule(None), "share must be a number in (0, 1]"),
    (lambda: MemoryRule("0.8"), "share must be a number in (0, 1]"),
    (lambda: MemoryRule(0.8, "Device"), "of must be one of"),
    (lambda: MemoryRule(None, DEVICE_LESS_RESERVE, "x", "bogus"), "reserve must be one of 'sglang-0.5.23'"),
    (lambda: MemoryRule(0.8, DEVICE_LESS_RESERVE, "x", "sglang-0.5.23"), "takes no share"),
])
def test_a_memory_rule_built_in_python_is_checked(make, words):
    with pytest.raises(SpeedplanInputError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        dataclasses.replace(get_engine("sglang"), memory=make())
    mine = MemoryRule(of=DEVICE_LESS_RESERVE, source="document: mine", reserve="sglang-0.5.23")  # share not given
    assert mine.share is None and mine == MemoryRule(None, DEVICE_LESS_RESERVE, "document: mine", "sglang-0.5.23")


# 7. Library: ModelSpec.max_context was not checked: NaN raised a ValueError in serving.context,
#    "131072" a TypeError, 2**40 built 8 GiB arrays; -5 was told as a "-5-token context".
@pytest.mark.parametrize("value", [float("nan"), "131072", 2 ** 40, -5, True])
def test_a_model_spec_checks_its_context(value):
    with pytest.raises(SpeedplanInputError, match="max_context must be an integer in 0..2,147,483,648"):
        dataclasses.replace(get_model("llama-3.1-8b"), max_context=value)
    assert type(dataclasses.replace(get_model("llama-3.1-8b"), max_context=np.int64(8192)).max_context) is int


# 8. config.json: a malformed rope_scaling was ignored without a word (the context the serving files
#    write follows from it), an extension past 2**31 tokens was cut to 2**31, and
#    max_position_embeddings 0 was read as "no limit".
@pytest.mark.parametrize("change, words", [
    ({"rope_scaling": "yarn"}, "'rope_scaling' must be an object (or null), got 'yarn'"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": "4"}}, "rope_scaling factor must be a number, got '4'"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": True}}, "rope_scaling factor must be a number, got True"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": -4}}, "rope_scaling factor must be > 0"),
    ({"rope_scaling": {"rope_type": ["yarn"], "factor": 4}}, "rope_scaling rope_type must be text"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 1e9, "original_max_position_embeddings": 32768}},
     "rope_scaling extends the context to 32,768 × 1e+09"),
    ({"max_position_embeddings": 0}, "'max_position_embeddings' is 0"),
])
def test_a_malformed_context_in_a_config_is_refused(tmp_path, capsys, change, words):
    data = {**json.loads((MODELS / "llama-3.1-8b.json").read_text()), "max_position_embeddings": 32768, **change}
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    _refused(capsys, SMALL + ["--model", str(folder)], tmp_path / "r", f"{folder / 'config.json'}: {words}")


# 9. The serving files' context note said n-gram's KV was "target and drafter": n-gram loads no drafter.
def test_an_ngram_launch_is_not_said_to_load_a_drafter():
    from speedplan.plan.mechanisms import parse_mechanism
    from speedplan.serving.context import context_fit

    target = get_model("llama-3.1-70b")
    fit = context_fit(target, parse_mechanism("ngram", target), get_engine("vllm").memory,
                      get_hardware("h100-sxm").memory_bytes, 2, 2, 1, 4096)
    assert not fit.drafter and not fit.fits
    assert "(the target alone: ngram loads no drafter model)" in fit.why() and "target and drafter" not in fit.why()


# Good paths (they held before the fixes; kept as checks of the new features together).
def test_a_rocm_device_and_a_reserve_profile_of_ones_own(tmp_path, capsys):
    """An MI300X-like file of one's own (platform rocm) plans no TensorRT-LLM and writes none of its
    files; an engine profile of one's own with "device less reserve" prices SGLang's reserve there."""
    hw = json.loads((HARDWARE / "mi300x.json").read_text())
    hw.update(name="my-mi300x", platform="rocm")
    hw_file = tmp_path / "hw.json"
    hw_file.write_text(json.dumps(hw))
    engine = copy.deepcopy(json.loads((ENGINES / "vllm.json").read_text()))
    engine.update(name="my-engine", memory={"of": DEVICE_LESS_RESERVE, "reserve": "sglang-0.5.23", "source": "document: mine"})
    engine_file = tmp_path / "e.json"
    engine_file.write_text(json.dumps(engine))
    out = tmp_path / "r"
    assert run(SMALL + ["--hardware", str(hw_file), "--engine", str(engine_file), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "trtllm  not planned: trtllm runs on cuda only, and my-mi300x is a rocm device" in printed
    files = {p.name for p in out.iterdir()}
    assert "vllm_serve.sh" in files and "sglang_launch.sh" in files and not any(f.startswith("trtllm") for f in files)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["engine_memory"] == engine["memory"] and meta["hardware"] == "my-mi300x"
