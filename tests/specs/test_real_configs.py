"""Real Hugging Face config.json files, read as a user's `--model PATH` is, held to sizes counted
by hand from the config (tests/specs/configs/; each file is the config.json as published, copied
from a public transcription of it, named below).

Hand counts include every weight the checkpoint holds except bias and norm vectors speedplan
does not count (Qwen2's q/k/v biases, Gemma's extra norms, gpt-oss's biases and sinks), hence
the 0.1% tolerance; KV bytes per token are exact.
"""

import json
from pathlib import Path

import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import get_model

CONFIGS = Path(__file__).parent / "configs"

# Where each config.json was copied from (the Hugging Face file as transcribed in public code):
SOURCES = {
    "qwen2.5-7b-instruct": "Qwen/Qwen2.5-7B-Instruct (Lightning-AI thunder hf_qwen2_rope; sliding_window 131072 as "
                           "in the published file)",
    "mistral-7b-instruct-v0.3": "mistralai/Mistral-7B-Instruct-v0.3 (fields as transcribed for Mistral-7B-v0.3)",
    "gemma-2-9b-it": "google/gemma-2-9b-it (`cat config.json` in a vLLM usage issue); no tie_word_embeddings key",
    "phi-3-mini-4k-instruct": "microsoft/Phi-3-mini-4k-instruct (NVIDIA TensorRT-LLM tests PHI3_MINI_4K_CONFIG)",
    "mixtral-8x7b-instruct-v0.1": "mistralai/Mixtral-8x7B (TensorRT-LLM tests MIXTRAL_8X7B_CONFIG)",
    "deepseek-v2-lite": "deepseek-ai/DeepSeek-V2-Lite-Chat at 85864749 (a verl EXPECTED_CONFIG)",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "llama-4-scout-17b-16e": "meta-llama/Llama-4-Scout-17B-16E (a printed Llama4Config; moe_layers 0..47 written out)",
    "gpt-oss-20b": "openai/gpt-oss-20b (gpt-oss-120b's published file with 24 layers and 32 experts)",
    "qwen3-next-80b-a3b-instruct": "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "llama-3.2-1b-instruct": "meta-llama/Llama-3.2-1B-Instruct (_commit_hash 4e20de36)",
    "gemma-3-12b-it": "google/gemma-3-12b-it (the LTX-2.3 text encoder config in public code)",
    "qwen3.5-27b-fp8": "a Qwen3.5-27B block-FP8 checkpoint's composite config (quantization_config beside "
                       "text_config, as transformers saves it)",
    "gemma-3-4b-it": "google/gemma-3-4b-it (its published shape as transcribed in public test code: a text_config "
                     "of six keys, the rest Gemma3TextConfig's defaults)",
}


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def _model(name: str):
    return from_hf_config(_config(name), name=name, where=f"{name}/config.json")


# (name, parameters, KV bytes per token in bf16): counted by hand from the config
HAND = [
    ("qwen2.5-7b-instruct", 7_615_616_512, 28 * 2 * 4 * 128 * 2),
    ("mistral-7b-instruct-v0.3", 7_248_023_552, 32 * 2 * 8 * 128 * 2),
    ("gemma-2-9b-it", 9_241_705_984, 42 * 2 * 8 * 256 * 2),
    ("phi-3-mini-4k-instruct", 3_821_079_552, 32 * 2 * 32 * 96 * 2),
    ("mixtral-8x7b-instruct-v0.1", 46_702_792_704, 32 * 2 * 8 * 128 * 2),
    ("deepseek-v2-lite", 15_706_484_224, 27 * (512 + 64) * 2),  # MLA: the latent and the rope key
    ("qwen3-30b-a3b", 30_532_122_624, 48 * 2 * 4 * 128 * 2),
    ("llama-4-scout-17b-16e", 107_769_861_120, 48 * 2 * 8 * 128 * 2),  # text model (the vision tower is not priced)
    ("gpt-oss-20b", 20_914_757_184, 24 * 2 * 8 * 64 * 2),
    ("qwen3-next-80b-a3b-instruct", 79_674_391_296, 12 * 2 * 2 * 256 * 2),  # 12 of 48 layers keep a KV cache
    ("llama-3.2-1b-instruct", 1_235_814_400, 16 * 2 * 8 * 64 * 2),
    ("gemma-3-12b-it", 11_766_034_176, 48 * 2 * 8 * 256 * 2),  # text model
    # text model: 262,208 x 2,560 tied embedding + 34 x (attention 2,560 x 2,048 x 2 + 2,560 x 1,024 x 2, MLP 3 x
    # 2,560 x 10,240); 8 heads, 4 KV heads of 256 from Gemma3TextConfig's defaults
    ("gemma-3-4b-it", 3_879_895_040, 34 * 2 * 4 * 256 * 2),
]


