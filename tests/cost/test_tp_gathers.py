"""At TP > 1 vLLM adds all-gathers to some families' attention: OLMo-2 (and OLMo-3, served by the
same olmo2.py) gathers q and k to normalise each over its whole projection; InternLM2 gathers its
fused wqkv output to split q, k and v. They are priced as communication, each as the all-reduce of
half its bytes (a ring all-gather moves what a ring all-reduce of half the bytes moves); at TP 1
and for other families nothing changes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from speedplan.cost.forward import forward_cost
from speedplan.cost.ops import load_cost_model
from speedplan.specs.hf_config import from_hf_config
from tests.specs.test_more_decoder_families import INTERNLM2_7B, OLMO2_7B
from speedplan.plan.mechanisms.heads import head_spec
from tests.specs.test_moe_decoder_families import OLMO3_7B, OLMOE_1B_7B

BATCH, Q_LEN, CONTEXT = np.array([1, 16, 64]), 4, 2048


@pytest.mark.parametrize("cfg, widths", [
    (OLMO2_7B, (4096, 4096)),  # q: 32 heads x 128; k: 32 KV heads x 128
    (OLMO3_7B, (4096, 4096)),
    (OLMOE_1B_7B, (2048, 2048)),  # olmoe.py gathers as olmo2.py does: 16 heads x 128, 16 KV heads x 128
    (INTERNLM2_7B, ((32 + 2 * 8) * 128,)),  # wqkv: q, k and v side by side
])
def test_the_families_that_gather_name_each_gathers_width(cfg, widths):
    assert from_hf_config(cfg).tp_gathers == widths


def test_a_llama_layer_gathers_nothing():
    assert from_hf_config({**OLMO2_7B, "architectures": ["LlamaForCausalLM"], "model_type": "llama"}).tp_gathers == ()


@pytest.mark.parametrize("hardware", ["h100-sxm", "a100-80gb"])  # a measured profile; a roofline preset
@pytest.mark.parametrize("cfg", [OLMO2_7B, INTERNLM2_7B])
def test_the_gathers_add_their_price_at_tp_above_1_only(cfg, hardware):
    cost = load_cost_model(hardware)
    model = from_hf_config(cfg)
    plain = replace(model, tp_gathers=())
    tokens = BATCH * Q_LEN
    for tp in (1, 2, 4):
        with_gathers = forward_cost(cost, model, BATCH, Q_LEN, CONTEXT, tp=tp)
        without = forward_cost(cost, plain, BATCH, Q_LEN, CONTEXT, tp=tp)
        expected = sum(model.attention_layers * cost.allreduce(tokens * w * 2 / 2, tp).latency_us
                       for w in model.tp_gathers) * 1e-6 if tp > 1 else 0.0
        np.testing.assert_allclose(with_gathers.comm_s - without.comm_s, expected, rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(with_gathers.gemm_s, without.gemm_s)  # nothing else moves
        if tp > 1:
            assert (with_gathers.comm_s > without.comm_s).all()


@pytest.mark.parametrize("cfg", [OLMO2_7B, INTERNLM2_7B])
def test_an_eagle_head_of_such_a_target_gathers_nothing(cfg):
    """vLLM runs EAGLE heads as Llama layers (llama_eagle.py, llama_eagle3.py): no gathers."""
    assert head_spec(from_hf_config(cfg), "eagle").tp_gathers == ()
