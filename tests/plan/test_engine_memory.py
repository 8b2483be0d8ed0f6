"""The memory an engine lets weights and KV cache use is its profile's rule (engine/memory_rule.py):
vLLM a share of the device, SGLang the device less a reserve that depends on the GPU, the TP size and
the platform, scaled by 0.85 on ROCm for a long-context model (SGLang 0.5.23's default
mem_fraction_static), TensorRT-LLM a share of the memory free after the weights."""

import json
import math

import numpy as np
import pytest

from speedplan import plan_engines, sweep
from speedplan.engine.memory_rule import (DEFAULT_MEMORY, MemoryRule, prefill_graph_sizes, sglang_0_5_23_defaults,
                                          sglang_0_5_23_reserve_mib, usable_bytes)
from speedplan.engine.profile import PRESET_DIR, get_engine
from speedplan.errors import SpeedplanInputError
from speedplan.plan.capacity import Capacity
from speedplan.plan.memory import memory_bytes
from speedplan.plan.shortfall import plain_memory_need
from speedplan.plan.sweep import reprice
from speedplan.specs.hardware import get_hardware
from speedplan.specs.model import get_model

MODEL, GPU, CONTEXT = "qwen3-30b-a3b", "h100-sxm", 4096


@pytest.fixture(scope="module")
def qwen():
    """Qwen3-30B-A3B on one H100 priced through vLLM's profile, B = 1..64, EAGLE-3 D = 3."""
    return sweep(MODEL, GPU, ["eagle3"], range(1, 65), (0, 3), contexts=(CONTEXT,))


def _most_plain(frame) -> int:
    """The largest swept batch at which plain decoding fits in memory."""
    plain = frame[(frame["mechanism"] == "none") & frame["fits_memory"]]
    return int(plain["batch"].max())


def _by_the_rules():
    """Plain-decoding sequences one H100 holds: vLLM's 0.9 of the device against TensorRT-LLM's
    weights + 0.9 of the memory free after them (bytes: weights 61.1 GB, device 85.5 GB, the
    81,559 MiB the driver reports; 0.40 GB a sequence: 39 and 54)."""
    target, device = get_model(MODEL), get_hardware(GPU).memory_bytes
    weights = target.weight_bytes()  # TP 1: one GPU holds every weight
    per_seq = float(target.kv_bytes_per_rank(CONTEXT + 1, 1))  # a plain step's KV: context + its one token
    return math.floor((0.9 * device - weights) / per_seq), math.floor(0.9 * (device - weights) / per_seq)


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
    assert "\n" not in message and message.startswith(f"{path}: ") and key in message


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


# SGLang 0.5.23's default mem_fraction_static: the device less a reserve (memory_rule.py cites the
# wheel's lines). GPU memory as the driver reports it (nvidia-smi's memory.total, which SGLang reads
# and the hardware presets state). Figures worked by hand from the formula, MiB:
#   H100 SXM (81,559 MiB: the 60-90 GiB class, chunked_prefill_size 8192, decode graphs to 256
#   below TP 4 and 512 from it; 58 prefill graphs: 8 of 4..32, 14 of 48..256, 8 of 288..512, 8 of
#   576..1024, 12 of 1280..4096, 8 of 4608..8192):
#     TP 1: 512 + 1.5 x 8192 + 1 x 128 + 2 x 256 + 8 x 58 = 512 + 12288 + 128 + 512 + 464 = 13,904
#     TP 2: 512 + 12288 + 256 + 512 + 464 = 14,032
#     TP 4: 512 + 12288 + 4 x 128 + 2 x 512 + 464 = 14,800        TP 8: 512 + 12288 + 1024 + 1024 + 464 = 15,312
#   (the A100 80 GB's 81,920 MiB and the H200's 143,771 MiB, below 160 GiB, hold back the same)
#   L40S (46,068 MiB: the 35-60 GiB class, chunked_prefill_size 4096, decode graphs to 32 below
#   TP 4, 160 from it; 50 prefill graphs, those up to 4096; no 10 GiB floor below 60 GiB):
#     TP 1: 512 + 6144 + 128 + 64 + 400 = 7,248        TP 2: 512 + 6144 + 256 + 64 + 400 = 7,376
#     TP 4: 512 + 6144 + 512 + 320 + 400 = 7,888       TP 8: 512 + 6144 + 1024 + 320 + 400 = 8,400
#   (an A100 40 GB's 40,960 MiB the same)
#   B200 (183,359 MiB, above 160 GiB: 16384 tokens, graphs to 512 at any TP, 74 prefill graphs):
#     TP 1: 512 + 24576 + 128 + 1024 + 592 = 26,832    TP 2: 26,960    TP 4: 27,216    TP 8: 27,728
#   T4-class 16 GiB (16,384 MiB: 2048 tokens, graphs to 8, 42 prefill graphs):
#     TP 1: 512 + 3072 + 128 + 16 + 336 = 4,064
SGLANG = MemoryRule(None, "device less reserve", "x", "sglang-0.5.23")
MIB = 2 ** 20
H100, A100_80, H200, B200, L40S, A100_40 = (m * MIB for m in (81559, 81920, 143771, 183359, 46068, 40960))
BY_HAND_MIB = {(H100, 1): 13904, (H100, 2): 14032, (H100, 4): 14800, (H100, 8): 15312, (L40S, 1): 7248,
               (L40S, 2): 7376, (L40S, 4): 7888, (L40S, 8): 8400, (B200, 1): 26832, (B200, 8): 27728,
               (16 * 2 ** 30, 1): 4064}
