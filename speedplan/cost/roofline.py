"""Datasheet roofline for the ops of a forward pass, vectorised over numpy arrays.

Pure functions of a `Hardware` and op shapes; all latencies in microseconds. Two effects that
a plain roofline misses and speculative decoding lives on are modelled here:

- tile quantisation along M: a GEMM with M rows costs ceil(M / tile) · tile rows of compute;
- per-kernel floor: no kernel is faster than `hw.kernel_floor_us`.

Attention during decode/verify packs the G = heads / kv_heads query heads that share a KV head
into the M dimension (G · q_len rows), as FlashAttention/FlashInfer decode kernels do. Each
128-row tile streams the whole KV cache, so the cost steps at multiples of
`hw.attention_tile_m` in G · (1 + D): verifying up to D = 128 / G − 1 drafts costs what plain
decoding costs.
"""

from __future__ import annotations

import numpy as np

from speedplan.specs.hardware import DTYPE_BYTES, Hardware


def _ceil_to(x: np.ndarray, tile: int) -> np.ndarray:
    return np.ceil(x / tile) * tile if tile > 1 else x


def gemm_roofline(hw: Hardware, m, n, k, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Latency (µs) and compute-bound flag of C[m, n] = A[m, k] @ W[k, n]."""
    m = np.asarray(m, dtype=float)
    b = DTYPE_BYTES[dtype]
    flops = 2.0 * _ceil_to(m, hw.gemm_tile_m) * n * k
    nbytes = (m * k + k * n + m * n) * b
    t_compute = flops / hw.flops_per_s(dtype) * 1e6
    t_memory = nbytes / hw.bytes_per_s * 1e6
    compute_bound = t_compute > t_memory
    latency = np.maximum(np.maximum(t_compute, t_memory), hw.kernel_floor_us)
    return latency, compute_bound


def attention_roofline(
    hw: Hardware, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str
) -> tuple[np.ndarray, np.ndarray]:
    """Latency (µs) and compute-bound flag of decode/verify attention.

    `q_len` new tokens per sequence attend to `kv_len` cached ones (the new tokens included).
    `mask` is "causal" (lower-right aligned chain) or "tree"; a tree mask costs
    `hw.tree_mask_penalty` times the causal kernel (custom-mask kernels leave the fast path).
    """
    batch = np.asarray(batch, dtype=float)
    q_len = np.asarray(q_len, dtype=float)
    kv_len = np.asarray(kv_len, dtype=float)
    num_kv_heads = np.asarray(num_kv_heads, dtype=float)
    group = np.asarray(num_heads, dtype=float) / num_kv_heads
    b = DTYPE_BYTES[dtype]
    tile = hw.attention_tile_m
    rows = group * q_len
    tiles = np.ceil(rows / tile) if tile > 1 else np.ones_like(rows)
    rows_eff = tiles * tile if tile > 1 else rows
    kv_bytes = batch * num_kv_heads * kv_len * head_dim * 2 * b
    qo_bytes = 2 * batch * num_kv_heads * rows * head_dim * b
    nbytes = tiles * kv_bytes + qo_bytes
    flops = 4.0 * batch * num_kv_heads * rows_eff * kv_len * head_dim
    t_compute = flops / hw.flops_per_s(dtype) * 1e6
    t_memory = nbytes / hw.bytes_per_s * 1e6
    compute_bound = t_compute > t_memory
    latency = np.maximum(np.maximum(t_compute, t_memory), hw.kernel_floor_us)
    penalty = np.where(np.asarray(mask) == "tree", hw.tree_mask_penalty, 1.0)
    return latency * penalty, compute_bound


def elementwise_roofline(hw: Hardware, nbytes) -> np.ndarray:
    """Latency (µs) of a memory-bound elementwise kernel moving `nbytes` (read + write)."""
    return np.maximum(np.asarray(nbytes, dtype=float) / hw.bytes_per_s * 1e6, hw.kernel_floor_us)


def allreduce_us(hw: Hardware, nbytes, tp: int) -> np.ndarray:
    """Ring all-reduce of `nbytes` over `tp` devices: latency + 2(n−1)/n · bytes / link."""
    nbytes = np.asarray(nbytes, dtype=float)
    if tp <= 1:
        return np.zeros_like(nbytes)
    return hw.link_latency_us + 2.0 * (tp - 1) / tp * nbytes / hw.link_bytes_per_s * 1e6
