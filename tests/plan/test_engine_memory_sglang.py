"""SGLang 0.5.23's memory rule on CUDA: the device less a reserve by GPU and TP, and its sliding-window pool."""

import json
import math

import numpy as np
import pytest

from speedplan import plan_engines, sweep
from speedplan.engine.memory_rule import (MemoryRule, prefill_graph_sizes, sglang_0_5_23_defaults,
                                          sglang_0_5_23_reserve_mib, usable_bytes)
from speedplan.engine.profile import PRESET_DIR, get_engine
from speedplan.errors import SpeedplanInputError
from speedplan.plan.capacity import Capacity
from speedplan.plan.shortfall import plain_memory_need
from speedplan.plan.sweep import reprice
from speedplan.specs.hardware import get_hardware
from speedplan.specs.model import get_model
from tests.plan._engine_memory_helpers import CONTEXT, GPU, MIB, MODEL, SGLANG, _by_the_rules, _most_plain

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
    assert SGLANG.describe(H100, 16e9) == ("85.5 GB less SGLang's 14.5 GB reserve (mem_fraction_static 0.830, its 0.5.23 "
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
    assert "85.5 GB less SGLang's 14.5 GB reserve (mem_fraction_static 0.830, its 0.5.23 default at TP 1), engine " \
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
