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

from speedplan.cost.attention_shape import attention_qo_head_dim, attention_shape, split as _split
from speedplan.cost.ops import OpCost
from speedplan.signatures import takes_keyword
from speedplan.specs.model import ModelSpec


@dataclass(frozen=True)
class LinearShape:
    """One linear layer on one TP rank: y[M, n] = x[M, k] @ W[k, n], `count` times per pass."""

    name: str
    n: int
    k: int
    count: int  # how many such layers per forward pass (e.g. the number of decoder layers)
    moe: bool = False  # routed-expert GEMM: M is tokens per touched expert, count per expert


def linear_shapes(model: ModelSpec, tp: int = 1) -> list[LinearShape]:
    """The (N, K) of every linear layer of `model` on one of `tp` ranks (column-parallel
    layers split N, row-parallel layers split K), including the lm_head."""
    h = model.hidden
    shapes: list[LinearShape] = []
    n_layers = model.layers
    if model.mla:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            shapes.append(LinearShape("q_a", m.q_lora_rank, h, n_layers))
            shapes.append(LinearShape("q_b", _split(model.heads * qk, tp), m.q_lora_rank, n_layers))
        else:
            shapes.append(LinearShape("q", _split(model.heads * qk, tp), h, n_layers))
        shapes.append(LinearShape("kv_a", m.kv_lora_rank + m.qk_rope_head_dim, h, n_layers))
        # Absorbed decode: W_UK and W_UV act per head on the latent; same bytes and FLOPs as
        # the kv_b up-projection, priced as one GEMM of that shape.
        shapes.append(LinearShape("kv_b", _split(model.heads * (m.qk_nope_head_dim + m.v_head_dim), tp), m.kv_lora_rank, n_layers))
        shapes.append(LinearShape("o", h, _split(model.heads * m.v_head_dim, tp), n_layers))
        if model.sparse:  # the lightning indexer, whole on every rank: q from the Q latent; k and head weights
            s = model.sparse
            shapes.append(LinearShape("index_q", s.heads * s.head_dim, m.q_lora_rank or h, model.indexer_layers))
            shapes.append(LinearShape("index_k_w", s.head_dim + s.heads, h, model.indexer_layers))
    else:
        attn_layers = model.attention_layers
        qkv = (model.heads * (2 if model.attn_gate else 1) + 2 * model.kv_heads) * model.head_dim
        shapes.append(LinearShape("qkv", _split(qkv, tp), h, attn_layers))
        shapes.append(LinearShape("o", h, _split(model.heads * model.head_dim, tp), attn_layers))
    if model.linear:  # Gated DeltaNet: in_proj_qkvz and in_proj_ba in one GEMM, out_proj
        lin = model.linear
        shapes.append(LinearShape("linear_in", _split(2 * lin.key_dim + 2 * lin.value_dim + 2 * lin.value_heads, tp),
                                  h, lin.layers))
        shapes.append(LinearShape("linear_out", h, _split(lin.value_dim, tp), lin.layers))
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


