"""SGLang 0.5.23's memory rule on ROCm: no prefill graphs, and aiter's 0.85 at long contexts."""

import json
import math

import pytest

from speedplan import plan_engines, sweep
from speedplan.engine.memory_rule import sglang_0_5_23_reserve_mib, usable_bytes
from speedplan.plan.capacity import Capacity
from speedplan.plan.shortfall import plain_memory_need
from speedplan.specs.hardware import get_hardware
from speedplan.specs.model import get_model
from tests.plan._engine_memory_helpers import CONTEXT, MIB, SGLANG, _most_plain

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
        "206.1 GB less SGLang's 27.4 GB reserve, × 0.85 for aiter attention where the model's context length "
        "(131,072 tokens, its config's, which a launch's --context-length of 8,192 or fewer would lift) is above 8,192 "
        "(mem_fraction_static 0.867 × 0.85 = 0.737, its 0.5.23 default on ROCm at TP 1)")
    assert SGLANG.describe(MI300X, 1e9, platform="rocm", context_len=8192, tp=8) == (
        "206.1 GB less SGLang's 28.4 GB reserve (mem_fraction_static 0.862, its 0.5.23 default on ROCm at TP 8)")


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
    assert ("(206.1 GB less SGLang's 27.4 GB reserve, × 0.85 for aiter attention where the model's context length "
            "(131,072 tokens, its config's, which a launch's --context-length of 8,192 or fewer would lift) is above 8,192 "
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