@pytest.mark.parametrize("name, params, kv_bytes", HAND, ids=[h[0] for h in HAND])
def test_real_configs_count_their_parameters_and_kv_bytes(name, params, kv_bytes):
    m = get_model(str(CONFIGS / f"{name}.json"))
    assert m.param_count() == pytest.approx(params, rel=1e-3)
    assert m.kv_bytes_per_token() == kv_bytes


def test_gemma_2_ties_its_embeddings_where_its_config_says_nothing():
    """google/gemma-2-9b-it's config.json has no tie_word_embeddings: Gemma2Config's default,
    True (huggingface/transformers configuration_gemma2.py at 008e5743), holds. The checkpoint
    has one 256,000 x 3,584 embedding the lm_head reuses (9.24B parameters, not 10.16B)."""
    m = _model("gemma-2-9b-it")
    assert m.tie_embeddings
    assert m.weight_bytes() / 1e9 == pytest.approx(18.48, abs=0.01)
    assert (m.window, m.local_layers) == (4096, 21)
    assert from_hf_config({**_config("gemma-2-9b-it"), "tie_word_embeddings": False}).tie_embeddings is False
    llama = {k: v for k, v in _config("mistral-7b-instruct-v0.3").items() if k != "tie_word_embeddings"}
    assert from_hf_config(llama).tie_embeddings is False  # MistralConfig's default


def test_gemma_3_composite_config_ties_and_keeps_its_stated_context():
    """google/gemma-3-12b-it: text_config states no tie_word_embeddings (Gemma3TextConfig:
    True), and its max_position_embeddings (131,072) already holds the linear rope factor 8:
    vLLM skips the factor for gemma3 (vllm/config/model.py _get_and_verify_max_len, "Gemma3's
    max_model_len (128K) is already scaled by RoPE scaling"), so the context is not 1,048,576."""
    m = _model("gemma-3-12b-it")
    assert m.tie_embeddings
    assert m.max_context == 131072
    assert (m.window, m.local_layers) == (1024, 40)
    with pytest.raises(SpeedplanInputError, match="131,072-token context"):
        m.check_context([262144])


def test_a_composite_configs_top_level_quantization_is_read():
    """A multimodal checkpoint's quantization_config sits beside text_config, not in it: an FP8
    Qwen3.5 was priced in bf16, twice its weight bytes."""
    m = _model("qwen3.5-27b-fp8")
    assert m.dtype == "fp8"
    assert m.param_count() == pytest.approx(26_895_998_464, rel=1e-3)
    cfg = _config("qwen3.5-27b-fp8")
    cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm",
                                  "zero_point": True}
    with pytest.raises(SpeedplanInputError, match="quantization 'awq' is not modelled"):
        from_hf_config(cfg)


