"""Model specs: the shipped presets, config.json reading per family, quantized weights and context limits."""

import json
from dataclasses import replace

import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import PRESET_DIR, get_model, preset_names

REQUIRED = {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "qwen3-8b",
            "qwen3-32b", "smollm2-135m", "mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"}


def test_all_required_presets_ship():
    assert REQUIRED <= set(preset_names())


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_parameter_count_within_one_percent_of_published(name):
    m = get_model(name)
    assert m.published_params, f"{name} preset lacks _published_params"
    assert abs(m.param_count() / m.published_params - 1) < 0.01


def test_deepseek_v3_mtp_and_active_params():
    m = get_model("deepseek-v3")
    assert m.mla is not None and m.moe is not None and m.mtp_layers == 1
    assert abs(m.param_count(include_mtp=True) / 685e9 - 1) < 0.01  # 671B + 14B MTP module
    assert abs(m.param_count(active=True) / 37e9 - 1) < 0.03  # "37B activated"


def test_moe_active_params():
    assert abs(get_model("mixtral-8x7b").param_count(active=True) / 12.9e9 - 1) < 0.01
    assert abs(get_model("qwen3-30b-a3b").param_count(active=True) / 3.3e9 - 1) < 0.03


def test_config_json_file_and_folder(tmp_path):
    cfg = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 3,
           "intermediate_size": 512, "vocab_size": 1000, "architectures": ["LlamaForCausalLM"]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = get_model(str(tmp_path))
    assert m.head_dim == 64 and m.group_size == 2
    expected = 1000 * 256 * 2 + 256 + 3 * (256 * 256 * 2 + 2 * 256 * 128 + 3 * 256 * 512 + 2 * 256)
    assert m.param_count() == expected
    assert get_model(str(tmp_path / "config.json")).param_count() == expected