# round((MiB - reserve) / MiB, 3) at every preset GPU and an A100 40 GB, TP 1, 2, 4, 8 (memory_rule.py's
# docstring table), e.g. H100 TP 1: (81559 - 13904) / 81559 = 0.8295 -> 0.830
SHARES = {H100: (0.830, 0.828, 0.819, 0.812),
          A100_80: (0.830, 0.829, 0.819, 0.813),
          H200: (0.903, 0.902, 0.897, 0.893),
          B200: (0.854, 0.853, 0.852, 0.849),
          L40S: (0.843, 0.840, 0.829, 0.818),
          A100_40: (0.823, 0.820, 0.807, 0.795)}


def test_the_presets_state_the_memory_the_driver_reports():
    """The figures above are for the presets' memory (nvidia-smi's memory.total, MiB)."""
    for name, device in (("h100-sxm", H100), ("a100-80gb", A100_80), ("h200-sxm", H200), ("b200", B200),
                         ("l40s", L40S)):
        assert get_hardware(name).memory_bytes == device, name


@pytest.mark.parametrize("device, tp", sorted(BY_HAND_MIB))
def test_sglang_reserve_matches_the_formula_by_hand(device, tp):
    assert sglang_0_5_23_reserve_mib(device / 2 ** 20, tp) == BY_HAND_MIB[device, tp]


def test_sglang_defaults_and_prefill_graphs():
    assert [prefill_graph_sizes(c) for c in (2048, 4096, 8192, 16384)] == [42, 50, 58, 74]
    assert sglang_0_5_23_defaults(H100 / MIB, 2) == (8192, 256)
    assert sglang_0_5_23_defaults(H100 / MIB, 4) == (8192, 512)
    assert sglang_0_5_23_defaults(H200 / MIB, 4) == (8192, 512)  # 143,771 MiB: below 160 GiB
    assert sglang_0_5_23_defaults(L40S / MIB, 4) == (4096, 160)
    assert sglang_0_5_23_defaults(B200 / MIB, 1) == (16384, 512)
    assert sglang_0_5_23_defaults(60 * 1024 + 1, 1) == (8192, 256)  # the class bounds are GiB in MiB
    assert sglang_0_5_23_reserve_mib(60 * 1024 + 1, 1) == 13904  # above 60 GiB: at least 10 GiB, here more anyway


@pytest.mark.parametrize("device", sorted(SHARES))
def test_sglang_share_per_gpu_and_tp(device):
    for tp, share in zip((1, 2, 4, 8), SHARES[device]):
        assert SGLANG.device_share(device, tp) == share, (device, tp)
        assert usable_bytes(SGLANG, device, 1e9, tp=tp) == pytest.approx(share * device)
    assert usable_bytes(SGLANG, device, np.array([0.0, 1e9])) == pytest.approx(SHARES[device][0] * device)  # TP 1


