import json

import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.specs.model import from_hf_config, get_model, preset_names

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
