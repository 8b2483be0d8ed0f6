"""DeepSeek sparse attention (DeepSeek-V3.2, GLM-5) and GLM's MLA presets: the indexer, its parameters and cost."""

import json

import pytest

from speedplan.errors import SpeedplanInputError
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import PRESET_DIR, get_model


def test_deepseek_v32_adds_the_lightning_indexer():
    """DeepSeek-V3.2 is DeepSeek-V3 plus, on each of its 61 layers, an indexer of 64 heads of
    128 (q from the 1536-wide Q latent; k and the head weights from the hidden state) whose fp8
    keys (128 bytes and a 4-byte scale) are cached per token: 685B published with the MTP layer."""
    m, v3 = get_model("deepseek-v3.2"), get_model("deepseek-v3")
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert m.param_count() - v3.param_count() == 61 * indexer
    assert m.param_count(include_mtp=True) / 1e9 == pytest.approx(685, rel=0.002)
    assert m.kv_bytes_per_token() == v3.kv_bytes_per_token() + 61 * 132
    assert m.summary()["sparse_attention"] == "top-2048, indexer on 61 of 61 layers"


def test_glm5_computes_its_indexer_on_full_layers_only():
    cfg = json.loads((PRESET_DIR / "deepseek-v3.2.json").read_text())
    cfg["indexer_types"] = ["full" if i < 3 or (i - 2) % 4 == 0 else "shared" for i in range(61)]
    m = from_hf_config(cfg)
    assert m.indexer_layers == sum(1 for t in cfg["indexer_types"] if t == "full") == 17
    cfg["index_topk"] = "2k"
    with pytest.raises(SpeedplanInputError, match="'index_topk'"):
        from_hf_config(cfg)


def test_sparse_attention_reads_top_k_latents_per_query():
    """Each verified query gathers its own min(cached, 2048) latents (so a pass of q tokens reads
    q times what one decode token reads, where dense MLA shares the reads), and the indexer
    reads every cached index key."""
    from speedplan.cost.attention_shape import attention_qo_head_dim
    from speedplan.cost.forward import _indexer, attention_shape, forward_cost
    from speedplan.cost.ops import CostModel
    from speedplan.specs.hardware import get_hardware

    cost = CostModel(get_hardware("h200-sxm"))
    m, v3 = get_model("deepseek-v3.2"), get_model("deepseek-v3")
    heads, kv, dim = attention_shape(m, 8)
    for batch, q_len, context in [(4, 4, 1024), (4, 4, 32768)]:
        kv_len = context + q_len
        index_us = float(_indexer(cost, m, batch, q_len, kv_len).latency_us)
        mla_us = float(cost.attention(batch * q_len, 1, min(kv_len, 2048), heads, kv, dim, "causal", "bf16",  # the cache as kept: bf16 (ModelSpec.kv_dtype)
                                      qo_head_dim=attention_qo_head_dim(m)).latency_us)  # MLA's queries: 576 in, 512 out
        priced = forward_cost(cost, m, batch, q_len, context, tp=8).attention_s
        assert priced == pytest.approx(61 * (mla_us + index_us) * 1e-6)
    long_v32 = forward_cost(cost, m, 16, 4, 65536, tp=8).attention_s
    assert long_v32 < forward_cost(cost, v3, 16, 4, 65536, tp=8).attention_s
    tree = forward_cost(cost, m, 16, 8, 32768, tp=8, mask="tree")  # each query's gather list holds its mask
    assert tree.tree_mask_s == 0 and tree.attention_s == forward_cost(cost, m, 16, 8, 32768, tp=8).attention_s


def test_glm47_flash_preset_is_mla_with_64_experts():
    """GLM-4.7-Flash (Glm4MoeLiteForCausalLM): MLA with a 768-wide Q latent, 192 + 64 query/key
    dims and 256-wide values, 64 routed experts (4 a token) and a shared one after one dense
    layer; its cache is 47 layers of a 576-wide latent in bf16."""
    m = get_model("glm-4.7-flash")
    assert (m.mla.q_lora_rank, m.mla.qk_nope_head_dim, m.mla.qk_rope_head_dim, m.mla.v_head_dim) == (768, 192, 64, 256)
    assert (m.moe.num_experts, m.moe.top_k, m.moe.shared_experts, m.moe.first_dense_layers, m.mtp_layers) == (64, 4, 1, 1, 1)
    assert m.kv_bytes_per_token() == 47 * 576 * 2


def test_glm5_dsa_config_counts_its_published_parameters():
    """GLM-5 (GlmMoeDsaForCausalLM, keys as public GLM-5.x configs state them): MLA with DeepSeek
    sparse attention whose indexer runs on 21 of 78 layers ("full" in indexer_types), 256 experts;
    744B total published."""
    types = ["full" if i < 3 or (i - 2) % 4 == 0 else "shared" for i in range(78)]
    cfg = {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "vocab_size": 154880,
           "hidden_size": 6144, "intermediate_size": 12288, "num_hidden_layers": 78, "num_attention_heads": 64,
           "num_key_value_heads": 64, "head_dim": 192, "q_lora_rank": 2048, "kv_lora_rank": 512,
           "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256, "index_n_heads": 32,
           "index_head_dim": 128, "index_topk": 2048, "index_topk_freq": 4, "indexer_types": types,
           "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1, "moe_intermediate_size": 2048,
           "first_k_dense_replace": 3, "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16"}
    m = from_hf_config(cfg, name="glm-5")
    assert m.indexer_layers == 21 and m.sparse.topk == 2048
    assert m.param_count() / 1e9 == pytest.approx(744, rel=0.005)
