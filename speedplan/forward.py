"""The op list of one forward pass, priced over the whole sweep grid at once.

`linear_shapes(model, tp)` names every linear layer's (N, K) on one tensor-parallel rank;
`forward_cost(cost, model, batch, q_len, context, tp)` prices a forward pass of `batch`
sequences × `q_len` new tokens each against `context` cached tokens, vectorised over numpy
arrays of those three, and returns its time split into GEMM, attention, communication and
elementwise parts (seconds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import ModelSpec


@dataclass(frozen=True)
class LinearShape:
    """One linear layer on one TP rank: y[M, n] = x[M, k] @ W[k, n], `count` times per pass."""

    name: str
    n: int
    k: int
    count: int  # how many such layers per forward pass (e.g. the number of decoder layers)
    moe: bool = False  # routed-expert GEMM: M is tokens per touched expert, count per expert


def _split(x: int, tp: int) -> int:
    return max(1, -(-x // tp))


def linear_shapes(model: ModelSpec, tp: int = 1) -> list[LinearShape]:
    """The (N, K) of every linear layer of `model` on one of `tp` ranks (column-parallel
    layers split N, row-parallel layers split K), including the lm_head."""
    h = model.hidden
    shapes: list[LinearShape] = []
    L = model.layers
    if model.mla:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            shapes.append(LinearShape("q_a", m.q_lora_rank, h, L))
            shapes.append(LinearShape("q_b", _split(model.heads * qk, tp), m.q_lora_rank, L))
        else:
            shapes.append(LinearShape("q", _split(model.heads * qk, tp), h, L))
        shapes.append(LinearShape("kv_a", m.kv_lora_rank + m.qk_rope_head_dim, h, L))
        # Absorbed decode: W_UK and W_UV act per head on the latent; same bytes and FLOPs as
        # the kv_b up-projection, priced as one GEMM of that shape.
        shapes.append(LinearShape("kv_b", _split(model.heads * (m.qk_nope_head_dim + m.v_head_dim), tp), m.kv_lora_rank, L))
        shapes.append(LinearShape("o", h, _split(model.heads * m.v_head_dim, tp), L))
    else:
        qkv = (model.heads + 2 * model.kv_heads) * model.head_dim
        shapes.append(LinearShape("qkv", _split(qkv, tp), h, L))
        shapes.append(LinearShape("o", h, _split(model.heads * model.head_dim, tp), L))
    if model.dense_layers:
        inter = model.dense_intermediate
        shapes.append(LinearShape("gate_up", _split(2 * inter, tp), h, model.dense_layers))
        shapes.append(LinearShape("down", h, _split(inter, tp), model.dense_layers))
    if model.moe is not None and model.moe_layers:
        e = model.moe
        shapes.append(LinearShape("router", e.num_experts, h, model.moe_layers))
        shapes.append(LinearShape("expert_gate_up", _split(2 * e.expert_intermediate, tp), h, model.moe_layers, moe=True))
        shapes.append(LinearShape("expert_down", h, _split(e.expert_intermediate, tp), model.moe_layers, moe=True))
        if e.shared_experts:
            si = e.shared_experts * e.shared_intermediate
            shapes.append(LinearShape("shared_gate_up", _split(2 * si, tp), h, model.moe_layers))
            shapes.append(LinearShape("shared_down", h, _split(si, tp), model.moe_layers))
    shapes.append(LinearShape("lm_head", _split(model.vocab, tp), h, 1))
    return shapes


def attention_shape(model: ModelSpec, tp: int = 1) -> tuple[int, int, int]:
    """(num_heads, num_kv_heads, head_dim) of the attention kernel on one TP rank.

    MLA in absorbed form is multi-query attention over the compressed latent: one KV "head"
    of kv_lora_rank + rope dims shared by all query heads, read once for K and V together. It
    is priced as one KV head of half that width (the kernel reads K and V separately), which
    gives the same bytes per token."""
    if model.mla:
        latent = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
        return _split(model.heads, tp), 1, latent // 2
    kv = _split(model.kv_heads, tp)
    heads = _split(model.heads, tp)
    return heads, kv, model.head_dim