def test_sglang_rule_in_words():
    """An H100's 81,559 MiB are 85.5 GB; 13,904 MiB are 14.6 GB, 14,800 MiB 15.5 GB."""
    assert SGLANG.describe(H100, 16e9) == ("85.5 GB less SGLang's 14.6 GB reserve (mem_fraction_static 0.830, its 0.5.23 "
                                           "default at TP 1)")
    assert SGLANG.describe(H200, 35e9, tp=4) == ("150.8 GB less SGLang's 15.5 GB reserve (mem_fraction_static 0.897, "
                                                 "its 0.5.23 default at TP 4)")


def test_a_profile_with_a_reserve_round_trips(tmp_path):
    from speedplan.engine.profile import engine_from_json

    shipped = get_engine("sglang")
    assert shipped.memory == MemoryRule(None, "device less reserve", shipped.memory.source, "sglang-0.5.23", window_pool=0.8)
    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    data["memory"] = {"of": "device less reserve", "reserve": "sglang-0.5.23", "source": "document: a test"}
    path = tmp_path / "vllm-reserve.json"
    path.write_text(json.dumps(data))
    mine = get_engine(str(path))
    assert mine.memory == MemoryRule(None, "device less reserve", "document: a test", "sglang-0.5.23")
    assert mine.to_json()["memory"] == data["memory"] and "share" not in mine.meta()["engine_memory"]
    again = engine_from_json(json.loads(json.dumps(mine.to_json())), "copy.json")
    assert again.memory == mine.memory and again.with_terms({"host_step_us": 100.0}, "assumption: t").memory == mine.memory


def test_the_cli_refuses_an_unknown_reserve(tmp_path, cli):
    data = json.loads((PRESET_DIR / "sglang.json").read_text())
    data["memory"]["reserve"] = "sglang-9"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    proc = cli("sweep", "--engine", str(path), "--batch", "1", "--out", str(tmp_path / "rep"))
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and f"{path}: memory.reserve" in proc.stderr
    assert not (tmp_path / "rep").exists()


def test_sglang_holds_fewer_sequences_than_vllm_where_memory_is_tight():
    """Qwen3-30B-A3B on one H100 (weights 61.1 GB, 0.40 GB a sequence of 4096 tokens): vLLM's 0.9 of
    85.5 GB holds 39; SGLang's 0.830 of it (the device less its 13,904 MiB reserve) holds 24. Swept
    under TensorRT-LLM's roomier rule, B = 48 is planned and each engine runs what its rule holds."""
    target, device = get_model(MODEL), get_hardware(GPU).memory_bytes
    weights, per_seq = target.weight_bytes(), float(target.kv_bytes_per_rank(CONTEXT + 1, 1))
    sglang_n = math.floor((0.830 * device - weights) / per_seq)
    assert (sglang_n, _by_the_rules()[0]) == (24, 39)
    r = sweep(MODEL, GPU, ["eagle3"], (1, 32, 48), (0, 2, 3), contexts=(CONTEXT,), engine="trtllm")
    rows = {n: p.rows.set_index("batch") for n, p in plan_engines(r, engines=["vllm", "sglang"]).items()}
    assert rows["sglang"].loc[48, "runs_at_batch"] == rows["sglang"].loc[32, "runs_at_batch"] == sglang_n
    assert rows["sglang"].loc[48, "runs_at_batch"] < rows["vllm"].loc[48, "runs_at_batch"] <= 39
    s = reprice(r, "sglang")
    assert _most_plain(s.frame) == 1  # of B = 1, 32, 48 only B = 1 fits under SGLang's rule
    assert "85.5 GB less SGLang's 14.6 GB reserve (mem_fraction_static 0.830, its 0.5.23 default at TP 1), engine " \
           "profile sglang's memory rule)" in plain_memory_need(s, 32)


