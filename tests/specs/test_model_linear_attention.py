"""Hybrid linear-attention models (Qwen3-Next, Qwen3.5): layer counts, per-sequence state, its cost and memory."""

import json
from dataclasses import replace

import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import PRESET_DIR, get_model


def test_qwen3_next_counts_its_linear_attention_layers_exactly():
    """Qwen3-Next-80B-A3B: 36 Gated DeltaNet layers and 12 gated full-attention layers (q_proj
    twice as wide), 512 experts with a gated shared expert. Its safetensors headers, less the MTP
    layer, hold 79,674,391,296 parameters, 3,874,929,408 of them active per token (as
    transcribed from Qwen/Qwen3-Coder-Next, the same shapes, in another project's tests)."""
    m = get_model("qwen3-next-80b-a3b")
    assert (m.layers, m.attention_layers, m.linear.layers, m.attn_gate, m.mtp_layers) == (48, 12, 36, True, 1)
    assert m.param_count() == 79_674_391_296
    assert m.param_count(active=True) == 3_874_929_408
    assert m.summary()["linear_attention"] == "36 of 48 layers, 37.7 MiB/seq"


def test_linear_attention_layers_hold_a_state_not_a_kv_cache():
    """KV for the 12 attention layers only (2 KV heads × 256 × K and V × bf16 = 2 KiB per token
    and layer), plus per sequence each linear layer's state: 32 value heads × 128 × 128 bf16 and
    the conv's last 3 columns of 8192 channels; value heads and channels split over TP."""
    m = get_model("qwen3-next-80b-a3b")
    assert m.kv_bytes_per_token() == 12 * 2048
    state = 32 * 128 * 128 * 2 + 8192 * 3 * 2
    assert m.kv_bytes_per_rank(1000, 1) == pytest.approx(1000 * 12 * 2048 + 36 * state)
    assert m.kv_bytes_per_rank(1000, 4) == pytest.approx(1000 * 12 * 2048 / 2 + 36 * state / 4)  # 2 KV heads: 1 per rank


def test_linear_attention_is_priced_as_its_state_traffic_whatever_the_context():
    """A decode or verify pass of q tokens reads each sequence's state once and writes it after
    every token: its token mixing is 12 attention layers plus 36 passes over B·(1+q) states."""
    from speedplan.cost.forward import attention_shape, forward_cost
    from speedplan.cost.ops import CostModel
    from speedplan.specs.hardware import get_hardware

    m, cost = get_model("qwen3-next-80b-a3b"), CostModel(get_hardware("h100-sxm"))
    for batch, q_len, context in [(1, 1, 4096), (32, 4, 4096), (32, 4, 65536)]:
        attention = cost.attention(batch, q_len, context + q_len, *attention_shape(m, 4), "causal", "bf16").latency_us
        state = cost.elementwise(batch * (1 + q_len) * m.linear.state_bytes_per_rank(2, 4), "bf16").latency_us
        priced = forward_cost(cost, m, batch, q_len, context, tp=4).attention_s
        assert priced == pytest.approx((12 * attention + 36 * state) * 1e-6)
    long_ = forward_cost(cost, m, 32, 4, 65536, tp=4).attention_s
    assert long_ < forward_cost(cost, replace(m, linear=None), 32, 4, 65536, tp=4).attention_s / 3


@pytest.mark.parametrize("extra, word", [
    ({"linear_num_value_heads": "32"}, "linear_num_value_heads"),
    ({"linear_conv_kernel_dim": None}, "linear_conv_kernel_dim"),
    ({"full_attention_interval": 0, "layer_types": None}, "full_attention_interval"),
    ({"mamba_ssm_dtype": "int8"}, "mamba_ssm_dtype"),
])
def test_malformed_linear_attention_keys_are_one_line(extra, word):
    cfg = {k: v for k, v in json.loads((PRESET_DIR / "qwen3-next-80b-a3b.json").read_text()).items()}
    cfg.update(extra)
    with pytest.raises(SpeedplanInputError, match=word):
        from_hf_config(cfg)


def test_qwen35_state_width_and_mtp_layers_come_from_its_config():
    """Qwen3.5 states `mamba_ssm_dtype: float32` and `mtp_num_hidden_layers`; its state is then
    4 bytes a value, the conv state in the model's dtype."""
    cfg = json.loads((PRESET_DIR / "qwen3-next-80b-a3b.json").read_text())
    cfg.update(mamba_ssm_dtype="float32", mtp_num_hidden_layers=2, model_type="qwen3_5_moe_text", attn_output_gate=True)
    m = from_hf_config(cfg)
    assert m.linear.state_bytes_per_rank(2, 1) == 32 * 128 * 128 * 4 + 8192 * 3 * 2
    assert (m.mtp_layers, m.attn_gate) == (2, True)


def test_speculating_hybrid_models_hold_a_state_per_verified_position():
    """While speculating, a linear-attention layer keeps one state per verified position (vLLM's
    1 + num_speculative_tokens mamba blocks a request): Qwen3-Next at 4 positions holds 3 more
    states per layer than plain decoding; attention-only models are unchanged."""
    m = get_model("qwen3-next-80b-a3b")
    extra = m.kv_bytes_per_rank(4096, 4, states=4) - m.kv_bytes_per_rank(4096, 4)
    assert extra == pytest.approx(3 * 36 * m.linear.state_bytes_per_rank(2, 4))
    llama = get_model("llama-3.1-8b")
    assert llama.kv_bytes_per_rank(4096, 1, states=4) == llama.kv_bytes_per_rank(4096, 1)


def test_sweep_memory_counts_the_speculative_states_of_a_hybrid_model():
    """MTP at D = 3 against D = 1 on Qwen3-Next, B = 8: two more states per sequence in each of
    the 36 linear layers (about 4.7 MB a sequence on one of 4 ranks), next to two more tokens of
    KV (a few KiB) and of the MTP layer's KV."""
    from speedplan.plan.sweep import sweep

    frame = sweep("qwen3-next-80b-a3b", "h100-sxm", ["mtp"], [8], [1, 3], contexts=[4096], tp=4).frame
    mtp = frame[frame["mechanism"] == "mtp"].set_index("draft_len")["memory_bytes"]
    m = get_model("qwen3-next-80b-a3b")
    states = 8 * 2 * 36 * m.linear.state_bytes_per_rank(2, 4)
    kv = 8 * (m.kv_bytes_per_rank(4096 + 4, 4) - m.kv_bytes_per_rank(4096 + 2, 4))
    assert mtp[3] - mtp[1] == pytest.approx(states + kv, rel=0.02)
