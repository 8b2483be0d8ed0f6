"""`eagle3:config=PATH` took any config as the EAGLE-3 head (an audit of 2026-12-05): the
target's own 32-layer config (speculation then switched off silently), a head 2048 wide against
a 4096-wide target, a 1e6-layer head. vLLM's fc reads 3 x (target_hidden_size, else
hidden_size) of the target's hidden states, and its published heads have one decoder layer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speedplan.cost.ops import load_cost_model
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms import parse_mechanism
from speedplan.plan.mechanisms.heads import EAGLE3_MAX_LAYERS, eagle3_memory_bytes
from speedplan.specs.model import PRESET_DIR, get_model

# yuhuili/EAGLE3-LLaMA3.1-Instruct-8B config.json (as in test_mechanisms.py)
HEAD = {"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 32000, "hidden_size": 4096,
        "intermediate_size": 14336, "model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_hidden_layers": 1, "torch_dtype": "float16", "vocab_size": 128256}


def _head(tmp_path, **edit) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**HEAD, **edit}))
    return str(path)


@pytest.mark.parametrize("layers", [32, 10**6, EAGLE3_MAX_LAYERS + 1])
def test_a_head_of_many_layers_is_refused(tmp_path, layers):
    with pytest.raises(SpeedplanInputError, match=f"{layers} decoder layers .*draft-model:PATH"):
        parse_mechanism(f"eagle3:config={_head(tmp_path, num_hidden_layers=layers)}", get_model("llama-3.1-8b"))


def test_the_target_config_as_head_is_refused():
    with pytest.raises(SpeedplanInputError, match="32 decoder layers"):
        parse_mechanism(f"eagle3:config={PRESET_DIR / 'llama-3.1-8b.json'}", get_model("llama-3.1-8b"))


def test_a_head_for_another_hidden_size_is_refused(tmp_path):
    narrow = _head(tmp_path, hidden_size=2048, num_attention_heads=16)
    with pytest.raises(SpeedplanInputError, match="2048 wide .*llama-3.1-8b's are 4096"):
        parse_mechanism(f"eagle3:config={narrow}", get_model("llama-3.1-8b"))
    # a narrow head that says which hidden states it reads (target_hidden_size) is a head for this target
    reads_4096 = _head(tmp_path, hidden_size=2048, num_attention_heads=16, target_hidden_size=4096)
    head = parse_mechanism(f"eagle3:config={reads_4096}", get_model("llama-3.1-8b")).head
    assert (head.layer.hidden, head.target_hidden) == (2048, 4096)
    with pytest.raises(SpeedplanInputError, match="4096 wide"):
        parse_mechanism(f"eagle3:config={_head(tmp_path)}", get_model("qwen3-30b-a3b"))  # hidden 2048


def test_a_two_layer_head_is_priced_and_named(tmp_path):
    target = get_model("llama-3.1-8b")
    one = parse_mechanism(f"eagle3:config={_head(tmp_path)}", target)
    two = parse_mechanism(f"eagle3:config={_head(tmp_path, num_hidden_layers=2)}", target)
    assert "2 decoder layers" in two.acceptance_source and "decoder layers" not in one.acceptance_source
    cost = load_cost_model("h100-sxm")
    args = (cost, target, np.array([1.0, 64.0]), np.array([3.0, 3.0]), np.array([4096.0, 4096.0]), None, 1)
    t1, t2 = one.draft_cost(*args).total_s, two.draft_cost(*args).total_s
    assert (t2 > 1.2 * t1).all() and (t2 < 2 * t1).all()  # the reduced lm_head and the fc are paid once
    # only vLLM's first layer reads [embedding, hidden] (2h): the second's qkv projection is h wide
    extra = eagle3_memory_bytes(two.head, 0.0, 0.0, 1) - eagle3_memory_bytes(one.head, 0.0, 0.0, 1)
    assert extra == pytest.approx(one.head.layer.layer_params(False) * 2)  # one plain layer, 2 bytes a weight


def test_an_eagle1_head_for_another_model_is_refused(tmp_path):
    with pytest.raises(SpeedplanInputError, match="hidden_size 2048 and 1 layers; an EAGLE-1/2 head .* 4096"):
        parse_mechanism(f"eagle:config={_head(tmp_path, hidden_size=2048, num_attention_heads=16)}",
                        get_model("llama-3.1-8b"))


def test_a_head_whose_heads_do_not_split_over_the_tp_is_refused(tmp_path):
    """vLLM runs an EAGLE-3 head at the target's TP (speculative_draft_tensor_parallel_size
    unset); a head of 20 query heads beside Llama-3.1-8B (32) splits over TP 4, not TP 8."""
    from speedplan.plan.sweep import sweep

    odd = _head(tmp_path, num_attention_heads=20, num_key_value_heads=4, head_dim=128)
    assert len(sweep("llama-3.1-8b", "h100-sxm", [f"eagle3:config={odd}"], batches=[1], tp=4).frame)
    with pytest.raises(SpeedplanInputError, match="eagle3-head's 20 query heads do not split evenly over 8 GPUs"):
        sweep("llama-3.1-8b", "h100-sxm", [f"eagle3:config={odd}"], batches=[1], tp=8)
    sweep("llama-3.1-8b", "h100-sxm", [f"eagle3:config={_head(tmp_path)}"], batches=[1], tp=8)  # 32 heads: runs
    few = _head(tmp_path, num_attention_heads=4, num_key_value_heads=4, head_dim=128)
    with pytest.raises(SpeedplanInputError, match=r"TP 8: above .*eagle3-head's 4 query heads; the engines run"):
        sweep("llama-3.1-8b", "h100-sxm", [f"eagle3:config={few}"], batches=[1], tp=8)
    # an EAGLE-1/2 head of one's own too (a review found it priced at TP 8)
    eagle = _head(tmp_path, num_attention_heads=20, num_key_value_heads=4, head_dim=128,
                  architectures=["LlamaForCausalLM"])
    for name in ("eagle", "eagle-tree"):
        with pytest.raises(SpeedplanInputError, match=f"{name}-head's 20 query heads do not split evenly over 8"):
            sweep("llama-3.1-8b", "h100-sxm", [f"{name}:config={eagle}"], batches=[1], tp=8)