def test_the_reserve_follows_the_launchs_tp():
    """Llama-3.1-70B on 4 H100s under SGLang's rule: 0.819 of each GPU at TP 4 (0.830 at TP 1 would
    hold about 3 sequences more: weights 35.3 GB, 0.34 GB a sequence, 103 against 106), in every
    row's fits_memory and in Capacity."""
    r = sweep("llama-3.1-70b", GPU, ["eagle3"], range(96, 112), (0, 3), contexts=(CONTEXT,), tp=4, engine="sglang")
    f, device = r.frame, get_hardware(GPU).memory_bytes
    assert (f["fits_memory"] == (f["memory_bytes"] <= 0.819 * device)).all()
    target = get_model("llama-3.1-70b")
    weights, per_seq = target.weight_bytes() / 4, float(target.kv_bytes_per_rank(CONTEXT + 1, 4))
    n = math.floor((0.819 * device - weights) / per_seq)
    assert n < math.floor((0.830 * device - weights) / per_seq) and _most_plain(f) == n < 111
    assert int(Capacity(r).most_sequences("none", 0, 1, [111], [CONTEXT])[0]) == n
    assert "(mem_fraction_static 0.819, its 0.5.23 default at TP 4)" in plain_memory_need(r, 111)


# On ROCm (the mi300x preset's "platform"), SGLang 0.5.23 captures no prefill CUDA graphs by default
# (cuda_graph_config.py:119-123) and its default attention backend, aiter, scales the rounded share by
# 0.85 for a model whose context exceeds 8192 tokens (attention_hook.py:243-268). MI300X: 196,592 MiB
# (rocminfo's 201,310,208 KB), above 160 GiB: 16384-token chunks, decode graphs to 512 at any TP:
#   TP 1: 512 + 1.5 x 16384 + 128 + 2 x 512 = 512 + 24576 + 128 + 1024 = 26,240 -> (196592 - 26240) / 196592
#         = 0.8665 -> 0.867; x 0.85 = 0.73695 for Llama-3.1-70B's 131,072 tokens, 0.867 for SmolLM2's 8,192
#   TP 8: 512 + 24576 + 1024 + 1024 = 27,136 -> 0.8620 -> 0.862; x 0.85 = 0.7327
#   (the CUDA formula, which counts 74 prefill graphs, 592 MiB more, gave 0.864 at TP 1)
MI300X = 196592 * MIB
ROCM_SHARES = {1: 0.867, 2: 0.866, 4: 0.865, 8: 0.862}  # round((196592 - reserve) / 196592, 3), as in memory_rule.py


def _rocm(model: str, tp: int) -> float:
    target = get_model(model)
    return SGLANG.device_share(MI300X, tp, platform="rocm", context_len=target.max_context, model=target)


def test_sglang_share_on_rocm_by_hand():
    hw = get_hardware("mi300x")
    assert (hw.memory_bytes, hw.platform) == (MI300X, "rocm") and "rocminfo" in hw.sources["platform"]
    assert get_model("smollm2-135m").max_context == 8192 and get_model("llama-3.1-70b").max_context == 131072
    for tp, share in ROCM_SHARES.items():
        reserve = 512 + 1.5 * 16384 + tp / 8 * 1024 + 2 * 512  # no 8 x prefill graphs on ROCm
        assert sglang_0_5_23_reserve_mib(196592, tp, "rocm") == reserve
        assert round((196592 - reserve) / 196592, 3) == share
        assert _rocm("smollm2-135m", tp) == share  # 8,192 tokens: not above 8192, no 0.85
        assert _rocm("llama-3.1-70b", tp) == pytest.approx(share * 0.85)
    assert [round(_rocm("llama-3.1-70b", tp), 3) for tp in ROCM_SHARES] == [0.737, 0.736, 0.735, 0.733]
    assert SGLANG.device_share(MI300X, 1) == 0.864  # the CUDA formula on the same memory: 26,832 MiB held back
    assert usable_bytes(SGLANG, MI300X, 141e9, platform="rocm", context_len=131072) == pytest.approx(0.867 * 0.85 * MI300X)
    assert SGLANG.describe(MI300X, 141e9, platform="rocm", context_len=131072) == (
        "206.1 GB less SGLang's 27.5 GB reserve, × 0.85 for aiter attention at a context above 8,192 tokens "
        "(mem_fraction_static 0.867 × 0.85 = 0.737, its 0.5.23 default on ROCm at TP 1)")
    assert SGLANG.describe(MI300X, 1e9, platform="rocm", context_len=8192, tp=8) == (
        "206.1 GB less SGLang's 28.5 GB reserve (mem_fraction_static 0.862, its 0.5.23 default on ROCm at TP 8)")


