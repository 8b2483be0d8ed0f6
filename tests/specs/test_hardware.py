"""Hardware preset files: every number is checked when the file is read (an audit of
2026-12-04 priced sm_count 1e300 into an "All-NaN slice" traceback, and a link latency of
-100 us into 3,418 tok/s/user against 507)."""

from __future__ import annotations

import json

import pytest

from speedplan.cli.app import run
from speedplan.errors import SpeedplanInputError
from speedplan.specs.hardware import PRESET_DIR, PRESETS, load_hardware_file


def _preset_with(tmp_path, field: str, value, name: str = "h100-sxm"):
    data = json.loads((PRESET_DIR / f"{name}.json").read_text())
    if field.startswith("peak_flops_per_s."):
        data["peak_flops_per_s"][field.partition(".")[2]]["value"] = value
    else:
        data[field]["value"] = value
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data))
    return path


def test_every_shipped_preset_reads_within_the_bounds():
    assert {"h100-sxm", "b200", "mi300x", "cpu-local"} <= set(PRESETS)
    for path in PRESET_DIR.glob("*.json"):
        assert load_hardware_file(path).name == json.loads(path.read_text())["name"]


@pytest.mark.parametrize("field, value, words", [
    ("sm_count", 1e300, "sm_count must be an integer >= 0 and below 1e5 (0: not stated), got 1e+300"),
    ("sm_count", 132.5, "sm_count must be an integer"),
    ("sm_count", -1, "sm_count must be an integer >= 0"),
    ("link_latency_us", -100, "link_latency_us must be a number > 0 and below 1e6 us, got -100"),
    ("link_latency_us", 0, "link_latency_us must be a number > 0"),
    ("hbm_bytes_per_s", 1e300, "hbm_bytes_per_s must be a number > 0 and below 1e15 B/s"),
    ("memory_bytes", 1e300, "memory_bytes must be a number > 0 and below 1e14 bytes"),
    ("link_bytes_per_s", 1e16, "link_bytes_per_s must be a number > 0 and below 1e15 B/s"),
    ("peak_flops_per_s.bf16", 1e300, "peak_flops_per_s.bf16 must be a number > 0 and below 1e18 FLOP/s"),
    ("peak_flops_per_s.fp8", float("nan"), "peak_flops_per_s.fp8 must be a number > 0"),
    ("gemm_tile_m", 0, "gemm_tile_m must be an integer >= 1 and below 10000 rows, got 0"),
    ("gemm_tile_m", -64, "gemm_tile_m must be an integer >= 1"),
    ("attention_tile_m", 0, "attention_tile_m must be an integer >= 1"),
    ("attention_tile_m", 1e300, "attention_tile_m must be an integer >= 1"),
    ("kernel_floor_us", 0, "kernel_floor_us must be a number > 0"),
    ("kernel_floor_us", -50, "kernel_floor_us must be a number > 0"),
    ("kernel_floor_us", float("inf"), "kernel_floor_us must be a number > 0"),
    ("tree_mask_penalty", 0, "tree_mask_penalty must be a number >= 1 and below 100 (1: a tree mask costs nothing extra)"),
    ("tree_mask_penalty", -1, "tree_mask_penalty must be a number >= 1"),
    ("compute_efficiency", float("nan"), "compute_efficiency is the share of the datasheet peak kernels reach, in (0, 1]"),
])
def test_absurd_preset_numbers_are_refused_naming_file_and_field(tmp_path, field, value, words):
    path = _preset_with(tmp_path, field, value)
    with pytest.raises(SpeedplanInputError) as err:
        load_hardware_file(path)
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value) and "\n" not in str(err.value)


def test_a_check_of_the_whole_preset_names_the_file_too(tmp_path):
    """sm_count 0 ("not stated") is a value, but a fitted roofline counts SMs: the refusal that
    Hardware itself makes names the file as well."""
    path = _preset_with(tmp_path, "sm_count", 0)
    with pytest.raises(SpeedplanInputError, match=r"hw\.json: hardware h100-sxm: roofline_fit 'all' needs sm_count > 0"):
        load_hardware_file(path)
    assert load_hardware_file(_preset_with(tmp_path, "sm_count", 132.0)).sm_count == 132  # a whole number as a float


