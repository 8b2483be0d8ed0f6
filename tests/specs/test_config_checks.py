"""What an audit of 2026-12-05 found accepted: tensor-parallel sizes vLLM refuses (only query
heads were checked), MoE configs whose dense-layer count gave negative parameters, and odd
config.json fields (layer_types, v_head_dim 0, a Qwen-MoE without its experts' width, an unknown
architecture priced as Llama). Each is refused in one line naming the option or field."""

from __future__ import annotations

import json

import pytest

from speedplan.cli.app import run
from speedplan.errors import SpeedplanInputError
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import PRESET_DIR, get_model, preset_names


def _preset(name: str) -> dict:
    return json.loads((PRESET_DIR / f"{name}.json").read_text())


@pytest.mark.parametrize("model, tp, words", [
    ("llama-3.2-3b", 6, ["--tp 6", "8 KV heads"]),  # 24 query heads split over 6; 8 KV heads neither split nor replicate
    ("llama-3.2-3b", 12, ["--tp 12", "8 KV heads"]),
    ("smollm2-135m", 9, ["--tp 9", "intermediate_size 1536"]),
    ("glm-4.7-flash", 5, ["--tp 5", "routed experts' intermediate size 1536"]),  # 20 heads split over 5
])
def test_a_tp_vllm_refuses_is_refused_naming_what_does_not_split(model, tp, words):
    with pytest.raises(SpeedplanInputError) as err:
        get_model(model).check_tp(tp)
    assert all(w in str(err.value) for w in words), err.value


def test_an_odd_intermediate_size_refuses_tp_2():
    cfg = {**_preset("llama-3.1-8b"), "intermediate_size": 14337}
    with pytest.raises(SpeedplanInputError, match="--tp 2: .*intermediate_size 14337"):
        from_hf_config(cfg, name="odd").check_tp(2)
    from_hf_config(cfg, name="odd").check_tp(1)


@pytest.mark.parametrize("model, tps", [
    ("llama-3.1-8b", (1, 2, 4, 8)), ("llama-3.1-70b", (4, 8)), ("llama-3.1-405b", (8,)), ("deepseek-v3", (8, 16)),
    ("qwen3-30b-a3b", (4, 8)), ("qwen3-next-80b-a3b", (4,)), ("smollm2-135m", (1, 3)), ("mixtral-8x7b", (8,)),
    ("llama-3.2-1b", (4, 8, 16)),  # 16 > 8 KV heads: each is replicated on two ranks, as vLLM does
    ("qwen3-235b-a22b", (8,)), ("gpt-oss-120b", (8,)),
])
def test_the_presets_keep_the_tps_the_docs_and_tests_use(model, tps):
    for tp in tps:
        get_model(model).check_tp(tp)


def test_every_preset_runs_on_one_gpu():
    for name in preset_names():
        get_model(name).check_tp(1)


def test_the_cli_refuses_a_kv_head_tp_in_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "rep"
    assert run(["sweep", "--model", "llama-3.2-3b", "--tp", "6", "--batch", "1", "--mechanism", "ngram",
                "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--tp 6" in err and "KV heads" in err and err.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize("edit, field", [
    ({"first_k_dense_replace": 100}, "'first_k_dense_replace' 100"),  # gave params_b -26.2
    ({"first_k_dense_replace": 48}, "'first_k_dense_replace' 48"),
    ({"mlp_only_layers": list(range(100))}, "'mlp_only_layers'"),
    ({"mlp_only_layers": ["a"]}, "'mlp_only_layers'"),
    ({"mlp_only_layers": [3, 3]}, "'mlp_only_layers'"),
    ({"mlp_only_layers": 4}, "'mlp_only_layers'"),
])
def test_a_moe_dense_layer_count_beyond_the_layers_is_refused(edit, field):
    with pytest.raises(SpeedplanInputError, match=field):
        from_hf_config({**_preset("qwen3-30b-a3b"), **edit})


def test_listed_dense_layers_count_once_each():
    m = from_hf_config({**_preset("qwen3-30b-a3b"), "mlp_only_layers": [0, 47]})
    assert (m.moe.first_dense_layers, m.moe_layers) == (2, 46) and m.param_count() > 0


def test_the_cli_refuses_a_negative_parameter_moe(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_preset("qwen3-30b-a3b"), "first_k_dense_replace": 100}))
    assert run(["models", str(path)]) == 2
    err = capsys.readouterr().err
    assert "first_k_dense_replace" in err and err.count("\n") == 1


LOCAL = "sliding_attention"


