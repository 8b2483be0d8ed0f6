"""Granite, Granite-MoE, OLMo, OLMo-2, InternLM2 and Phi-3.5-MoE: decoder-only families whose
layers speedplan already prices, refused as unknown architectures until they were added to
`PRICED_FAMILIES`. Each config below is a published checkpoint's config.json as stored copies of
it show it (keys no cost depends on, such as token ids, left out where the copy has them); each
parsed spec is held to that checkpoint's own parameter count (its safetensors header or loaded
weights, as other projects record it) and to the fields the family's source reads from the keys
(speedplan/specs/hf_config.py, above `PRICED_FAMILIES`, names the files)."""

from __future__ import annotations

import json

import re

import pytest

from speedplan.cli.app import run
from speedplan.errors import SpeedplanInputError
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import get_model

# ibm-granite/granite-3.3-8b-instruct (config.json with its parameter shapes in a stored model dump).
GRANITE_8B = {
    "architectures": ["GraniteForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attention_multiplier": 0.0078125, "embedding_multiplier": 12.0, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 12800, "logits_scaling": 16.0, "max_position_embeddings": 131072,
    "mlp_bias": False, "model_type": "granite", "num_attention_heads": 32, "num_hidden_layers": 40,
    "num_key_value_heads": 8, "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 49159}
# ibm-granite/granite-3.1-1b-a400m-instruct (leok7v/nano-lamma, models/granite-3.1-1b-a400m-instruct/config.json).
GRANITE_MOE_1B = {
    "architectures": ["GraniteMoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attention_multiplier": 0.015625, "embedding_multiplier": 12.0, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 512, "logits_scaling": 6.0, "max_position_embeddings": 131072,
    "model_type": "granitemoe", "num_attention_heads": 16, "num_experts_per_tok": 8, "num_hidden_layers": 24,
    "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": False, "residual_multiplier": 0.22,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1500000.0, "router_aux_loss_coef": 0.0,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 49155}
# allenai/OLMo-1B-hf: its config's architecture keys, as two other projects' tests copy them.
OLMO_1B = {
    "architectures": ["OlmoForCausalLM"], "attention_bias": False, "clip_qkv": None, "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 8192, "max_position_embeddings": 2048, "model_type": "olmo",
    "num_attention_heads": 16, "num_hidden_layers": 16, "num_key_value_heads": 16, "rope_theta": 10000.0,
    "tie_word_embeddings": True, "vocab_size": 50304}
# allenai/OLMo-2-1124-7B-Instruct (config.json with its parameter shapes in a stored model dump).
OLMO2_7B = {
    "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "model_type": "olmo2", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 500000, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": False, "vocab_size": 100352}
# internlm/internlm2_5-7b-chat (config.json, remote code: configuration_internlm2.InternLM2Config).
INTERNLM2_7B = {
    "architectures": ["InternLM2ForCausalLM"], "attn_implementation": "eager",
    "auto_map": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                 "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM",
                 "AutoModel": "modeling_internlm2.InternLM2ForCausalLM"},
    "bias": False, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "internlm2", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_scaling": {"type": "dynamic", "factor": 2.0},
    "rope_theta": 1000000, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "pretraining_tp": 1,
    "vocab_size": 92544}
# microsoft/Phi-3.5-MoE-instruct (its config's keys as xinyuwei-david/david-share lists them; the
# longrope factor lists and mscales are left out: speedplan reads the scaling's type only).
PHI35_MOE = {
    "architectures": ["PhiMoEForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_dropout": 0.0, "hidden_size": 4096, "initializer_range": 0.02, "input_jitter_noise": 0.01,
    "intermediate_size": 6400, "lm_head_bias": True, "max_position_embeddings": 131072, "model_type": "phimoe",
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 16, "original_max_position_embeddings": 4096, "output_router_logits": False,
    "rms_norm_eps": 1e-05, "rope_scaling": {"type": "longrope"}, "rope_theta": 10000.0, "router_aux_loss_coef": 0.0,
    "router_jitter_noise": 0.01, "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 32064}

# (config, published parameters, what speedplan counts beyond or short of them)
PUBLISHED = {
    "granite-3.3-8b": (GRANITE_8B, 8_170_864_640),  # exact: RMSNorm weights as speedplan counts them
    "granite-3.1-1b-a400m": (GRANITE_MOE_1B, 1_334_628_352),  # exact, with the routers (hidden x experts)
    # OLMo's LayerNorm has no weights (OlmoLayerNorm): speedplan's 2 per layer + 1 norm vectors, 67,584, are extra
    "olmo-1b": (OLMO_1B, 1_176_764_416),
    # OLMo-2 normalises the whole Q and K projections (4096 + 4096 weights a layer), not counted: 262,144 short
    "olmo-2-1124-7b": (OLMO2_7B, 7_298_617_344),
    "internlm2.5-7b-chat": (INTERNLM2_7B, 7_737_708_544),  # exact: the fused wqkv is q, k and v side by side
    # biases (attention, LayerNorm, lm_head: 625,984) are not counted
    "phi-3.5-moe": (PHI35_MOE, 41_873_153_344),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_family_counts_its_checkpoints_published_parameters(name):
    cfg, published = PUBLISHED[name]
    assert from_hf_config(cfg, name).param_count() == pytest.approx(published, rel=1e-4)


def test_granite_reads_as_llama_layers_its_multipliers_change_no_shape():
    m = from_hf_config(GRANITE_8B, "granite-3.3-8b")
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate) == (40, 4096, 32, 8, 128, 12800)
    assert (m.vocab, m.tie_embeddings, m.moe, m.dtype, m.max_context) == (49159, True, None, "bf16", 131072)
    scaled = {k: v for k, v in GRANITE_8B.items() if not k.endswith(("_multiplier", "_scaling"))}
    assert from_hf_config(scaled).param_count() == m.param_count()
    assert m.param_count() == 8_170_864_640


def test_granite_moe_experts_are_intermediate_size_wide():
    """GraniteMoeMoE: input_linear holds num_local_experts x 2*intermediate_size x hidden, the
    router hidden x num_local_experts; every layer is MoE (no dense MLP, no shared expert)."""
    m = from_hf_config(GRANITE_MOE_1B, "granite-3.1-1b-a400m")
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.vocab, m.tie_embeddings) == (
        24, 1024, 16, 8, 64, 49155, True)
    e = m.moe
    assert (e.num_experts, e.top_k, e.expert_intermediate, e.shared_experts, e.first_dense_layers) == (32, 8, 512, 0, 0)
    assert m.moe_layers == 24 and not e.shared_gate and e.expert_bits == 0


@pytest.mark.parametrize("cfg, fields", [
    (OLMO_1B, (16, 2048, 16, 16, 128, 8192, 50304, True, 2048)),
    (OLMO2_7B, (32, 4096, 32, 32, 128, 11008, 100352, False, 4096)),
])
def test_olmo_and_olmo2_read_as_llama_layers(cfg, fields):
    m = from_hf_config(cfg)
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab, m.tie_embeddings,
            m.max_context) == fields
    assert m.moe is None and m.window == 0 and m.kv_bytes_per_token() == m.layers * 2 * m.kv_heads * m.head_dim * 2


def test_internlm2_fused_wqkv_is_priced_as_q_k_and_v():
    """InternLM2Attention's wqkv is (heads + 2 x kv_heads) x head_dim wide, head_dim = hidden /
    heads: the same weights as separate projections. Its dynamic RoPE scaling (factor 2 on
    32768 positions) is read as vLLM reads it: 65,536 tokens."""
    m = from_hf_config(INTERNLM2_7B, "internlm2.5-7b-chat")
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab, m.tie_embeddings) == (
        32, 4096, 32, 8, 128, 14336, 92544, False)
    assert m.attention_params() == 4096 * (32 + 2 * 8) * 128 + 32 * 128 * 4096
    assert m.max_context == 65536 and m.param_count() == 7_737_708_544


def test_phi35_moe_is_mixtral_like_with_16_experts_top_2():
    """PhimoeSparseMoeBlock: num_local_experts experts intermediate_size wide, num_experts_per_tok
    of them per token; 6.6B active parameters published. Its sliding_window equals its context,
    so it is read as full attention (no window named), and at 131,072 tokens it holds that KV."""
    m = from_hf_config(PHI35_MOE, "phi-3.5-moe")
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.vocab, m.tie_embeddings) == (
        32, 4096, 32, 8, 128, 32064, False)
    e = m.moe
    assert (e.num_experts, e.top_k, e.expert_intermediate, e.shared_experts, e.first_dense_layers) == (16, 2, 6400, 0, 0)
    assert m.param_count(active=True) == pytest.approx(6.6e9, rel=0.01)
    assert m.max_context == 131072 and (m.window, m.window_layers) == (0, 0)
    assert m.kv_bytes_per_rank(131072, 1) == pytest.approx(131072 * m.kv_bytes_per_token_per_rank(1))


