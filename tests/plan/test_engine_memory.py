"""The memory an engine lets weights and KV cache use is its profile's rule (engine/memory_rule.py):
vLLM a share of the device, SGLang the device less a reserve that depends on the GPU, the TP size and
the platform, scaled by 0.85 on ROCm for a long-context model (SGLang 0.5.23's default
mem_fraction_static), TensorRT-LLM a share of the memory free after the weights."""

import json
import math

import numpy as np
import pytest

from speedplan import plan_engines, sweep
from speedplan.engine.memory_rule import DEFAULT_MEMORY, MemoryRule, usable_bytes
from speedplan.engine.profile import PRESET_DIR, get_engine
from speedplan.errors import SpeedplanInputError
from speedplan.plan.capacity import Capacity
from speedplan.plan.memory import memory_bytes
from speedplan.plan.shortfall import plain_memory_need
from speedplan.plan.sweep import reprice
from speedplan.specs.hardware import get_hardware
from speedplan.specs.model import get_model
from tests.plan._engine_memory_helpers import CONTEXT, GPU, MODEL, _by_the_rules, _most_plain


@pytest.fixture(scope="module")
def qwen():
    """Qwen3-30B-A3B on one H100 priced through vLLM's profile, B = 1..64, EAGLE-3 D = 3."""
    return sweep(MODEL, GPU, ["eagle3"], range(1, 65), (0, 3), contexts=(CONTEXT,))


def test_trtllm_holds_more_sequences_than_vllm_by_its_rule(qwen):
    vllm_n, trt_n = _by_the_rules()
    trt = reprice(qwen, "trtllm")
    assert _most_plain(qwen.frame) == vllm_n and _most_plain(trt.frame) == trt_n
    assert trt_n - vllm_n >= 10  # about 0.1 x 61.1 GB of weights at 0.40 GB a sequence
    assert vllm_n < 48 <= trt_n  # B = 48: nothing fits under vLLM's rule, plain decoding does under TensorRT-LLM's
    assert qwen.meta["engine_memory"]["of"] == "device" and trt.meta["engine_memory"]["of"] == "free after weights"
    assert "the weights and 90% of the 24.5 GB free after them, engine profile trtllm's memory rule" in (
        plain_memory_need(trt, 64))


def test_capacity_follows_each_engines_rule(qwen):
    """A launch that loads EAGLE-3 at B = 64: its weights are target + head (memory at zero sequences)."""
    device = get_hardware(GPU).memory_bytes
    mech = next(p.mech for p in qwen.pricing[0] if p.mech is not None)
    at = lambda n: float(memory_bytes(mech, get_model(MODEL), np.array([n]), np.array([3]), np.array([CONTEXT]),
                                      np.array([4]), 1)[0])
    weights, per_seq = at(0), at(1) - at(0)
    expect = {"vllm": math.floor((0.9 * device - weights) / per_seq),
              "trtllm": math.floor(0.9 * (device - weights) / per_seq)}
    for name, result in (("vllm", qwen), ("trtllm", reprice(qwen, "trtllm"))):
        held = Capacity(result).most_sequences("eagle3", 3, 4, [64], [CONTEXT])
        assert int(held[0]) == expect[name], name
    assert expect["trtllm"] > expect["vllm"]


def test_each_engine_plan_holds_what_its_own_rule_holds():
    """Swept under TensorRT-LLM's profile, B = 48 is planned; vLLM's rule holds fewer there (39
    plain sequences), so its plan runs the most that fit (plain decoding included) and every
    speedup is a number."""
    r = sweep(MODEL, GPU, ["eagle3"], (1, 16, 48), (0, 2, 3), contexts=(CONTEXT,), engine="trtllm")
    plans = plan_engines(r, engines=["vllm", "trtllm"])
    vllm, trt = (plans[n].rows.set_index("batch") for n in ("vllm", "trtllm"))
    assert trt.loc[48, "runs_at_batch"] == 48
    assert 0 < vllm.loc[48, "runs_at_batch"] <= _by_the_rules()[0]
    assert np.isfinite(vllm["speedup"]).all() and np.isfinite(vllm["best_speedup"]).all()


