"""Speed of light and the roofline fallback for the ops of a forward pass, vectorised over
numpy arrays; all latencies in microseconds.

Two things live here:

- **Speed of light** (`*_sol_us`): datasheet time of an op, max(FLOPs / peak, bytes / bandwidth),
  with no floor and no efficiency. A measured profile is stored and interpolated as
  utilisation = SOL / measured latency (`speedplan.profile`), as AIConfigurator does.
- **The fallback** (`*_roofline`), for hardware without measurements and families a profile
  lacks. On a GPU preset it is the fitted model of `speedplan.specs.fallback` (per-family
  kernel floor, efficiency by M range or bytes moved, wave quantisation over SMs, a per-wave
  cost for attention); on a preset without a fit (CPUs) the plain datasheet roofline with the
  preset's floor and peak fractions.

Attention during decode/verify packs the G = heads / kv_heads query heads that share a KV head
into one tile's rows (G · q_len rows, 128-row tiles; absorbed MLA's in 64-row blocks, `MLA_TILE_M`),
as FlashAttention/FlashInfer decode kernels do. The KV cache is read once per (sequence, KV head) whatever the number of tiles;
padded rows cost compute, not another read. A tree mask costs extra only on the N × N block
of the new tokens, not on the prefix.
"""

from __future__ import annotations

import numpy as np

from speedplan.specs.fallback import get_fit
from speedplan.specs.hardware import DTYPE_BYTES, Hardware


# Query rows (G · q_len per KV head, the q_len tokens folded into rows) per block of absorbed-MLA
# decode on Hopper: FlashMLA's BLOCK_SIZE_M (deepseek-ai/FlashMLA csrc/sm90/decode/dense/config.h) and
# the FA3 MLA kernel vLLM 0.33 and SGLang 0.5.23 pick there (hopper/tile_size.h: 64 rows for 64/512
# heads, PackGQA). Other GPUs' default kernels tile otherwise (the 0.33.0 / 0.5.23 wheels, flashinfer
# 0.7.2.post1): B200's trtllm-gen runs one CTA per query token with G padded to a tile of 8, 16 or 64
# rows, a G below 64 that is no power of two first rounded up to one (rows = q · padded G), and
# MI300X's AITER 16-head groups with q rounded up to 1, 4 or 8. At DeepSeek-V3's G = 16 (TP 8) and
# q <= 8 those differ from 64-row folding only where the kernel is memory-bound; GLM-4.7-Flash's
# G = 20 on a B200 runs 32 rows a token, which 64-row folding undercounts by up to 1.6x (1.33x at
# q = 8, 1.42x at q = 17, compute-bound). One number for all, not a rule per kernel (not done).
MLA_TILE_M = 64


def _ceil_to(x: np.ndarray, tile: int) -> np.ndarray:
    return np.ceil(x / tile) * tile if tile > 1 else x


def _peak(hw: Hardware, dtype: str) -> float:
    """Datasheet peak FLOP/s for `dtype` (raises for a dtype the hardware lacks)."""
    hw.flops_per_s(dtype)  # checks the dtype
    return hw.peak_flops_per_s[dtype]


def _attention_compute_dtype(hw: Hardware, dtype: str) -> str:
    """fp8 KV caches are attended in bf16 (vLLM: attn_dtype bfloat16 for every fp8-KV row)."""
    return "bf16" if dtype == "fp8" and "bf16" in hw.peak_flops_per_s else dtype


def fit_of(hw: Hardware):
    return get_fit(hw.roofline_fit) if hw.roofline_fit else None


# ---- speed of light -------------------------------------------------------------------------
def gemm_sol_us(hw: Hardware, m, n, k, dtype: str) -> np.ndarray:
    """max(2 · M' · N · K / peak, (MK + KN + MN) · bytes / bandwidth), M' = M padded to the
    preset's tile height (the step a tiled kernel takes)."""
    m = np.asarray(m, dtype=float)
    t_c = 2.0 * _ceil_to(m, hw.gemm_tile_m) * n * k / _peak(hw, dtype)
    t_m = (m * k + k * n + m * n) * DTYPE_BYTES[dtype] / hw.hbm_bytes_per_s
    return np.maximum(t_c, t_m) * 1e6