@pytest.mark.parametrize("arch", ["PhiMoEForCausalLM", "PhimoeForCausalLM"])  # the checkpoint's and transformers'
def test_both_spellings_of_phimoe_are_read(arch):
    assert from_hf_config({**PHI35_MOE, "architectures": [arch]}).moe.num_experts == 16


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_speedplan_models_reads_each_config_json(name, tmp_path, capsys):
    cfg, _ = PUBLISHED[name]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert get_model(str(path)).param_count() == from_hf_config(cfg).param_count()
    assert run(["models", str(path)]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[1] == f"{from_hf_config(cfg).param_count() / 1e9:.3f}"  # params_b


def test_speedplan_sweep_prices_a_granite_moe_config_json(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GRANITE_MOE_1B))
    out = tmp_path / "plan"
    assert run(["sweep", "--model", str(path), "--batch", "1", "--mechanism", "ngram", "--out", str(out)]) == 0
    assert (out / "sweep.csv").read_text().count("\n") > 1 and "error" not in capsys.readouterr().err


def test_the_refusal_names_the_added_families():
    cfg = {**GRANITE_8B, "architectures": ["FooForCausalLM"], "model_type": "foo"}
    with pytest.raises(SpeedplanInputError) as err:
        from_hf_config(cfg)
    assert all(f in str(err.value) for f in ("Granite", "Granite-MoE", "OLMo", "OLMo-2", "InternLM2", "Phi-3.5-MoE"))


def test_a_window_shorter_than_the_context_is_kept():
    """Only a window at least as long as the positions the model holds reads as full attention."""
    m = from_hf_config({**PHI35_MOE, "sliding_window": 4096}, "phi-3.5-moe-windowed")
    assert (m.window, m.window_layers) == (4096, 32)


@pytest.mark.parametrize("repo, preset", [("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
                                          ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
                                          ("Qwen/Qwen3-8B", "qwen3-8b")])
def test_a_hugging_face_repo_id_names_the_preset_of_its_architecture(repo, preset):
    """`--model meta-llama/Llama-3.1-8B-Instruct` was 'unknown model' with the whole preset list."""
    from speedplan.errors import SpeedplanInputError
    from speedplan.specs.model import get_model

    with pytest.raises(SpeedplanInputError, match=re.escape(f"its architecture is the preset {preset} (--model {preset})")):
        get_model(repo)
    with pytest.raises(SpeedplanInputError, match="presets: "):  # no preset's repo: the list, as before
        get_model("some-org/Some-Model-7B")
