"""OLMoE, OLMo-3, InternLM3 and Granite-MoE-Shared: decoder families whose layers speedplan
prices, read from a config.json as the family's source builds them (speedplan/specs/hf_config.py,
above `PRICED_FAMILIES`, names the files and commits). Each config below is a published
checkpoint's config.json as stored copies of it show it (keys no cost depends on, such as token
ids, left out); each parsed spec is held to that checkpoint's published parameter count, the
source of each number beside it."""

from __future__ import annotations

import json

import pytest

from speedplan.cli.app import run
from speedplan.errors import SpeedplanInputError
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import get_model
from tests.specs.test_more_decoder_families import GRANITE_MOE_1B

# allenai/OLMoE-1B-7B-0924 (its config.json's keys as other projects' tests and manifests copy them;
# the checkpoint ships float32 weights, served in bf16).
OLMOE_1B_7B = {
    "architectures": ["OlmoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "clip_qkv": None,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 1024,
    "max_position_embeddings": 4096, "model_type": "olmoe", "norm_topk_prob": False, "num_attention_heads": 16,
    "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 16, "num_key_value_heads": 16,
    "output_router_logits": False, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
    "router_aux_loss_coef": 0.01, "tie_word_embeddings": False, "torch_dtype": "float32", "vocab_size": 50304}
# allenai/Olmo-3-1025-7B: three sliding-window layers, then one full, eight times; YaRN from 8,192 to 65,536.
OLMO3_7B = {
    "architectures": ["Olmo3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 8,
    "max_position_embeddings": 65536, "model_type": "olmo3", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "rms_norm_eps": 1e-06,
    "rope_scaling": {"attention_factor": 1.2079441541679836, "beta_fast": 32, "beta_slow": 1, "factor": 8.0,
                     "original_max_position_embeddings": 8192, "rope_type": "yarn"},
    "rope_theta": 500000, "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 100278}
# internlm/internlm3-8b-instruct (remote code: configuration_internlm3.InternLM3Config).
INTERNLM3_8B = {
    "architectures": ["InternLM3ForCausalLM"],
    "auto_map": {"AutoConfig": "configuration_internlm3.InternLM3Config",
                 "AutoModelForCausalLM": "modeling_internlm3.InternLM3ForCausalLM",
                 "AutoModel": "modeling_internlm3.InternLM3Model"},
    "bias": False, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 10240, "max_position_embeddings": 32768, "model_type": "internlm3",
    "num_attention_heads": 32, "num_hidden_layers": 48, "num_key_value_heads": 2, "qkv_bias": False,
    "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 6.0, "rope_type": "dynamic"}, "rope_theta": 50000000,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128512}
# No Granite-MoE-Shared checkpoint's config.json was found in stored copies (the one public checkpoint,
# ibm-research/moe-7b-1b-active-shared-experts, is vLLM's and transformers' "test model"; Granite 4.0's MoEs
# are granitemoehybrid, Mamba layers refused). So: granite-3.1-1b-a400m's real config read as
# granitemoeshared with a 1,024-wide shared_mlp (the width vLLM's own granitemoe-shared test gives it).
GRANITE_MOE_SHARED = {**GRANITE_MOE_1B, "architectures": ["GraniteMoeSharedForCausalLM"],
                      "model_type": "granitemoeshared", "shared_intermediate_size": 1024}

# (config, published parameters, relative tolerance); each line says what speedplan counts short of it.
PUBLISHED = {
    # 6,919,161,856: the Hugging Face API's safetensors count for allenai/OLMoE-1B-7B-0924-Instruct (same
    # shapes), as stored manifests record it. q_norm (2048) and k_norm (2048) a layer are not counted: 65,536 short.
    "olmoe-1b-7b-0924": (OLMOE_1B_7B, 6_919_161_856, 1e-4),
    # 7,298,011,136: OLMo-core's num_params for Olmo-3 7B and a safetensors-header check, as stored scripts
    # record it. q_norm / k_norm (4096 + 4096 a layer) are not counted: 262,144 short.
    "olmo-3-1025-7b": (OLMO3_7B, 7_298_011_136, 1e-4),
    # 8.8B: the parameters published for internlm3-8b-instruct (to 0.1B); the shapes give 8,804,241,408
    # (no biases: qkv_bias and bias are false).
    "internlm3-8b-instruct": (INTERNLM3_8B, 8.8e9, 1e-3),
    # granite-3.1-1b-a400m's exact 1,334,628,352 plus the shared_mlp's 24 x 3 x 1024 x 1024 (input_linear
    # 2 x 1024 wide, output_linear 1024 wide): shape arithmetic on a published count, not a checkpoint's own.
    "granite-moe-shared-1b": (GRANITE_MOE_SHARED, 1_334_628_352 + 24 * 3 * 1024 * 1024, 0),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_family_counts_its_checkpoints_published_parameters(name):
    cfg, published, rel = PUBLISHED[name]
    assert from_hf_config(cfg, name).param_count() == pytest.approx(published, rel=rel, abs=0)


def test_olmoe_every_layer_is_64_experts_top_8_intermediate_size_wide():
    """OlmoeSparseMoeBlock on every layer: num_experts OlmoeMLPs intermediate_size wide, a router
    hidden -> experts, no shared expert; 1.3B active parameters published (OLMoE paper, model card)."""
    m = from_hf_config(OLMOE_1B_7B, "olmoe-1b-7b-0924")
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.vocab, m.tie_embeddings) == (
        16, 2048, 16, 16, 128, 50304, False)
    e = m.moe
    assert (e.num_experts, e.top_k, e.expert_intermediate, e.shared_experts, e.first_dense_layers) == (64, 8, 1024, 0, 0)
    assert m.moe_layers == 16 and not e.shared_gate and m.dtype == "bf16" and m.max_context == 4096
    assert m.param_count() == 6_919_161_856 - 16 * (2048 + 2048)
    assert m.param_count(active=True) == pytest.approx(1.3e9, rel=0.02)
    assert from_hf_config({**OLMOE_1B_7B, "num_local_experts": 64}).moe.num_experts == 64  # attribute_map's name


def test_olmo3_windows_three_layers_in_four():
    """24 of 32 layers attend within 4,096 tokens; the 8 full ones keep every token's KV."""
    m = from_hf_config(OLMO3_7B, "olmo-3-1025-7b")
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab) == (
        32, 4096, 32, 32, 128, 11008, 100278)
    assert (m.window, m.window_layers, m.local_layers, m.max_context) == (4096, 24, 24, 65536)
    per_layer_token = 2 * 32 * 128 * 2
    assert m.kv_bytes_per_rank(65536, 1) == pytest.approx(per_layer_token * (8 * 65536 + 24 * 4096))


def test_olmo3_without_its_window_keys_takes_olmo3configs_defaults():
    """Olmo3Config: sliding_window 4096 and every (i + 1) % 4 != 0 layer sliding when unstated;
    an explicit null window is full attention everywhere."""
    bare = {k: v for k, v in OLMO3_7B.items() if k not in ("layer_types", "sliding_window")}
    assert (lambda m: (m.window, m.window_layers))(from_hf_config(bare)) == (4096, 24)
    assert (lambda m: (m.window, m.window_layers))(from_hf_config({**bare, "num_hidden_layers": 30})) == (4096, 23)
    assert from_hf_config({**bare, "sliding_window": None}).window == 0
    assert from_hf_config({**OLMO3_7B, "layer_types": ["full_attention"] * 32}).window == 0


def test_internlm3_reads_as_llama_layers_with_two_kv_heads():
    """vLLM serves InternLM3ForCausalLM with llama.py: head_dim 128, 2 KV heads; its dynamic RoPE
    scaling (factor 6 on 32,768 positions) read as vLLM reads it: 196,608 tokens."""
    m = from_hf_config(INTERNLM3_8B, "internlm3-8b-instruct")
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab, m.tie_embeddings) == (
        48, 4096, 32, 2, 128, 10240, 128512, False)
    assert m.attention_params() == 4096 * (32 + 2 * 2) * 128 + 32 * 128 * 4096
    assert m.param_count() == 8_804_241_408 and m.max_context == 196608 and m.moe is None
    assert from_hf_config({**INTERNLM3_8B, "qkv_bias": True, "bias": True}).param_count() == m.param_count()


def test_granite_moe_shared_adds_one_ungated_shared_expert():
    """GraniteMoeSharedMLP: input_linear hidden -> 2 x shared_intermediate_size, output_linear back;
    added to the routed experts' output with no gate (Qwen2-MoE's has a sigmoid gate, DeepSeek's none)."""
    m = from_hf_config(GRANITE_MOE_SHARED, "granite-moe-shared")
    e = m.moe
    assert (e.num_experts, e.top_k, e.expert_intermediate, e.shared_experts, e.shared_intermediate) == (
        32, 8, 512, 1, 1024)
    assert not e.shared_gate and m.moe_layers == 24
    plain = from_hf_config(GRANITE_MOE_1B)
    assert m.param_count(active=True) - plain.param_count(active=True) == 24 * 3 * 1024 * 1024
    assert from_hf_config({**GRANITE_MOE_SHARED, "shared_intermediate_size": 0}).moe.shared_experts == 0
    m.check_tp(8)  # 16 heads, 8 KV heads, experts 512 and shared 1024 wide all split over 8


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_speedplan_sweep_prices_each_config_json(name, tmp_path, cli):
    cfg = PUBLISHED[name][0]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out = tmp_path / "plan"
    proc = cli("sweep", "--model", str(path), "--batch", "1", "--mechanism", "ngram", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "sweep.csv").read_text().count("\n") > 1 and "error" not in proc.stderr
    assert get_model(str(path)).param_count() == from_hf_config(cfg).param_count()


@pytest.mark.parametrize("base, edit, key", [
    (OLMOE_1B_7B, {"num_experts": "64"}, "'num_experts'"),
    (OLMOE_1B_7B, {"num_experts_per_tok": 65}, "num_experts_per_tok"),
    (OLMO3_7B, {"sliding_window": "4096"}, "'sliding_window'"),
    (OLMO3_7B, {"layer_types": ["sliding_attention"] * 31}, "'layer_types'"),
    (INTERNLM3_8B, {"qkv_bias": "no"}, "'qkv_bias'"),
    (INTERNLM3_8B, {"bias": 0}, "'bias'"),
    (INTERNLM3_8B, {"head_dim": "128"}, "'head_dim'"),
    (GRANITE_MOE_SHARED, {"shared_intermediate_size": "1024"}, "'shared_intermediate_size'"),
    (GRANITE_MOE_SHARED, {"shared_intermediate_size": -1}, "'shared_intermediate_size'"),
    (GRANITE_MOE_SHARED, {"shared_intermediate_size": True}, "'shared_intermediate_size'"),
])
def test_a_malformed_key_is_one_line_naming_file_and_key(base, edit, key, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, **edit}))
    with pytest.raises(SpeedplanInputError) as err:
        get_model(str(path))
    assert str(path) in str(err.value) and key in str(err.value) and "\n" not in str(err.value)
    assert run(["models", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and str(path) in lines[0]


def test_the_refusal_names_the_added_families():
    cfg = {**OLMOE_1B_7B, "architectures": ["FooForCausalLM"], "model_type": "foo"}
    with pytest.raises(SpeedplanInputError) as err:
        from_hf_config(cfg)
    assert all(f in str(err.value) for f in ("OLMoE", "OLMo-3", "InternLM3", "Granite-MoE-Shared"))
