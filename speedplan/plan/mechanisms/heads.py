"""One-layer draft heads (EAGLE, MTP): their shape as a ModelSpec and the cost of one pass."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from speedplan.cost.forward import ForwardCost, forward_cost
from speedplan.specs.model import ModelSpec


def head_spec(target: ModelSpec, name: str, draft_vocab: int | None = None) -> ModelSpec:
    """The one-layer head an EAGLE (dense layer) or MTP (the target's own layer type, MoE
    included) drafter runs, as a ModelSpec of the target's dimensions."""
    if name == "mtp" and target.moe is not None:
        moe = replace(target.moe, first_dense_layers=0)
        return replace(target, name=f"{target.name}-mtp", layers=1, moe=moe, mtp_layers=0)
    inter = target.dense_intermediate if target.dense_intermediate > 0 else 4 * target.hidden
    return replace(
        target, name=f"{target.name}-{name}-head", layers=1, moe=None, intermediate=inter,
        vocab=draft_vocab or target.vocab, mtp_layers=0,
    )


def head_pass(cost, head: ModelSpec, target: ModelSpec, batch, q_len, context, tp: int) -> ForwardCost:
    """One EAGLE/MTP head forward of `batch` × `q_len` tokens: fuse projection (2h→h), one
    decoder layer, lm_head (seconds)."""
    layer = forward_cost(cost, head, batch, q_len, context, tp)
    fuse = cost.gemm(batch * q_len, target.hidden, 2 * target.hidden, target.dtype)
    zero = np.zeros_like(fuse.latency_us)
    return layer + ForwardCost(
        gemm_s=fuse.latency_us * 1e-6, attention_s=zero, tree_mask_s=zero, comm_s=zero, elementwise_s=zero,
        gemm_flops=2 * batch * q_len * target.hidden * 2 * target.hidden,
        gemm_bytes=2.0 * target.hidden**2 * target.dtype_bytes + zero, gemm_compute_bound_s=zero,
        profile_share=fuse.from_profile.astype(float), out_of_range_share=fuse.out_of_range.astype(float))


def head_memory_bytes(head: ModelSpec, target: ModelSpec, draft_vocab: int | None, batch, context, tp: int):
    """A head's weights (one layer, the fuse projection, its own lm_head when the vocabulary
    is reduced) and its KV cache, on one of `tp` ranks (bytes)."""
    weights = head.layer_params(head.moe is not None) + 2 * target.hidden**2
    if draft_vocab:
        weights += draft_vocab * target.hidden
    return weights * target.dtype_bytes / tp + batch * context * head.kv_bytes_per_token() / tp


def chain_passes(step, batch, draft_len, context) -> ForwardCost:
    """D sequential draft passes of a chain drafter: the first also absorbs the target's bonus
    token (2 tokens per sequence), the other D − 1 run 1 token each. `step(batch, q_len,
    context)` prices one pass."""
    first = step(batch, 2, context)
    rest = step(batch, 1, context + draft_len / 2)
    return first.scaled(draft_len > 0) + rest.scaled(np.maximum(draft_len - 1, 0))