def test_sweep_refuses_an_absurd_preset_in_one_line_and_writes_nothing(tmp_path, capsys):
    path = _preset_with(tmp_path, "sm_count", 1e300)
    out = tmp_path / "rep"
    assert run(["sweep", "--hardware", str(path), "--batch", "1,8", "--draft-len", "0-3", "--mechanism", "eagle3",
                "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "hw.json: sm_count must be an integer" in err and err.count("\n") == 1 and not out.exists()


def _with_platform(tmp_path, value, name: str = "h100-sxm"):
    data = json.loads((PRESET_DIR / f"{name}.json").read_text())
    if value is None:
        data.pop("platform", None)
    else:
        data["platform"] = value
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data))
    return path


def test_the_platform_is_optional_and_checked(tmp_path):
    """What engines' defaults depend on beyond the memory (SGLang's reserve on ROCm): "cuda" for a GPU
    file that does not say, "cpu" for a CPU (fp32) one; text or {"value", "source"}."""
    assert {n: hw.platform for n, hw in PRESETS.items()} == {**{n: "cuda" for n in PRESETS}, "mi300x": "rocm",
                                                             "cpu-local": "cpu"}
    assert load_hardware_file(_with_platform(tmp_path, None)).platform == "cuda"
    assert load_hardware_file(_with_platform(tmp_path, None, "cpu-local")).platform == "cpu"
    hw = load_hardware_file(_with_platform(tmp_path, "rocm"))
    assert hw.platform == "rocm" and hw.sources["platform"] == ""
    hw = load_hardware_file(_with_platform(tmp_path, {"value": "cuda", "source": "nvidia-smi"}, "mi300x"))
    assert hw.platform == "cuda" and hw.sources["platform"] == "nvidia-smi"
    for bad in ("hip", "Metal", "", 1, ["rocm"], {"value": "rocm"}, {"value": "rocm", "source": 3},
                {"value": "rocm", "source": "x", "note": "y"}):
        path = _with_platform(tmp_path, bad)
        with pytest.raises(SpeedplanInputError) as err:
            load_hardware_file(path)
        message = str(err.value)
        assert message.startswith(f"{path}: platform must be one of 'cuda', 'rocm', 'cpu'") and "\n" not in message, bad


def test_sweep_refuses_a_bad_platform_in_one_line(tmp_path, capsys):
    out = tmp_path / "rep"
    assert run(["sweep", "--hardware", str(_with_platform(tmp_path, "metal")), "--batch", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "hw.json: platform must be one of" in err and "got 'metal'" in err and err.count("\n") == 1
    assert not out.exists()


def test_a_tp_wider_than_one_node_is_refused_naming_the_node():
    """--tp 16 on h100-sxm was priced with its NVLink all-reduce across two 8-GPU nodes (a user
    walkthrough: 160 all-reduces at B = 1 in 0.86 ms); the presets now state the GPUs one link
    joins, and a wider TP is exit 2 naming it. A hardware file that states none is not checked."""
    from speedplan.plan.sweep import sweep
    from speedplan.specs.hardware import hardware_from_json

    load_hardware_file_from = lambda data: hardware_from_json(data, "mine.json")
    assert {name: hw.gpus_per_node for name, hw in PRESETS.items()} == {
        "a100-80gb": 8, "b200": 8, "cpu-local": 1, "h100-sxm": 8, "h200-sxm": 8, "l40s": 8, "mi300x": 8}
    assert all(hw.sources["gpus_per_node"] for hw in PRESETS.values())
    with pytest.raises(SpeedplanInputError, match=r"--tp 16: one h100-sxm node links 8 GPUs; .*use --tp 8 or less"):
        sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], [1], [0, 2], tp=16)
    assert len(sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], [1], [0, 2], tp=8).frame)
    assert run(["sweep", "--model", "llama-3.1-70b", "--tp", "16", "--out", "/nonexistent-dir/never"]) == 2
    data = json.loads((PRESET_DIR / "h100-sxm.json").read_text())
    del data["gpus_per_node"]
    assert load_hardware_file_from(data).gpus_per_node == 0  # not stated: not checked
    data["gpus_per_node"] = {"value": 2.5, "source": "x"}
    with pytest.raises(SpeedplanInputError, match="gpus_per_node must be an integer"):
        load_hardware_file_from(data)
