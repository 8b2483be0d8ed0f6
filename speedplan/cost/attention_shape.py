"""The attention kernel one tensor-parallel rank runs: its (heads, KV heads, head_dim), the
shape a profile is asked and the roofline prices, and where absorbed MLA's queries are wider
than that shape's cached K and V (`attention_qo_head_dim`)."""

from __future__ import annotations

from speedplan.specs.model import ModelSpec


def split(x: int, tp: int) -> int:
    """`x` heads or columns over `tp` ranks: the busiest rank's share, at least 1."""
    return max(1, -(-x // tp))


def attention_shape(model: ModelSpec, tp: int = 1) -> tuple[int, int, int]:
    """(num_heads, num_kv_heads, head_dim) of the attention kernel on one TP rank.

    MLA in absorbed form is multi-query attention over the compressed latent: one KV "head"
    of kv_lora_rank + rope dims shared by all query heads, read once for K and V together. It
    is priced as one KV head of half that width (the kernel reads K and V separately), which
    gives the same bytes per token; its queries' width is `attention_qo_head_dim`'s."""
    if model.mla:
        latent = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
        return split(model.heads, tp), 1, latent // 2
    kv = split(model.kv_heads, tp)
    heads = split(model.heads, tp)
    return heads, kv, model.head_dim


def attention_qo_head_dim(model: ModelSpec) -> float | None:
    """Absorbed MLA's query/output width per head (`roofline._attention_terms`' qo_head_dim): a
    query of kv_lora_rank + rope scores the latent, its output is kv_lora_rank wide, so
    (576 + 512) / 2 = 544 for DeepSeek-V3, where `attention_shape`'s 288 would count 1.9× too
    few FLOPs (4 · 288 per head and key against 2 · 576 + 2 · 512). None: not MLA."""
    m = model.mla
    return (2 * m.kv_lora_rank + m.qk_rope_head_dim) / 2 if m else None