def test_a_profile_without_memory_keeps_the_old_rule(tmp_path):
    data = json.loads((PRESET_DIR / "trtllm.json").read_text())
    del data["memory"]
    path = tmp_path / "old-trtllm.json"
    path.write_text(json.dumps(data))
    old = get_engine(str(path))
    assert old.memory == DEFAULT_MEMORY and "memory" not in old.to_json()
    assert old.values() == get_engine("trtllm").values() and not old.prices_like(get_engine("trtllm"))
    r = sweep(MODEL, GPU, ["eagle3"], range(32, 48), (0, 3), contexts=(CONTEXT,), engine=old)
    f, device = r.frame, get_hardware(GPU).memory_bytes
    assert (f["fits_memory"] == (f["memory_bytes"] <= 0.9 * device)).all()
    assert _most_plain(f) == _by_the_rules()[0] < 47  # 39: B = 40-47 do not fit under the old rule
    assert "(90% of 85.5 GB, vLLM's default gpu_memory_utilization: engine profile trtllm sets no memory rule)" in (
        plain_memory_need(r, 47))


def test_a_shipped_rule_survives_to_json():
    """calibrate writes a profile with to_json: the rule it was read with goes with it."""
    from speedplan.engine.profile import engine_from_json

    trt = get_engine("trtllm")
    again = engine_from_json(json.loads(json.dumps(trt.to_json())), "copy.json")
    assert again.memory == trt.memory == MemoryRule(0.9, "free after weights", trt.memory.source)
    assert again.with_terms({"host_step_us": 100.0}, "assumption: test").memory == trt.memory


@pytest.mark.parametrize("memory, key", [
    ([0.9], "'memory' must be an object"),
    ({"share": 1.5, "of": "device", "source": "x"}, "memory.share"),
    ({"share": 0, "of": "device", "source": "x"}, "memory.share"),
    ({"share": "0.9", "of": "device", "source": "x"}, "memory.share"),
    ({"share": True, "of": "device", "source": "x"}, "memory.share"),
    ({"share": 0.9, "of": "free", "source": "x"}, "memory.of"),
    ({"share": 0.9, "of": "device"}, "memory.source"),
    ({"share": 0.9, "of": "device", "source": "x", "fraction": 0.9}, "memory.fraction"),
    ({"of": "device less reserve", "reserve": "sglang-0.4", "source": "x"}, "memory.reserve"),
    ({"of": "device less reserve", "reserve": ["sglang-0.5.23"], "source": "x"}, "memory.reserve"),
    ({"of": "device less reserve", "source": "x"}, "memory.reserve"),
    ({"share": 0.82, "of": "device less reserve", "reserve": "sglang-0.5.23", "source": "x"}, "memory.share"),
    ({"share": 0.9, "of": "device", "reserve": "sglang-0.5.23", "source": "x"}, "memory.reserve"),
    ({"of": "device less reserve", "reserve": "sglang-0.5.23"}, "memory.source"),
])
def test_a_malformed_memory_object_is_refused_in_one_line(tmp_path, memory, key):
    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    data["memory"] = memory
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpeedplanInputError) as e:
        get_engine(str(path))
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"engine profile {path}: ") and key in message


def test_the_cli_refuses_a_malformed_memory_object(tmp_path, cli):
    data = json.loads((PRESET_DIR / "trtllm.json").read_text())
    data["memory"]["of"] = "free"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    proc = cli("sweep", "--engine", str(path), "--batch", "1", "--out", str(tmp_path / "rep"))
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and f"{path}: memory.of" in proc.stderr


def test_usable_bytes_units():
    """Bytes in, bytes out; weights matter only to a rule on the memory free after them."""
    device = 80e9
    assert usable_bytes(MemoryRule(0.9, "device", "x"), device, 61.1e9) == pytest.approx(72e9)
    free = MemoryRule(0.9, "free after weights", "x")
    assert usable_bytes(free, device, 61.1e9) == pytest.approx(61.1e9 + 0.9 * 18.9e9)
    assert np.allclose(usable_bytes(free, device, np.array([0.0, 40e9, 100e9])), [72e9, 76e9, 80e9])