def test_an_edited_config_is_read_again(tmp_path):
    """A notebook user edits config.json between calls: the second call prices the new model
    (until 2026-12-03 get_model cached paths too and returned the first file's model)."""
    cfg = {"hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 3,
           "intermediate_size": 512, "vocab_size": 1000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert get_model(str(path)).layers == 3
    path.write_text(json.dumps({**cfg, "num_hidden_layers": 5}))
    assert get_model(str(path)).layers == 5
    assert get_model("llama-3.1-8b") is get_model("LLAMA-3.1-8B")  # presets: read once


@pytest.mark.parametrize("cfg, word", [
    ({"num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 10}, "hidden_size"),
    ({"hidden_size": "big", "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 10}, "hidden_size"),
    ({"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3, "num_hidden_layers": 2,
      "vocab_size": 10, "intermediate_size": 8}, "kv_heads"),
])
def test_malformed_configs_name_the_problem(cfg, word):
    with pytest.raises(SpeedplanInputError, match=word):
        from_hf_config(cfg)


def test_unknown_model_and_bad_json(tmp_path):
    with pytest.raises(SpeedplanInputError, match="unknown model"):
        get_model("no-such-model")
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(SpeedplanInputError, match="malformed JSON"):
        get_model(str(bad))


LLAMA4_SCOUT = {  # text_config of meta-llama/Llama-4-Scout-17B-16E (the vision tower is not priced)
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
    "text_config": {"model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192,
                    "intermediate_size_mlp": 16384, "num_attention_heads": 40, "num_hidden_layers": 48,
                    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048, "num_local_experts": 16,
                    "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "torch_dtype": "bfloat16"}}


@pytest.mark.parametrize("experts, step, total_b", [(16, 1, 109), (128, 2, 400)])
def test_llama4_shared_expert_and_interleaved_moe_layers(experts, step, total_b):
    """Scout (16 experts in every layer) and Maverick (128 experts every other layer, dense
    layers 16384 wide): one shared expert per MoE layer; published 109B / 400B total with the
    vision tower (about 1B), 17B active."""
    cfg = json.loads(json.dumps(LLAMA4_SCOUT))
    cfg["text_config"].update(num_local_experts=experts, interleave_moe_layer_step=step)
    m = from_hf_config(cfg)
    assert m.moe.shared_experts == 1 and m.moe.shared_intermediate == 8192
    assert m.moe_layers == 48 // step and (step == 1 or m.dense_intermediate == 16384)
    assert m.param_count() / 1e9 == pytest.approx(total_b, rel=0.02)
    assert m.param_count(active=True) / 1e9 == pytest.approx(17, rel=0.02)


@pytest.mark.parametrize("extra, local", [
    ({}, 36),  # Llama4TextConfig's default: every 4th layer (NoPE) attends to every token
    ({"no_rope_layers": [1, 1, 0] * 16}, 32),  # 1 = RoPE = chunked
    ({"layer_types": ["chunked_attention", "full_attention"] * 24}, 24),
    ({"no_rope_layer_interval": 2}, 24),
])
def test_llama4_chunked_attention_layers_hold_and_read_one_chunk(extra, local):
    """Llama-4's RoPE layers attend within their chunk of 8192 positions: priced as a window of
    one chunk (the upper bound), their KV held for one chunk; the summary names it a chunk."""
    cfg = json.loads(json.dumps(LLAMA4_SCOUT))
    cfg["text_config"].update(attention_chunk_size=8192, **extra)
    m = from_hf_config(cfg)
    assert (m.window, m.local_layers, m.chunked) == (8192, local, True)
    assert m.summary()["sliding_window"] == f"8192-token chunks on {local} of 48 layers"
    full = m.kv_bytes_per_token_per_rank(1)
    assert m.kv_bytes_per_rank(32768, 1) == pytest.approx(((48 - local) * 32768 + local * 8192) / 48 * full)
    without = from_hf_config({**LLAMA4_SCOUT, "text_config": {**LLAMA4_SCOUT["text_config"], "attention_chunk_size": None}})
    assert (without.window, without.chunked) == (0, False)  # null: no chunks; left out: Llama4TextConfig's 8192
    assert from_hf_config(LLAMA4_SCOUT).local_layers == 36
    from speedplan.cost.forward import attention_shape, forward_cost
    from speedplan.cost.ops import CostModel
    from speedplan.specs.hardware import get_hardware

    cost = CostModel(get_hardware("h100-sxm"))

    def layer_us(keys):  # one layer's decode attention of 8 sequences reading `keys` keys each
        return float(cost.attention(8, 1, keys, *attention_shape(m, 8), "causal", "bf16").latency_us)

    chunked_s = forward_cost(cost, m, batch=8, q_len=1, context=32768, tp=8).attention_s
    full_s = forward_cost(cost, without, batch=8, q_len=1, context=32768, tp=8).attention_s
    assert full_s == pytest.approx(48 * layer_us(32769) * 1e-6)
    assert chunked_s == pytest.approx(((48 - local) * layer_us(32769) + local * layer_us(8192)) * 1e-6)
    with pytest.raises(SpeedplanInputError, match="'attention_chunk_size' must be a positive integer"):
        cfg["text_config"]["attention_chunk_size"] = "8k"
        from_hf_config(cfg)


def test_deepseek_v2_lite_has_no_q_lora():
    """DeepSeek-V2-Lite states "q_lora_rank": null (Q projected directly): 15.7B total, 2.4B active
    published (the active count here adds the attention's full Q projection: 2.66B)."""
    cfg = {"model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944, "moe_intermediate_size": 1408,
           "num_attention_heads": 16, "num_hidden_layers": 27, "num_key_value_heads": 16, "n_routed_experts": 64,
           "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1, "kv_lora_rank": 512,
           "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
           "vocab_size": 102400}
    m = from_hf_config(cfg)
    assert m.mla.q_lora_rank == 0 and m.param_count() / 1e9 == pytest.approx(15.7, rel=0.01)


@pytest.mark.parametrize("quant, dtype", [
    ({"quant_method": "fp8"}, "fp8"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}}}, "fp8"),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}}}, None),
    ({"quant_method": "mxfp4"}, None),
    ({"quant_method": "awq", "bits": 4}, None),
])
def test_quantized_checkpoints_are_priced_at_their_width_or_refused(quant, dtype):
    cfg = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
           "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16", "quantization_config": quant}
    if dtype:
        assert from_hf_config(cfg).dtype == dtype
    else:
        with pytest.raises(SpeedplanInputError, match=f"quantization '{quant['quant_method']}' is not modelled"):
            from_hf_config(cfg)


def _dense(hidden, inter, heads, kv, layers, vocab, **extra):
    return {"hidden_size": hidden, "intermediate_size": inter, "num_attention_heads": heads,
            "num_key_value_heads": kv, "num_hidden_layers": layers, "vocab_size": vocab, **extra}


@pytest.mark.parametrize("cfg, published_b", [
    (_dense(3584, 14336, 16, 8, 42, 256000, head_dim=256, tie_word_embeddings=True), 9.24),  # google/gemma-2-9b
    (_dense(3072, 8192, 32, 32, 32, 32064), 3.82),  # microsoft/Phi-3-mini-4k-instruct
    (_dense(4096, 14336, 32, 8, 32, 32768, head_dim=None), 7.25),  # mistralai/Mistral-7B-v0.3
    (_dense(3584, 18944, 28, 4, 28, 152064), 7.61),  # Qwen/Qwen2.5-7B
])
def test_other_dense_families_count_their_published_parameters(cfg, published_b):
    assert from_hf_config(cfg).param_count() / 1e9 == pytest.approx(published_b, rel=0.01)


