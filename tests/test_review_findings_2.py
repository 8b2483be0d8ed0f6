"""Findings of the review of SGLang's sliding-window pool (window_pool) and the engines' platforms."""

import numpy as np

from speedplan import sweep
from speedplan.plan.capacity import Capacity
from speedplan.plan.mechanisms import parse_mechanism
from speedplan.plan.memory import memory_bytes
from speedplan.plan.shortfall import held_elsewhere
from speedplan.plan.sweep import reprice
from speedplan.specs.model import get_model

LAYER_TOKEN = 2 * 8 * 64 * 2  # gpt-oss: 8 KV heads x 64, bf16, K and V: bytes a layer and token


def test_a_drafter_with_sliding_layers_holds_them_as_the_engines_pool_does():
    """gpt-oss-20b drafting for gpt-oss-120b: its 12 sliding layers sit in SGLang's sliding-window
    pool as the target's do (pool_configurator.py _swa_cell_bytes counts the draft's sliding layers
    at swa_full_tokens_ratio), so at 4,096 tokens a sequence costs 0.8 x 4,097 there, not the 128-token
    window (the drafter's KV was priced with the window under SGLang: 20% more sequences held)."""
    target = get_model("gpt-oss-120b")
    mech = parse_mechanism("draft-model", target)
    tokens = 4096 + 1  # context and the one token a D = 0 step verifies
    one = {pool: float(memory_bytes(mech, target, np.ones(1), np.zeros(1, int), np.full(1, 4096.0), np.ones(1, int), 1,
                                    pool)[0] - memory_bytes(mech, target, np.zeros(1), np.zeros(1, int),
                                                            np.full(1, 4096.0), np.ones(1, int), 1, pool)[0])
           for pool in (None, 0.8)}
    target_more = 18 * LAYER_TOKEN * (0.8 * tokens - 128)
    draft_more = 12 * LAYER_TOKEN * (0.8 * tokens - 128)
    assert np.isclose(one[0.8] - one[None], target_more + draft_more, rtol=1e-9)


def test_a_mechanism_without_window_pool_is_still_called():
    """A user's mechanism subclass written before window_pool keeps working under SGLang's rule."""
    target = get_model("gpt-oss-120b")
    mech = parse_mechanism("ngram", target)
    old = type(mech).extra_memory_bytes
    type(mech).extra_memory_bytes = lambda self, target, batch, context, tp: np.zeros(np.shape(batch))
    try:
        assert float(memory_bytes(mech, target, np.ones(1), np.full(1, 3), np.full(1, 4096.0), np.full(1, 4), 1,
                                  0.8)[0]) > 0
    finally:
        type(mech).extra_memory_bytes = old


def test_reprice_recomputes_a_drafters_sliding_layers():
    result = sweep(model="gpt-oss-120b", hardware="h100-sxm", mechanisms=["draft-model"], batches=[1, 8],
                   draft_lens=[3], contexts=[4096])
    priced = reprice(result, "sglang")
    rows = lambda r: r.frame[r.frame["mechanism"] == "draft-model"]["memory_bytes"].to_numpy()
    fresh = sweep(model="gpt-oss-120b", hardware="h100-sxm", mechanisms=["draft-model"], batches=[1, 8],
                  draft_lens=[3], contexts=[4096], engine="sglang")
    assert np.allclose(rows(priced), rows(fresh)) and (rows(priced) > rows(result)).all()
    held = Capacity(priced).most_sequences("draft-model", 3, 4, [128], [4096])[0]
    assert held == Capacity(fresh).most_sequences("draft-model", 3, 4, [128], [4096])[0]


def test_held_elsewhere_prices_each_engines_own_pool():
    """A gpt-oss-120b sweep priced with SGLang (0.8 of the tokens on its sliding layers): plain
    decoding at B = 64, context 4,096 needs 82.6 GB there, but 75.2 GB under vLLM's window, within
    vLLM's 77.0 GB; the suggestion named only TensorRT-LLM, measuring vLLM with SGLang's pool."""
    result = sweep(model="gpt-oss-120b", hardware="h100-sxm", mechanisms=["ngram"], batches=[1, 64],
                   draft_lens=[0], contexts=[4096], engine="sglang")
    assert [name for name, _, held in held_elsewhere(result, [64]) if held == [64]] == ["trtllm", "vllm"]
    vllm = sweep(model="gpt-oss-120b", hardware="h100-sxm", mechanisms=["ngram"], batches=[1, 64],
                 draft_lens=[0], contexts=[4096])
    assert "sglang" not in [name for name, _, _ in held_elsewhere(vllm, [64])]  # 71.0 GB usable, 82.6 needed


def test_is_cpu_is_the_platform(tmp_path):
    """Hardware.is_cpu (profiling, validation, calibrate's memory check) read the dtype while the
    engines' gate read the platform: a file saying platform "cpu" with a bf16 default was a GPU to
    one and a CPU to the other."""
    import json

    from speedplan.specs.hardware import PRESET_DIR, get_hardware, load_hardware_file

    assert get_hardware("cpu-local").is_cpu and not get_hardware("h100-sxm").is_cpu and not get_hardware("mi300x").is_cpu
    data = json.loads((PRESET_DIR / "cpu-local.json").read_text())
    data["default_dtype"] = "bf16"
    data["peak_flops_per_s"] = {**data["peak_flops_per_s"], "bf16": data["peak_flops_per_s"]["fp32"]}
    path = tmp_path / "amx.json"
    path.write_text(json.dumps(data))
    hw = load_hardware_file(path)
    assert hw.platform == "cpu" and hw.is_cpu
