"""The weight bytes one tensor-parallel rank holds, and with the KV cache its memory.

Most linear layers are split over the TP ranks (column- or row-parallel); a few are kept whole
on every rank, and `speedplan.cost.forward.linear_shapes` prices them unsplit: MLA's
down-projections q_a and kv_a (vLLM and SGLang: ReplicatedLinear, or the fused qkv_a projection
with TP disabled, in deepseek_v2.py), DeepSeek-V3.2's indexer projections and the MoE router
(ReplicatedLinear gate). DeepSeek-V3 at TP 8: 1.03B such parameters (0.92B of them q_a and kv_a),
0.90 GB more per rank than weights / TP (a review of 2026-12-06). They are held in the model's
dtype, but for the router: the engines build it unquantized (vLLM's deepseek_v2.py, qwen3_moe.py and
mixtral.py: ReplicatedLinear gate with quant_config=None), so an fp8 checkpoint's router is held
at 16 bits on every rank (`ROUTER_BITS`): DeepSeek-V3's 58 × 256 × 7168 = 106M parameters,
0.106 GB more per rank than at fp8."""

from __future__ import annotations

from speedplan.cost.forward import linear_shapes
from speedplan.specs.model import ModelSpec

# linear_shapes' names of the layers every rank holds whole
REPLICATED = ("q_a", "kv_a", "router", "index_q", "index_k_w")
ROUTER_BITS = 16  # the MoE router's weights as the engines hold them, whatever the checkpoint's dtype


def replicated_params(model: ModelSpec, names=REPLICATED) -> int:
    """Parameters every TP rank holds whole: those of the layers `names` (`REPLICATED`) over all their layers."""
    return sum(s.n * s.k * s.count for s in linear_shapes(model, 1) if s.name in names)


def weight_bytes_per_rank(model: ModelSpec, tp: int) -> float:
    """Bytes of weights on one of `tp` ranks: the replicated layers whole, the rest split, and a
    router held wider than the model's dtype (`ROUTER_BITS`) counted at its width on every rank."""
    whole = replicated_params(model) * model.dtype_bytes if tp > 1 else 0.0
    wider = max(0.0, ROUTER_BITS / 8 - model.dtype_bytes)  # bytes a router parameter holds beyond the dtype's
    return (model.weight_bytes() - whole) / tp + whole + (replicated_params(model, ("router",)) * wider if wider else 0.0)


def memory_per_rank(model: ModelSpec, batch, tokens, tp: int, states=1, window_pool=None):
    """Bytes one of `tp` ranks holds for the weights and `batch` sequences' KV of `tokens` each
    (`ModelSpec.kv_bytes_per_rank` for `states` and `window_pool`)."""
    return weight_bytes_per_rank(model, tp) + batch * model.kv_bytes_per_rank(tokens, tp, states, window_pool)