def test_the_not_planned_line_names_an_engine_whose_rule_holds_more():
    """Every engine's plan covers the batch sizes the sweep's own profile holds; where TensorRT-LLM's
    rule would hold a batch size vLLM's does not, the line says so and how to plan it there."""
    from speedplan.report.summary import render_summary

    grid = dict(mechanisms=["eagle3"], batches=[1, 48, 64], draft_lens=[0, 2])  # vLLM holds 39, TensorRT-LLM 54
    text = render_summary(sweep("qwen3-30b-a3b", "h100-sxm", **grid))
    line = next(line for line in text.splitlines() if line.startswith("not planned"))
    assert "at B = 48, 64 nothing fits in memory" in line
    assert line.endswith("; trtllm's memory rule (the weights and 90% of the 24.5 GB free after them) holds plain "
                         "decoding at B = 48: sweep with --engine trtllm to plan it there")
    trt = render_summary(sweep("qwen3-30b-a3b", "h100-sxm", engine="trtllm", **grid))
    assert "sweep with --engine" not in next(line for line in trt.splitlines() if line.startswith("not planned"))


def test_an_engine_whose_rule_holds_nothing_at_a_cell_leaves_it_out_of_its_plan(tmp_path):
    """Swept with TensorRT-LLM's roomier rule, cells where vLLM's and SGLang's hold no sequence
    crashed their plans (KeyError, StopIteration, min() of nothing; review, 2026-12-04).

    Llama-3.1-70B at TP 2 puts 70.6 GB of weights on each 85.5 GB H100 and 163,840 B of KV a token
    (80 layers x 2 x 4 KV heads x 128 x 2 B). Left for KV: vLLM 0.9 x 85.5 - 70.6 = 6.4 GB (39,154
    tokens), SGLang 0.830 x 85.5 - 70.6 = 0.4 GB (2,615), TensorRT-LLM 0.9 x (85.5 - 70.6) = 13.5 GB
    (82,216): one sequence of 65,536 tokens fits TensorRT-LLM's rule only (the review's case,
    Qwen3-32B at 32,768 on one GPU, now fits vLLM's: the device is the driver's 85.5 GB, not 80)."""
    from speedplan import write_outputs
    from speedplan.report.summary import render_summary

    one = sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], batches=[1], draft_lens=[0, 2], contexts=[65536], tp=2,
                engine="trtllm")
    plans = plan_engines(one)
    assert len(plans["trtllm"].rows) == 1 and not len(plans["vllm"].rows) and not len(plans["sglang"].rows)
    assert plans["vllm"].how == "nothing fits in memory under this engine's memory rule"
    text = render_summary(one, plans=plans)
    assert "  vllm    not planned: its memory rule holds no sequence at any planned batch size" in text
    two = sweep("llama-3.1-70b", "h100-sxm", ["eagle3"], batches=[1, 2], draft_lens=[0, 2], contexts=[4096, 65536],
                tp=2, engine="trtllm")
    plans = plan_engines(two)
    cells = lambda p: set(zip(p.rows["batch"], p.rows["context"]))
    assert (1, 65536) in cells(plans["trtllm"]) and (1, 65536) not in cells(plans["vllm"])
    assert abs(plans["vllm"].rows["weight"].sum() - 1) < 1e-9  # the weights of the cells it holds, renormalised
    assert "its memory rule holds no sequence at B=1 context 65536 (not planned there)" in render_summary(two, plans=plans)
    assert (tmp_path / "r" / "vllm_serve.sh") in write_outputs(two, tmp_path / "r", plans=plans)
    held = plan_engines(sweep("qwen3-30b-a3b", "h100-sxm", ["eagle3"], batches=[48], draft_lens=[0, 2], engine="trtllm"))
    assert set(held["vllm"].rows["runs_at_batch"]) == {39}  # fewer than offered: the most its rule holds