def _attention_terms(hw: Hardware, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, dtype: str,
                     qo_head_dim=None):
    """(t_compute_us, t_memory_us, bytes, CTAs) of decode/verify attention at datasheet speed:
    G·q rows per (sequence, KV head) padded to the tile, the KV cache read once.

    `head_dim`: the width of a cached K and of a cached V per KV head (bytes read per token:
    2 · head_dim elements per KV head). `qo_head_dim` (None: `head_dim`): half the width of
    one query row's work per key, (d_qk + d_v) / 2: a row does 2 · d_qk FLOPs for its score and
    2 · d_v for its output, 4 · qo_head_dim in all, and reads a query of d_qk and writes an
    output of d_v, 2 · qo_head_dim elements. They differ for absorbed MLA, whose one latent
    is K and V at once (`speedplan.cost.attention_shape.attention_qo_head_dim`); its decode
    kernel packs the G·q rows into blocks of `MLA_TILE_M` (or the preset's tile, if smaller)."""
    batch, q_len, kv_len, num_kv_heads = (np.asarray(v, dtype=float) for v in (batch, q_len, kv_len, num_kv_heads))
    head_dim = np.asarray(head_dim, dtype=float)
    qo = head_dim if qo_head_dim is None else np.asarray(qo_head_dim, dtype=float)
    group = np.asarray(num_heads, dtype=float) / num_kv_heads
    tile = hw.attention_tile_m if qo_head_dim is None else min(hw.attention_tile_m, MLA_TILE_M)
    tiles = np.ceil(group * q_len / tile) if tile > 1 else group * q_len
    padded_rows = tiles * tile if tile > 1 else group * q_len
    b = DTYPE_BYTES[dtype]
    nbytes = batch * num_kv_heads * b * (2.0 * kv_len * head_dim + 2.0 * group * q_len * qo)  # K, V once; Q, O
    flops = 4.0 * batch * num_kv_heads * padded_rows * kv_len * qo
    t_c = flops / _peak(hw, _attention_compute_dtype(hw, dtype)) * 1e6
    t_m = nbytes / hw.hbm_bytes_per_s * 1e6
    ctas = batch * num_kv_heads * (tiles if tile > 1 else 1.0)
    return t_c, t_m, nbytes, ctas


def attention_sol_us(hw: Hardware, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, dtype: str,
                     qo_head_dim=None) -> np.ndarray:
    t_c, t_m, _, _ = _attention_terms(hw, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, dtype, qo_head_dim)
    return np.maximum(t_c, t_m)


def prefill_sol_us(hw: Hardware, batch, seq_len, num_heads, num_kv_heads, head_dim, dtype: str) -> np.ndarray:
    """Causal prefill of seq_len tokens: 4 · H · d · L(L+1)/2 FLOPs per sequence; Q, K, V, O
    read or written once."""
    batch, seq_len = np.asarray(batch, dtype=float), np.asarray(seq_len, dtype=float)
    flops = 4.0 * batch * num_heads * head_dim * seq_len * (seq_len + 1) / 2
    nbytes = batch * seq_len * head_dim * (2.0 * num_heads + 2.0 * np.asarray(num_kv_heads, float)) * DTYPE_BYTES[dtype]
    t_c = flops / _peak(hw, _attention_compute_dtype(hw, dtype))
    return np.maximum(t_c, nbytes / hw.hbm_bytes_per_s) * 1e6


def allreduce_sol_us(hw: Hardware, nbytes, tp) -> np.ndarray:
    """Ring all-reduce at link speed: 2 (n − 1) / n · bytes / link bandwidth."""
    tp = np.asarray(tp, dtype=float)
    return 2.0 * (tp - 1) / tp * np.asarray(nbytes, dtype=float) / hw.link_bytes_per_s * 1e6


def elementwise_sol_us(hw: Hardware, nbytes) -> np.ndarray:
    return np.asarray(nbytes, dtype=float) / hw.hbm_bytes_per_s * 1e6