def test_the_rocm_backend_follows_the_model():
    """aiter for MHA/GQA models; MLA models only where num_key_value_heads // TP is 16 or 128
    (model_override_base.py:340-346), else triton; DSA models the dsa backend: no 0.85 without aiter."""
    from speedplan.engine.memory_rule import sglang_0_5_23_rocm_backend

    backend = lambda name, tp: sglang_0_5_23_rocm_backend(get_model(name), tp)
    assert [backend("deepseek-v3", tp) for tp in (1, 2, 4, 8)] == ["aiter", "triton", "triton", "aiter"]  # 128 heads
    assert {backend("glm-4.7-flash", tp) for tp in (1, 2, 4, 8)} == {"triton"}  # 20 heads: 20, 10, 5, 2 a rank
    assert backend("deepseek-v3.2", 8) == "dsa" and backend("qwen3-next-80b-a3b", 1) == backend("gpt-oss-120b", 1) == "aiter"
    assert [_rocm("deepseek-v3", tp) for tp in (2, 4)] == [0.866, 0.865]
    assert _rocm("deepseek-v3", 8) == pytest.approx(0.862 * 0.85) and _rocm("deepseek-v3.2", 8) == 0.862


def test_cuda_shares_ignore_the_context_and_model():
    """The CUDA presets keep their table whatever the model (the 0.85 is aiter's, a ROCm backend)."""
    long = get_model("llama-3.1-70b")
    for name in ("h100-sxm", "a100-80gb", "h200-sxm", "b200", "l40s"):
        hw = get_hardware(name)
        assert hw.platform == "cuda", name
        for tp, share in zip((1, 2, 4, 8), SHARES[hw.memory_bytes]):
            assert SGLANG.device_share(hw.memory_bytes, tp, platform=hw.platform, context_len=long.max_context,
                                       model=long) == share, (name, tp)
    assert get_hardware("cpu-local").platform == "cpu"
    # a CPU: no prefill graphs, decode graphs to torch_compile_max_bs 32; 24 GiB: 4096-token chunks
    assert sglang_0_5_23_reserve_mib(24576, 1, "cpu") == 512 + 1.5 * 4096 + 128 + 2 * 32


def test_sglang_on_an_mi300x_holds_what_its_rocm_share_allows():
    """Llama-3.1-70B on one MI300X (141.1 GB of weights, 1.34 GB a plain sequence of 4096 tokens):
    0.867 x 0.85 of 206.1 GB = 151.9 GB hold 8 plain sequences, where the CUDA formula's 0.864
    (178.1 GB) held 27 and planned SGLang up to B = 16."""
    from speedplan.serving.context import context_fit

    target, device = get_model("llama-3.1-70b"), MI300X
    weights, per_seq = target.weight_bytes(), float(target.kv_bytes_per_rank(CONTEXT + 1, 1))
    share = round((196592 - 26240) / 196592, 3) * 0.85
    n = math.floor((share * device - weights) / per_seq)
    assert (n, math.floor((0.864 * device - weights) / per_seq)) == (8, 27)
    r = sweep("llama-3.1-70b", "mi300x", ["eagle3"], (1, 8, 16), (0, 3), contexts=(CONTEXT,), engine="sglang")
    f = r.frame
    assert (f["fits_memory"] == (f["memory_bytes"] <= share * device)).all() and _most_plain(f) == 8
    assert int(Capacity(r).most_sequences("none", 0, 1, [16], [CONTEXT])[0]) == n
    assert ("(206.1 GB less SGLang's 27.5 GB reserve, × 0.85 for aiter attention at a context above 8,192 tokens "
            "(mem_fraction_static 0.867 × 0.85 = 0.737, its 0.5.23 default on ROCm at TP 1), engine profile sglang's "
            "memory rule)") in plain_memory_need(r, 16)
    held = plan_engines(r, engines=["sglang"])["sglang"].rows.set_index("batch")
    eagle = int(Capacity(r).most_sequences("eagle3", 3, 4, [8], [CONTEXT])[0])  # the EAGLE-3 head loaded too
    assert 16 not in held.index and held.loc[8, "runs_at_batch"] == eagle == 5
    mech = next(p.mech for p in r.pricing[0] if p.mech is not None)
    fit = context_fit(target, mech, SGLANG, device, 1, 3, 4, CONTEXT, platform="rocm")
    assert fit.kv_left_bytes == pytest.approx(share * device - fit.weight_bytes)  # about 8 GB, not 34
    assert fit.limit == fit.fits_context // 1024 * 1024 < 32768 and "× 0.85" in fit.rule
    assert context_fit(target, mech, SGLANG, device, 1, 3, 4, CONTEXT).limit == 102400  # the CUDA formula's