def test_fp8_checkpoints_keep_embeddings_and_lm_head_in_their_16_bit_dtype():
    """FP8 checkpoints quantize the decoder's linear layers only: embed_tokens and lm_head stay
    in torch_dtype (bf16), as vLLM serves them (ParallelLMHead is no LinearBase for Fp8Config).
    Qwen3.5-27B-FP8: 24.35B weights at 1 byte and 2.54B embedding and head weights at 2 bytes."""
    m = _model("qwen3.5-27b-fp8")
    assert m.weight_bytes() == pytest.approx(24_353_201_664 + 2 * 2_542_796_800, rel=1e-3)
    llama = {**_config("llama-3.2-1b-instruct"), "quantization_config": {
        "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}}
    small = from_hf_config(llama)
    assert small.dtype == "fp8"  # tied: one 128,256 x 2,048 matrix at 2 bytes, the layers at 1
    assert small.weight_bytes() == pytest.approx(973_146_112 + 2 * 262_668_288, rel=1e-3)


def test_gpt_oss_20b_weight_bytes_with_mxfp4_experts():
    """Routed experts at 4.25 bits (MXFP4 and its scales), the rest in bf16: 13.76 GB."""
    m = _model("gpt-oss-20b")
    assert m.weight_bytes() == pytest.approx(13_761_264_768, rel=2e-3)
    assert (m.window, m.local_layers) == (128, 12)


def test_moe_and_mla_configs_read_every_cost_field():
    ds = _model("deepseek-v2-lite")
    assert (ds.moe.first_dense_layers, ds.moe.dense_intermediate, ds.moe.shared_experts) == (1, 10944, 2)
    assert ds.mla.q_lora_rank == 0 and ds.param_count(active=True) == pytest.approx(2_661_150_208, rel=1e-3)
    scout = _model("llama-4-scout-17b-16e")
    assert (scout.chunked, scout.window, scout.local_layers, scout.moe.shared_experts) == (True, 8192, 36, 1)
    assert scout.param_count(active=True) == pytest.approx(17_172_894_720, rel=1e-3)
    assert _model("mixtral-8x7b-instruct-v0.1").param_count(active=True) == pytest.approx(12_879_925_248, rel=1e-3)
    assert _model("qwen3-30b-a3b").param_count(active=True) == pytest.approx(3_353_032_704, rel=1e-3)
    assert _model("qwen2.5-7b-instruct").window == 0  # sliding_window 131072 with use_sliding_window false


def test_an_fp8_checkpoints_lm_head_is_priced_at_its_16_bits():
    """The lm_head of an FP8 checkpoint stays bf16 (ModelSpec.embed_bits): its GEMM is priced on the
    bf16 table and its weight bytes at 2 per parameter, not on the fp8 table."""
    import numpy as np

    from speedplan.cost.forward import forward_cost
    from speedplan.cost.ops import load_cost_model
    from speedplan.specs.model import get_model

    model, cost, tp = get_model("deepseek-v3"), load_cost_model("h200-sxm"), 8
    assert model.dtype == "fp8" and model.embed_bits == 16
    batch = np.array([1.0, 64.0])
    with_head = forward_cost(cost, model, batch, 1, 4096, tp)
    without = forward_cost(cost, model, batch, 1, 4096, tp, lm_head=False)
    head = cost.gemm(batch, model.vocab / tp, model.hidden, "bf16").latency_us * 1e-6
    assert np.allclose(with_head.gemm_s - without.gemm_s, head, rtol=1e-9)
    assert not np.allclose(head, cost.gemm(batch, model.vocab / tp, model.hidden, "fp8").latency_us * 1e-6)


def test_a_sparse_text_config_takes_its_class_defaults():
    """save_pretrained writes a composite's text_config as its difference from the text class's
    defaults: google/gemma-3-4b-it states no heads, KV heads, head width or vocabulary, and was
    refused ("missing 'num_attention_heads'"); given only the keys that error named, it was priced
    with 8 KV heads of 320 (340 KiB a token for 136). Llama-4 and Qwen3.5 text_configs saved the
    same way read as their full files do."""
    g = _model("gemma-3-4b-it")
    assert (g.heads, g.kv_heads, g.head_dim, g.vocab, g.max_context) == (8, 4, 256, 262_208, 131_072)
    assert (g.window, g.local_layers, g.tie_embeddings) == (1024, 29, True)  # every 6th layer global
    from speedplan.specs.config_families import TEXT_CLASS_DEFAULTS

    for name in ("llama-4-scout-17b-16e", "qwen3.5-27b-fp8"):
        full = _config(name)
        text = full["text_config"]
        defaults = TEXT_CLASS_DEFAULTS[text["model_type"]]
        dropped = {k for k, v in text.items() if defaults.get(k) == v}
        if name.startswith("qwen3.5"):  # its layer list is the class's every-4th pattern: transformers drops it too
            dropped.add("layer_types")
        assert len(dropped) >= 5, dropped  # the test saves a really sparse config
        sparse = {**full, "text_config": {k: v for k, v in text.items() if k not in dropped}}
        a, b = from_hf_config(full, name=name), from_hf_config(sparse, name=name)
        assert a.param_count() == b.param_count() and a.kv_bytes_per_token() == b.kv_bytes_per_token()
        assert (a.window, a.local_layers, a.linear, a.moe) == (b.window, b.local_layers, b.linear, b.moe)
    qwen = from_hf_config({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                           "text_config": {"hidden_size": 5120, "num_hidden_layers": 64}})
    assert qwen.linear is not None and qwen.linear.layers == 48  # not read as 64 full-attention layers
    moe = from_hf_config({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
                          "text_config": {"model_type": "qwen3_5_moe_text"}})  # Qwen3_5MoeTextConfig is Qwen3.5-35B-A3B
    assert (moe.moe.num_experts, moe.moe.top_k, moe.linear.layers) == (256, 8, 30)
    assert moe.param_count(active=True) / 1e9 == pytest.approx(3.4, abs=0.1)