@dataclass(frozen=True)
class ForwardCost:
    """Time of one forward pass, split by kind (seconds, arrays over the grid).

    `total_s` = gemm_s + attention_s + tree_mask_s + comm_s + elementwise_s: kernel time only
    (what an engine adds on top is `speedplan.engine.step`'s). `gemm_flops` and
    `gemm_bytes` are those of the linear layers (for the roofline chart); `profile_share` is
    the fraction of op time answered from a measured profile (0 = all roofline), and
    `out_of_range_share` the fraction priced by a profile outside its measured range."""

    gemm_s: np.ndarray
    attention_s: np.ndarray
    tree_mask_s: np.ndarray
    comm_s: np.ndarray
    elementwise_s: np.ndarray
    gemm_flops: np.ndarray
    gemm_bytes: np.ndarray
    gemm_compute_bound_s: np.ndarray
    profile_share: np.ndarray
    out_of_range_share: np.ndarray | float = 0.0

    @classmethod
    def zeros(cls, shape) -> "ForwardCost":
        """No work at all (e.g. a drafter that runs on the host), over a grid of `shape`."""
        zero = np.zeros(shape)
        return cls(zero, zero, zero, zero, zero, zero, zero, zero, zero, zero)

    @property
    def total_s(self) -> np.ndarray:
        return self.gemm_s + self.attention_s + self.tree_mask_s + self.comm_s + self.elementwise_s

    def __add__(self, other: "ForwardCost") -> "ForwardCost":
        total = self.total_s + other.total_s

        def share(a, b):  # time-weighted mean of a share over the two passes
            return np.where(total > 0, (a * self.total_s + b * other.total_s) / np.where(total > 0, total, 1), 0.0)

        return ForwardCost(
            self.gemm_s + other.gemm_s,
            self.attention_s + other.attention_s,
            self.tree_mask_s + other.tree_mask_s,
            self.comm_s + other.comm_s,
            self.elementwise_s + other.elementwise_s,
            self.gemm_flops + other.gemm_flops,
            self.gemm_bytes + other.gemm_bytes,
            self.gemm_compute_bound_s + other.gemm_compute_bound_s,
            share(self.profile_share, other.profile_share),
            share(self.out_of_range_share, other.out_of_range_share),
        )

    def scaled(self, factor) -> "ForwardCost":
        """This cost repeated `factor` times (e.g. D sequential draft forwards)."""
        f = np.asarray(factor, dtype=float)
        return ForwardCost(
            self.gemm_s * f, self.attention_s * f, self.tree_mask_s * f, self.comm_s * f,
            self.elementwise_s * f, self.gemm_flops * f, self.gemm_bytes * f,
            self.gemm_compute_bound_s * f, self.profile_share + 0 * f, self.out_of_range_share + 0 * f,
        )


# Fused elementwise kernels per decoder layer in a serving engine: input RMSNorm, rotary,
# SiLU·mul, post-attention RMSNorm with the residual add. Attention and GEMMs are priced apart.
ELEMENTWISE_KERNELS_PER_LAYER = 4


def _fused_moe_lookup(cost, model: ModelSpec, tokens: np.ndarray, tp: int, dtype: str):
    """One MoE layer's routed experts as the profile measured the engine's fused kernel
    (experts split over `tp` ranks, no expert parallelism: the engines' default), µs, and
    where that was beyond the measured token counts; (None, None) when the profile has no
    such series (`speedplan.profile.moe`)."""
    lookup = getattr(cost, "moe", None)
    if model.moe is None or not model.moe_layers or lookup is None or model.moe.expert_bits:
        return None, None  # (a table of the model's dtype does not price narrower experts)
    e = model.moe
    latency, outside = lookup(tokens, model.hidden, e.expert_intermediate, e.num_experts, e.top_k, tp, 1, dtype)
    if latency is None or not np.isfinite(latency).all():
        return None, None
    return latency, outside


def _narrow_weight_gemm(cost, m, n, k, dtype: str, ratio: float):
    """A GEMM whose weights are stored at `ratio` of `dtype`'s width and widened in the kernel
    (MXFP4 experts, W4A16). While the `dtype` GEMM is memory-bound it costs what a `dtype`
    GEMM reading the same weight bytes costs (N · ratio columns); once it is compute-bound, the
    full GEMM (the math runs in `dtype`). Between the two, where the narrow weights make a
    memory-bound GEMM compute-bound, this is a lower bound."""
    full = cost.gemm(m, n, k, dtype)
    if ratio >= 1.0:
        return full
    narrow = cost.gemm(m, np.maximum(n * ratio, 1.0), k, dtype)
    compute = full.bound == "compute"
    pick = lambda a, b: np.where(compute, a, b)  # noqa: E731
    return OpCost(pick(full.latency_us, narrow.latency_us), pick(full.source, narrow.source), full.bound,
                  pick(full.out_of_range, narrow.out_of_range))


def _sparse_attention(cost, batch, q_len, kv_len, heads, head_dim, topk: int, dtype: str, qo: dict) -> OpCost:
    """MLA attention under DeepSeek sparse attention: each of the batch · q_len queries gathers
    its own min(cached, `topk`) latents (FlashMLA's sparse decode; the q_len verified tokens of a
    sequence do not share their reads as dense attention's do)."""
    return cost.attention(batch * q_len, 1, np.minimum(kv_len, topk), heads, 1, head_dim, "causal", dtype, **qo)