# ---- the fallback ---------------------------------------------------------------------------
def gemm_roofline(hw: Hardware, m, n, k, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Latency (µs) and compute-bound flag of C[m, n] = A[m, k] @ W[k, n].

    Fitted: floor + max(waves · SMs · tile FLOPs / (peak · e_c), bytes / (bandwidth · e_m)),
    the efficiencies by M range and weight size, waves = ⌈⌈M / tile_m⌉ · ⌈N / tile_n⌉ / SMs⌉:
    with 128 × 128 tiles an M = 320 GEMM with N = 6144 is 3 · 48 = 144 tiles, two waves on
    132 SMs, and costs what 264 tiles would.
    Plain (no fit): max(compute of M padded to the tile, memory, floor)."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    shape = np.broadcast_shapes(m.shape, n.shape, k.shape)
    nbytes = (m * k + k * n + m * n) * DTYPE_BYTES[dtype]
    fit = fit_of(hw)
    if fit is None:
        t_c = 2.0 * _ceil_to(m, hw.gemm_tile_m) * n * k / hw.flops_per_s(dtype) * 1e6
        t_m = nbytes / hw.bytes_per_s * 1e6
        return np.broadcast_to(np.maximum(np.maximum(t_c, t_m), hw.kernel_floor_us), shape), np.broadcast_to(t_c > t_m, shape)
    g = fit.gemm_for(dtype)
    tiles = np.ceil(m / g.tile_m) * np.ceil(n / g.tile_n)
    slots = np.ceil(tiles / hw.sm_count) * hw.sm_count
    t_c = slots * g.tile_m * g.tile_n * 2.0 * k / _peak(hw, dtype) * 1e6
    t_m = nbytes / hw.hbm_bytes_per_s * 1e6
    i = np.searchsorted(np.asarray(g.m_edges), m, side="left")
    j = np.searchsorted(np.asarray(g.weight_bytes_edges), n * k * DTYPE_BYTES[dtype])
    t_c, t_m = t_c / np.asarray(g.compute_eff)[i, j], t_m / np.asarray(g.memory_eff)[i, j]
    # never faster than the datasheet peak: where the fitted chips' memory term explained a bucket (e_c
    # well above 1 there), a chip of a lower ridge (A100: 153 FLOP/byte against the H100's 295) is
    # compute-bound, and its GEMMs were priced at up to 321 TFLOP/s on a 312 TFLOP/s part
    t_c = np.maximum(t_c, 2.0 * m * n * k / _peak(hw, dtype) * 1e6)
    return np.broadcast_to(g.floor_us + np.maximum(t_c, t_m), shape), np.broadcast_to(t_c > t_m, shape)


def tree_block_us(hw: Hardware, batch, q_len, num_heads, num_kv_heads, head_dim, dtype: str,
                  qo_head_dim=None) -> np.ndarray:
    """Extra time of a tree mask: (tree_mask_penalty − 1) × the compute of the N × N block
    (the q_len new tokens attending each other), whatever the prefix length."""
    t_c, _, _, _ = _attention_terms(hw, batch, q_len, q_len, num_heads, num_kv_heads, head_dim, dtype, qo_head_dim)
    fit = fit_of(hw)
    eff = fit.attention.compute_eff if fit is not None else hw.compute_efficiency
    return (hw.tree_mask_penalty - 1.0) * t_c / eff


def attention_roofline(
    hw: Hardware, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, mask, dtype: str, qo_head_dim=None
) -> tuple[np.ndarray, np.ndarray]:
    """Latency (µs) and compute-bound flag of decode/verify attention: `q_len` new tokens per
    sequence attend to `kv_len` cached ones (the new tokens included); `mask` "causal" (a
    chain, lower-right aligned) or "tree" (adds `tree_block_us`).

    Fitted: floor + max(t_compute / e_c, t_memory / e_m[bytes bin]) + ⌈CTAs / SMs⌉ · (a fixed
    amount of work per wave at one SM's tensor rate).
    Plain (no fit): max(t_compute / compute_efficiency, t_memory / bandwidth_efficiency, floor).
    `qo_head_dim`: `_attention_terms`'."""
    t_c, t_m, nbytes, ctas = _attention_terms(hw, batch, q_len, kv_len, num_heads, num_kv_heads, head_dim, dtype,
                                              qo_head_dim)
    fit = fit_of(hw)
    if fit is None:
        t_c, t_m = t_c / hw.compute_efficiency, t_m / hw.bandwidth_efficiency
        latency = np.maximum(np.maximum(t_c, t_m), hw.kernel_floor_us)
    else:
        a = fit.attention
        t_c, t_m = t_c / a.compute_eff, t_m / np.asarray(a.memory_eff)[np.searchsorted(np.asarray(a.bytes_edges), nbytes)]
        waves = np.ceil(ctas / hw.sm_count)  # a preset that names a fit states its SM count
        wave_us = a.wave_flops * hw.sm_count / hw.peak_flops_per_s[_attention_compute_dtype(hw, dtype)] * 1e6
        latency = a.floor_us + np.maximum(t_c, t_m) + waves * wave_us
    tree = np.asarray(mask) == "tree"
    if tree.any():
        block = tree_block_us(hw, batch, q_len, num_heads, num_kv_heads, head_dim, dtype, qo_head_dim)
        latency = latency + np.where(tree, block, 0.0)
    return latency, t_c > t_m


def elementwise_roofline(hw: Hardware, nbytes) -> np.ndarray:
    """Latency (µs) of a memory-bound elementwise kernel moving `nbytes` (read + write)."""
    fit = fit_of(hw)
    floor = fit.elementwise_floor_us if fit is not None else hw.kernel_floor_us
    return np.maximum(np.asarray(nbytes, dtype=float) / hw.bytes_per_s * 1e6, floor)


def allreduce_us(hw: Hardware, nbytes, tp: int) -> np.ndarray:
    """All-reduce of `nbytes` over `tp` devices: start-up latency + 2(n−1)/n · bytes / link
    (fitted latency and bus efficiency where the preset names a fit)."""
    nbytes = np.asarray(nbytes, dtype=float)
    if tp <= 1:
        return np.zeros_like(nbytes)
    fit = fit_of(hw)
    latency, eff = (fit.allreduce.latency_us, fit.allreduce.bus_eff) if fit is not None else (hw.link_latency_us, 1.0)
    return latency + 2.0 * (tp - 1) / tp * nbytes / (hw.link_bytes_per_s * eff) * 1e6