def test_the_cli_refuses_a_bad_platform(tmp_path, cli):
    from speedplan.specs.hardware import PRESET_DIR as HARDWARE_DIR

    data = json.loads((HARDWARE_DIR / "mi300x.json").read_text())
    data["platform"] = "hip"
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(data))
    proc = cli("sweep", "--hardware", str(path), "--batch", "1", "--out", str(tmp_path / "rep"))
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert f"{path}: platform must be one of 'cuda', 'rocm', 'cpu'" in proc.stderr and "got 'hip'" in proc.stderr
    assert not (tmp_path / "rep").exists()


def test_sglang_pools_sliding_window_layers_at_0_8_of_the_full_layers_tokens():
    """gpt-oss-120b (18 full and 18 sliding layers of 8 KV heads x 64, bf16: 2,048 B a layer and
    token) on one H100 at context 4,096: vLLM's hybrid manager keeps a sliding layer's 128-token
    window, SGLang's HybridSWAPoolConfigurator gives it 0.8 of the full layers' tokens whatever the
    window (window_pool), so a sequence costs 18 x 2,048 x (4,097 + 0.8 x 4,097) B there."""
    target, hw = get_model("gpt-oss-120b"), get_hardware("h100-sxm")
    layer_token = 2 * 8 * 64 * 2
    tokens = 4096 + 1  # the context and the token a plain step adds
    vllm_seq = 18 * layer_token * tokens + 18 * layer_token * 128
    sglang_seq = 18 * layer_token * tokens * 1.8
    weights = target.weight_bytes()
    vllm_left = 0.9 * hw.memory_bytes - weights
    sglang_left = 0.830 * hw.memory_bytes - weights  # SGLang 0.5.23's default on an H100 at TP 1
    expected = (int(vllm_left // vllm_seq), int(sglang_left // sglang_seq))
    assert expected[1] < expected[0] / 2  # the pool, not only the smaller share

    result = sweep(model="gpt-oss-120b", hardware="h100-sxm", mechanisms=["ngram"], batches=[1, 16, 32, 64, 128],
                   draft_lens=[0], contexts=[4096])
    priced = reprice(result, "sglang")
    assert (_most_plain(result.frame), _most_plain(priced.frame)) == tuple(
        max(b for b in (1, 16, 32, 64, 128) if b <= n) for n in expected)
    held = {n: int(Capacity(r).most_sequences("none", 0, 1, [128], [4096])[0]) for n, r in (("vllm", result), ("sglang", priced))}
    assert held == {"vllm": expected[0], "sglang": expected[1]}
    again = reprice(priced, "vllm")  # back to the window: the memory column is vLLM's again
    assert np.array_equal(again.frame["memory_bytes"].to_numpy(), result.frame["memory_bytes"].to_numpy())


def test_a_bad_window_pool_is_refused(tmp_path, cli):
    with pytest.raises(SpeedplanInputError, match="window_pool must be a number in"):
        MemoryRule(0.9, "device", "document: a test", window_pool=2.0)
    data = json.loads((PRESET_DIR / "vllm.json").read_text())
    data["memory"] = {**data["memory"], "window_pool": "most"}
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(data))
    proc = cli("sweep", "--engine", str(path), "--batch", "1", "--out", str(tmp_path / "rep"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "memory.window_pool must be a number in (0, 1]" in proc.stderr and not (tmp_path / "rep").exists()