def _indexer(cost, model: ModelSpec, batch, q_len, kv_len) -> OpCost:
    """One layer's lightning indexer: every query's `heads` index heads against each cached fp8
    index key, at the fp8 rate (DeepGEMM's fp8 MQA logits). Priced as attention over an fp8
    cache with one KV head half the key's bytes wide: it reads the key's bytes per token and
    does 4 · heads · (key bytes / 2) FLOPs per (query, key), the indexer's q · k products; such
    attention computes at the bf16 rate, so the heads are scaled by bf16 peak / fp8 peak (½ on
    H100). The top-k selection is not priced."""
    s, peak = model.sparse, cost.hardware.peak_flops_per_s
    dtype = "fp8" if "fp8" in peak else model.dtype
    heads = s.heads * (peak["bf16"] / peak["fp8"] if "fp8" in peak and "bf16" in peak else 1.0)
    return cost.attention(batch, q_len, kv_len, heads, 1, s.key_bytes // 2, "causal", dtype)


def _head_dtype(cost, bits: int, dtype: str) -> str:
    """The GEMM dtype of an lm_head kept at `bits` (an FP8 checkpoint's 16): one of that width the
    hardware has a peak for (bf16, else fp16: a hardware file may list fp16 and fp8 only), else `dtype`."""
    peaks = getattr(getattr(cost, "hardware", None), "peak_flops_per_s", None) or {"bf16": 0, "fp32": 0}
    return next((d for d in ({32: ("fp32",)}.get(bits) or ("bf16", "fp16")) if d in peaks), dtype)


def forward_cost(
    cost,
    model: ModelSpec,
    batch,
    q_len,
    context,
    tp: int = 1,
    mask: str = "causal",
    dtype: str | None = None,
    lm_head_rows=None,
    lm_head: bool = True,
) -> ForwardCost:
    """Price one forward pass of `batch` sequences × `q_len` new tokens against `context`
    cached tokens (numpy arrays broadcast together), on one of `tp` ranks.

    `lm_head_rows` overrides how many rows reach the lm_head (default: every new token, as verification
    needs logits at every drafted position); `lm_head=False` leaves the lm_head out (a drafter's
    forward that only updates its KV cache: `Mechanism.upkeep_cost`). Tree verification passes mask="tree": its
    attention is priced with the tree mask and the extra over a causal mask is reported as
    `tree_mask_s`.
    """
    dtype = dtype or model.dtype
    batch, q_len, context = np.broadcast_arrays(
        np.asarray(batch, float), np.asarray(q_len, float), np.asarray(context, float)
    )
    tokens = batch * q_len
    n_layers = model.layers
    b = model.dtype_bytes
    wide = model.embed_bits > 8 * b  # an FP8 checkpoint's lm_head stays at its 16 bits (vLLM does not quantise it)
    head_dtype, head_b = (_head_dtype(cost, model.embed_bits, dtype), model.embed_bits / 8) if wide else (dtype, b)
    # attention reads the KV cache in the engines' default dtype: an FP8 checkpoint's is bf16 (ModelSpec.kv_dtype)
    kv_dtype = _head_dtype(cost, 16, dtype) if model.kv_dtype != dtype else dtype

    gemm_us = np.zeros_like(tokens)
    profile_us = np.zeros_like(tokens)
    outside_us = np.zeros_like(tokens)  # priced by a profile outside its measured range
    flops = np.zeros_like(tokens)
    nbytes = np.zeros_like(tokens)
    compute_bound_us = np.zeros_like(tokens)
    fused_moe_us, fused_moe_outside = _fused_moe_lookup(cost, model, tokens, tp, dtype)
    experts = {"random": np.zeros_like(tokens), "balanced": np.zeros_like(tokens), "profile": np.zeros_like(tokens),
               "outside": np.zeros_like(tokens), "compute": np.zeros_like(tokens)}  # one MoE layer's routed experts
    for shape in linear_shapes(model, tp):
        if shape.name == "lm_head" and not lm_head:
            continue
        count = 1 if shape.name == "lm_head" else shape.count
        m, n = tokens, float(shape.n)
        if shape.name == "lm_head" and lm_head_rows is not None:
            m = np.broadcast_to(np.asarray(lm_head_rows, float), tokens.shape)
        if shape.moe:
            e = model.moe
            # Distinct experts touched by T·top_k routings; a grouped GEMM over them reads
            # each touched expert's weights once: priced as one GEMM of N = n · touched.
            touched = e.num_experts * (1.0 - (1.0 - e.top_k / e.num_experts) ** tokens)
            m = tokens * e.top_k / np.maximum(touched, 1e-9)
            n = shape.n * touched
            op = _narrow_weight_gemm(cost, m, n, shape.k, dtype, e.expert_bits / 8 / b if e.expert_bits else 1.0)
            experts["random"] += op.latency_us
            experts["profile"] += op.latency_us * op.from_profile
            experts["outside"] += op.latency_us * op.out_of_range
            experts["compute"] += op.latency_us * (op.bound == "compute")
            if fused_moe_us is not None:  # the measured kernel's routing: every routing on its own expert
                spread = np.minimum(tokens * e.top_k, e.num_experts)
                experts["balanced"] += cost.gemm(tokens * e.top_k / spread, shape.n * spread, shape.k, dtype).latency_us
        else:
            op = cost.gemm(m, n, shape.k, head_dtype if shape.name == "lm_head" else dtype)
            gemm_us += count * op.latency_us
            profile_us += count * op.latency_us * op.from_profile
            outside_us += count * op.latency_us * op.out_of_range
            compute_bound_us += count * op.latency_us * (op.bound == "compute")
        flops += count * 2.0 * m * n * shape.k
        weight_b = (model.moe.expert_bits / 8 if shape.moe and model.moe.expert_bits else
                    head_b if shape.name == "lm_head" else b)
        nbytes += count * ((m * shape.k + m * n) * b + n * shape.k * weight_b)
    if model.moe is not None and model.moe_layers:
        layer_us = experts["random"]
        if fused_moe_us is not None:
            from speedplan.profile.moe import BALANCED  # only once a profile's MoE table answered

            if getattr(cost, "moe_routing", BALANCED) == BALANCED:
                # The measured fused kernel, less the weight reads its balanced routing makes and
                # the model's random routing does not (priced as grouped GEMMs on this profile).
                saving = experts["balanced"] - experts["random"]
                layer_us = np.maximum(fused_moe_us - saving, fused_moe_us * experts["random"] / experts["balanced"])
            else:  # measured with a skewed routing (import-aic --moe-routing): the kernel as measured
                layer_us = fused_moe_us
            share = {"profile": np.ones_like(tokens), "outside": fused_moe_outside.astype(float)}
        else:
            share = {k: experts[k] / np.maximum(experts["random"], 1e-30) for k in ("profile", "outside")}
        moe_us = model.moe_layers * layer_us
        gemm_us += moe_us
        profile_us += moe_us * share["profile"]
        outside_us += moe_us * share["outside"]
        compute_bound_us += moe_us * experts["compute"] / np.maximum(experts["random"], 1e-30)

    heads, kv_heads, head_dim = attention_shape(model, tp)
    # MLA's query width, to a cost model that takes it (one of one's own written before it prices the stand-in shape)
    takes = takes_keyword(getattr(type(cost), "attention", None), "qo_head_dim")
    qo = {"qo_head_dim": attention_qo_head_dim(model)} if model.mla and takes else {}
    kv_len = context + q_len
    local = model.local_layers  # sliding-window layers: q_len queries read at most window + q_len - 1 keys
    groups = [(model.attention_layers - local, kv_len)] + ([(local, np.minimum(kv_len, model.window + q_len - 1))] if local else [])
    attention_us, tree_us = np.zeros_like(tokens), np.zeros_like(tokens)
    for layers_in_group, group_kv in groups:
        if model.sparse:  # each query reads its own top-k latents
            attn = _sparse_attention(cost, batch, q_len, group_kv, heads, head_dim, model.sparse.topk, kv_dtype, qo)
        else:
            attn = cost.attention(batch, q_len, group_kv, heads, kv_heads, head_dim, "causal", kv_dtype, **qo)
        group_us = layers_in_group * attn.latency_us
        attention_us = attention_us + group_us
        profile_us += group_us * attn.from_profile
        outside_us += group_us * attn.out_of_range
        if mask == "tree" and not model.sparse:  # (a sparse query's gather list holds its tree mask: no extra)
            tree = cost.attention(batch, q_len, group_kv, heads, kv_heads, head_dim, "tree", kv_dtype, **qo)
            group_tree_us = layers_in_group * np.maximum(tree.latency_us - attn.latency_us, 0.0)
            tree_us = tree_us + group_tree_us
            profile_us += group_tree_us * tree.from_profile
            outside_us += group_tree_us * tree.out_of_range

    if model.sparse:  # the indexer scores every cached token for every query
        index = _indexer(cost, model, batch, q_len, kv_len)
        index_us = model.indexer_layers * index.latency_us
        attention_us = attention_us + index_us
        profile_us += index_us * index.from_profile
        outside_us += index_us * index.out_of_range

    if model.linear:  # each sequence's state read once and written after each of its q_len tokens
        state = model.linear.state_bytes_per_rank(b, tp)
        op = cost.elementwise(batch * (1.0 + q_len) * state, dtype)
        linear_us = model.linear.layers * op.latency_us
        attention_us = attention_us + linear_us
        profile_us += linear_us * op.from_profile
        outside_us += linear_us * op.out_of_range

    h = model.hidden
    inter = model.dense_intermediate if model.moe is None else model.moe.expert_intermediate * model.moe.top_k
    qk_width = (heads + kv_heads) * head_dim
    # (bytes, layers): the measured fused MoE kernel already holds its layers' SiLU · up
    silu_layers = n_layers - model.moe_layers if fused_moe_us is not None else n_layers
    per_layer_bytes = [
        (2 * tokens * h * b, n_layers),  # input RMSNorm
        (2 * tokens * qk_width * b, model.attention_layers),  # rotary on q and k
        (3 * tokens * -(-inter // tp) * b, silu_layers),  # SiLU(gate) · up
        (3 * tokens * h * b, n_layers),  # residual add + post-attention RMSNorm
    ][:ELEMENTWISE_KERNELS_PER_LAYER]
    elementwise_us = np.zeros_like(tokens)
    for kernel_bytes, layers in per_layer_bytes:
        op = cost.elementwise(kernel_bytes, dtype)
        elementwise_us += layers * op.latency_us
        profile_us += layers * op.latency_us * op.from_profile
        outside_us += layers * op.latency_us * op.out_of_range

    comm = cost.allreduce(tokens * h * b, tp)
    comm_us = 2 * n_layers * comm.latency_us
    profile_us += comm_us * comm.from_profile
    outside_us += comm_us * comm.out_of_range
    for width in model.tp_gathers if tp > 1 else ():  # OLMo-2's q and k, InternLM2's qkv (ModelSpec.tp_gathers)
        gather = cost.allgather(tokens * width * b, tp)
        gather_us = model.attention_layers * gather.latency_us
        comm_us = comm_us + gather_us
        profile_us += gather_us * gather.from_profile
        outside_us += gather_us * gather.out_of_range

    total_us = gemm_us + attention_us + tree_us + elementwise_us + comm_us
    return ForwardCost(
        gemm_s=gemm_us * 1e-6,
        attention_s=attention_us * 1e-6,
        tree_mask_s=tree_us * 1e-6,
        comm_s=comm_us * 1e-6,
        elementwise_s=elementwise_us * 1e-6,
        gemm_flops=flops,
        gemm_bytes=nbytes,
        gemm_compute_bound_s=compute_bound_us * 1e-6,
        profile_share=np.where(total_us > 0, profile_us / np.where(total_us > 0, total_us, 1), 0.0),
        out_of_range_share=np.where(total_us > 0, outside_us / np.where(total_us > 0, total_us, 1), 0.0),
    )