@pytest.mark.parametrize("layer_types, words", [
    ([LOCAL] * 3, "'layer_types' names 3 layers, num_hidden_layers is 32"),
    ([LOCAL] * 64, "'layer_types' names 64 layers"),
    (LOCAL, "'layer_types' must be a list"),
    (["weird"] * 32, "'layer_types' holds 'weird'"),
    (["mamba"] * 32, "'layer_types' holds 'mamba'"),
])
def test_layer_types_must_name_one_known_kind_per_layer(layer_types, words):
    cfg = {**_preset("llama-3.1-8b"), "sliding_window": 4096, "layer_types": layer_types}
    with pytest.raises(SpeedplanInputError, match=words):
        from_hf_config(cfg)


def test_a_full_layer_types_list_still_reads():
    cfg = {**_preset("llama-3.1-8b"), "sliding_window": 4096, "layer_types": [LOCAL, "full_attention"] * 16}
    assert from_hf_config(cfg).local_layers == 16


@pytest.mark.parametrize("field", ["v_head_dim", "qk_rope_head_dim", "qk_nope_head_dim"])
def test_an_mla_dimension_of_zero_is_refused(field):
    with pytest.raises(SpeedplanInputError, match=f"'{field}' must be > 0"):
        from_hf_config({**_preset("deepseek-v3"), field: 0})


def test_a_qwen_moe_without_its_experts_width_is_refused():
    """Without moe_intermediate_size a Qwen3-MoE was priced with 14336-wide experts (47.5B)."""
    cfg = {k: v for k, v in _preset("qwen3-30b-a3b").items() if k != "moe_intermediate_size"}
    with pytest.raises(SpeedplanInputError, match="missing 'moe_intermediate_size'"):
        from_hf_config(cfg)
    with pytest.raises(SpeedplanInputError, match="missing 'moe_intermediate_size'"):
        from_hf_config({**cfg, "architectures": None, "model_type": "qwen3_moe"})
    # Mixtral's experts are intermediate_size wide: its config states no moe_intermediate_size
    assert get_model("mixtral-8x7b").moe.expert_intermediate == 14336


def test_an_unknown_architecture_is_refused_naming_it_and_the_way_on():
    cfg = {**_preset("llama-3.1-8b"), "architectures": ["FooForCausalLM"], "model_type": "foo"}
    with pytest.raises(SpeedplanInputError, match=r"'FooForCausalLM' is not a family .*\"LlamaForCausalLM\""):
        from_hf_config(cfg)
    del cfg["architectures"]  # a model_type of no priced family is refused as its architecture is
    with pytest.raises(SpeedplanInputError, match=r"model_type 'foo' is not a family .*\"LlamaForCausalLM\""):
        from_hf_config(cfg)
    del cfg["model_type"]  # neither (a hand-written config): read as a Llama-style decoder, its source its path
    assert from_hf_config({k: v for k, v in cfg.items() if k != "_source"}, where="x/config.json").source == "x/config.json"
    llama = from_hf_config({**cfg, "model_type": "llama"})  # the family from model_type alone
    assert llama.param_count() == get_model("llama-3.1-8b").param_count()
    cfg["model_type"] = "foo"
    for arch in ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                 "Gemma3ForConditionalGeneration", "Phi3ForCausalLM"):
        from_hf_config({**cfg, "architectures": [arch]})


def test_dense_glm4_is_priced_as_before_the_architecture_check():
    """GLM-4-9B-0414 (Glm4ForCausalLM) and glm-4-9b-chat-hf (GlmForCausalLM) were priced as
    Llama-style decoders of the right size before unknown architectures were refused, and then
    were refused (a review of 2026-12-04): they are priced families."""
    cfg = {"architectures": ["Glm4ForCausalLM"], "attention_bias": True, "head_dim": 128, "hidden_act": "silu",
           "hidden_size": 4096, "intermediate_size": 13696, "max_position_embeddings": 32768, "model_type": "glm4",
           "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 2, "partial_rotary_factor": 0.5,
           "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
           "vocab_size": 151552}
    assert from_hf_config(cfg, "glm-4-9b-0414").param_count() / 1e9 == pytest.approx(9.40, abs=0.01)
    assert from_hf_config({**cfg, "architectures": ["GlmForCausalLM"], "model_type": "glm"}, "glm-4-9b-chat-hf").layers == 40


def test_gated_deltanet_heads_must_split_over_the_tp():
    """vLLM divides a Gated DeltaNet layer's value heads by the TP (divide(num_v_heads, tp)) and
    shards the key heads' projections: a TP that splits the query heads but not those is refused."""
    from dataclasses import replace

    m = get_model("qwen3-next-80b-a3b")
    m.check_tp(16)  # 16 query heads, 16 key heads, 32 value heads
    odd = replace(m, linear=replace(m.linear, value_heads=24))
    with pytest.raises(SpeedplanInputError, match="--tp 16: .*linear-attention value heads 24 does not split evenly"):
        odd.check_tp(16)
    odd.check_tp(8)