@pytest.mark.parametrize("extra, window, local", [
    ({"model_type": "gemma2", "sliding_window": 4096}, 4096, 21),  # every other layer, from the first
    ({"model_type": "gemma3_text", "sliding_window": 1024, "sliding_window_pattern": 6}, 1024, 35),
    ({"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 21}, 128, 21),
    ({"model_type": "qwen2", "sliding_window": 131072, "use_sliding_window": False}, 0, 0),
    ({"model_type": "mistral", "sliding_window": 4096}, 4096, 42),  # Mistral-7B-v0.1: every layer
    ({"model_type": "mistral", "sliding_window": None}, 0, 0),
])
def test_sliding_window_layers_are_read_per_family(extra, window, local):
    m = from_hf_config(_dense(3584, 14336, 16, 8, 42, 256000, head_dim=256, **extra))
    assert (m.window, m.local_layers) == (window, local)


def test_sliding_window_layers_hold_at_most_the_window_of_kv():
    """Gemma-2: half the layers keep 4096 tokens; at 8192 tokens a sequence holds 3/4 of the KV
    full attention would, at 4096 and below all of it."""
    m = from_hf_config(_dense(3584, 14336, 16, 8, 42, 256000, head_dim=256, model_type="gemma2", sliding_window=4096))
    full = m.kv_bytes_per_token_per_rank(1)
    assert m.kv_bytes_per_rank(4096, 1) == pytest.approx(4096 * full)
    assert m.kv_bytes_per_rank(8192, 1) == pytest.approx(0.75 * 8192 * full)
    with pytest.raises(SpeedplanInputError, match=r"'sliding_window' must be a positive integer \(at most 2\*\*31\) or null"):
        from_hf_config(_dense(4096, 14336, 32, 8, 32, 32768, sliding_window="4k"))


@pytest.mark.parametrize("extra, word", [
    ({"model_type": "gemma3_text", "sliding_window": 1024, "sliding_window_pattern": "six"}, "sliding_window_pattern"),
    ({"model_type": "llama4_text", "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 0},
     "interleave_moe_layer_step"),
])
def test_malformed_family_keys_are_one_line(extra, word):
    with pytest.raises(SpeedplanInputError, match=word):
        from_hf_config(_dense(4096, 14336, 32, 8, 32, 32768, **extra))


def test_mutated_configs_are_read_or_refused_in_one_line():
    """Shipped presets with one or two keys set to odd values (null, strings, negatives, huge
    numbers, lists, objects): each is either a model the planner can price or one input error,
    never another exception (2026-12-03: 159 of 3,000 such configs raised TypeError or crashed
    the sweep, e.g. a string for `architectures`, a list for `num_experts`, 1e12 for `vocab_size`)."""
    import random

    from speedplan.plan.sweep import sweep
    from speedplan.specs.model import PRESET_DIR

    rng = random.Random(0)
    bases = [json.loads(p.read_text()) for p in sorted(PRESET_DIR.glob("*.json"))]
    odd = [None, "x", -1, 0, [], {}, True, 1e9, 3.5, 10**12, "", [1, 2]]
    for _ in range(150):
        cfg = json.loads(json.dumps(rng.choice(bases)))
        for _ in range(rng.randint(1, 2)):
            cfg[rng.choice(sorted(cfg))] = rng.choice(odd)
        try:
            model = from_hf_config(cfg, name="mutated")
        except SpeedplanInputError as e:
            assert "\n" not in str(e)
            continue
        sweep(model, "h100-sxm", ["ngram"], [1, 8], [0, 2], contexts=[1024])


def test_gpt_oss_experts_ship_in_mxfp4():
    """gpt-oss-120b: 116.83B parameters published (the input embedding included); its routed
    experts are stored at 4.25 bits a weight (4-bit values, an 8-bit scale per 32), the rest in
    bf16: about 65 GB of weights (OpenAI: it runs on one 80 GB GPU), where 16-bit experts gave 234 GB."""
    m = get_model("gpt-oss-120b")
    assert m.param_count() / 1e9 == pytest.approx(116.83, rel=0.001)
    experts = 36 * 128 * 3 * 2880 * 2880
    assert m.weight_bytes() == pytest.approx((m.param_count() - experts) * 2 + experts * 4.25 / 8)
    assert m.weight_bytes() / 1e9 == pytest.approx(65.2, rel=0.01)
    assert m.summary()["experts"] == "4/128 mxfp4" and m.dtype == "bf16"
    dense = {k: v for k, v in json.loads((PRESET_DIR / "llama-3.1-8b.json").read_text()).items()}
    dense["quantization_config"] = {"quant_method": "mxfp4"}
    with pytest.raises(SpeedplanInputError, match="quantization 'mxfp4' is not modelled"):
        from_hf_config(dense)


def test_mxfp4_expert_gemms_read_their_narrow_weights():
    """While memory-bound, an MXFP4 expert GEMM costs what a bf16 GEMM reading the same bytes
    costs (N · 4.25/16 columns); once the bf16 GEMM is compute-bound, the full GEMM."""
    import numpy as np

    from speedplan.cost.forward import _narrow_weight_gemm, forward_cost
    from speedplan.cost.ops import CostModel
    from speedplan.specs.hardware import get_hardware

    cost, ratio = CostModel(get_hardware("h100-sxm")), 4.25 / 16
    m = np.array([1.0, 16.0, 4096.0])
    op = _narrow_weight_gemm(cost, m, 2 * 2880 * 128, 2880, "bf16", ratio)
    full, narrow = cost.gemm(m, 2 * 2880 * 128, 2880, "bf16"), cost.gemm(m, 2 * 2880 * 128 * ratio, 2880, "bf16")
    assert list(full.bound) == ["memory", "memory", "compute"]
    assert op.latency_us[:2] == pytest.approx(narrow.latency_us[:2]) and op.latency_us[2] == pytest.approx(full.latency_us[2])
    model = get_model("gpt-oss-120b")
    as_bf16 = replace(model, moe=replace(model.moe, expert_bits=0.0))
    narrow_s, wide_s = (forward_cost(cost, spec, batch=8, q_len=1, context=4096).gemm_s for spec in (model, as_bf16))
    assert narrow_s < 0.6 * wide_s


@pytest.mark.parametrize("extra, word", [
    ({"model_type": "jamba", "architectures": ["JambaForCausalLM"]}, "model_type 'jamba': its Mamba or recurrent"),
    ({"model_type": "mamba"}, "model_type 'mamba'"),
    ({"model_type": "bert", "architectures": ["BertForMaskedLM"]}, "an encoder or encoder-decoder model"),
    ({"architectures": ["LlamaForSequenceClassification"]}, "is not a causal language model"),
    ({"is_encoder_decoder": True, "architectures": ["T5ForConditionalGeneration"]},
     "is_encoder_decoder is true: an encoder-decoder model"),
    ({"torch_dtype": "int8"}, "torch_dtype 'int8' is not one of"),
    ({"torch_dtype": {"a": 1}}, "torch_dtype"),
])
def test_configs_speedplan_would_misprice_are_refused(extra, word):
    """Until 2026-12-03 these were priced as plain Llama layers (a Jamba config came out at 92B
    parameters against 52B published) or as bf16."""
    with pytest.raises(SpeedplanInputError, match=word):
        from_hf_config(_dense(4096, 14336, 32, 8, 32, 32768, **extra))


def test_the_longest_context_a_config_states():
    assert get_model("llama-3.1-8b").max_context == 131072 and get_model("qwen3-8b").max_context == 40960
    assert from_hf_config(_dense(4096, 14336, 32, 8, 32, 32768)).max_context == 0  # not stated: no limit
    yarn = {"max_position_embeddings": 32768, "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                                  "original_max_position_embeddings": 32768}}
    assert from_hf_config(_dense(4096, 14336, 32, 8, 32, 32768, **yarn)).max_context == 131072  # Qwen's YaRN
    stated = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                                    "original_max_position_embeddings": 8192}}
    assert from_hf_config(_dense(4096, 14336, 32, 8, 32, 32768, **stated)).max_context == 131072  # Llama-3.1
    with pytest.raises(SpeedplanInputError, match="--context 65536: above qwen3-8b's 40,960-token context"):
        get_model("qwen3-8b").check_context([4096, 65536])


def test_a_long_or_scaled_context_is_read_as_vllm_reads_it():
    """The review of 2026-12-03: Llama-4-Scout states 10,485,760 positions (refused as a count
    over 10M), and Qwen3's documented YaRN block (factor 4 over 32,768) sits on a config that
    states 40,960, so the factor must scale the original length, not be ignored."""
    scout = {"max_position_embeddings": 10485760, "rope_scaling": {"rope_type": "llama3", "factor": 16.0,
                                                                      "original_max_position_embeddings": 8192}}
    assert from_hf_config(_dense(5120, 8192, 40, 8, 48, 202048, **scout)).max_context == 10485760
    qwen3 = {"max_position_embeddings": 40960, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                                   "original_max_position_embeddings": 32768}}
    assert from_hf_config(_dense(4096, 12288, 32, 8, 36, 151936, **qwen3)).max_context == 131072
    linear = {"max_position_embeddings": 4096, "rope_parameters": {"rope_type": "linear", "factor": 2.0}}
    assert from_hf_config(_dense(4096, 14336, 32, 8, 32, 32768, **linear)).max_context == 8192
    with pytest.raises(SpeedplanInputError, match="dtype 'int4' is not one of"):
        from_hf_config(_dense(4096, 14336, 32, 8, 32, 32768, dtype="int4"))
