"""The torch backend: builds the rotating-input closures for each point, on CPU or CUDA.

The ops are the ones `speedplan.runtime` runs: F.linear for GEMM; for attention,
F.scaled_dot_product_attention on q [b, H, T, Dh] (a transposed view) against a KV cache
[b, Hkv, S, Dh] with enable_gqa and an explicit boolean mask [b, 1, T, S] (none for a single
sequence decoding one token); F.rms_norm, silu(gate) * up, rotate-half RoPE.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .grid import DTYPE_BYTES, AttentionPoint, ElementwisePoint, FloorPoint, GemmPoint
from .timing import Timing, time_cpu, time_cpu_interleaved, time_cuda

if TYPE_CHECKING:
    import torch

ATTENTION_IMPL = ("torch.nn.functional.scaled_dot_product_attention(q[b,H,T,Dh] view, K/V cache [b,Hkv,S,Dh], "
                  "attn_mask=bool [b,1,T,S] (None when b=1,T=1), enable_gqa=H!=Hkv)")
POOL_NUMEL = 2**21  # 8 MiB of fp32 normal samples per draw window (the pool holds twice that)
MAX_SETS = 256  # rotating input sets; sets of >= 0.375 MiB still span the CPU's 96 MiB target
GEMM_IMPL = ("CPU fp32: torch.ops.mkldnn._linear_pointwise(x[m,k], packed W) as speedplan.runtime runs it; "
             "else torch.nn.functional.linear(x[m,k], W[n,k]); fp8: torch._scaled_mm(x, W.t(), out_dtype=bf16)")


def torch_dtype(name: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
            "fp8": getattr(torch, "float8_e4m3fn", None)}[name]


def tree_mask_block(q_len: int, generator) -> "torch.Tensor":
    """Ancestor mask [T, T] of a random tree of T nodes (node 0 is the root; each node's
    parent is a uniformly chosen earlier node), True = may attend."""
    import torch

    anc = torch.eye(q_len, dtype=torch.bool)
    for i in range(1, q_len):
        parent = int(torch.randint(0, i, (1,), generator=generator))
        anc[i] |= anc[parent]
    return anc


def attention_mask(point: AttentionPoint, generator) -> "torch.Tensor | None":
    """[b, 1, T, S] bool: every cached slot, plus the chain (causal, lower-right aligned) or
    tree ancestors among the T new tokens."""
    import torch

    b, t, s = point.batch, point.q_len, point.kv_len
    if b == 1 and t == 1:
        return None
    mask = torch.ones(b, 1, t, s, dtype=torch.bool)
    if t > 1:
        block = (torch.tril(torch.ones(t, t, dtype=torch.bool)) if point.mask == "causal"
                 else tree_mask_block(t, generator))
        mask[:, :, :, s - t:] = block
    return mask


class TorchBackend:
    """Measures points with torch on `device` ("cpu" or "cuda")."""

    name = "torch"

    def __init__(self, device: str, rotate_bytes: float, min_time_s: float, seed: int = 0):
        import torch

        self.torch = torch
        self.device = device
        self.rotate_bytes = rotate_bytes
        self.min_time_s = min_time_s
        self.gen = torch.Generator().manual_seed(seed)
        self._pool = None  # normal samples that _rand copies from
        self._device_gen = None  # a generator on `device` (GPU data is drawn there)
        self._cache: dict = {}  # the last two weight / KV-cache sets, by shape

    # ---- tensors -----------------------------------------------------------------------
    def _rand(self, *shape, dtype: str):
        """Random non-zero data (normal, scaled so products stay in range) in freshly allocated
        memory on the device. On a GPU drawn there; on the CPU copied from a random offset of a
        fixed pool of POOL_NUMEL normal samples (drawing 96 MiB afresh with randn takes ~0.16 s on the CPU machine class, a copy
        ~0.03 s; the values only need to be non-zero and unrelated to the layout)."""
        torch = self.torch
        if self.device != "cpu":  # drawn where it lives: GBs of KV cache through the host take minutes
            if self._device_gen is None:
                self._device_gen = torch.Generator(device=self.device).manual_seed(int(self.gen.initial_seed()))
            # drawn in the stored dtype where randn can (an fp32 draw then a cast held 3x a bf16
            # KV cache at its peak); fp8 is drawn in fp16 and cast
            draw = torch_dtype(dtype) if dtype in ("fp32", "bf16", "fp16") else torch.float16
            x = torch.randn(*shape, device=self.device, dtype=draw, generator=self._device_gen).mul_(0.1)
            return x if draw is torch_dtype(dtype) else x.to(torch_dtype(dtype))
        if self._pool is None:
            self._pool = torch.randn(2 * POOL_NUMEL, generator=self.gen) * 0.1
        numel = math.prod(shape)
        x = torch.empty(numel)
        done = 0
        while done < numel:
            take = min(POOL_NUMEL, numel - done)
            start = int(torch.randint(0, POOL_NUMEL, (1,), generator=self.gen))
            x[done:done + take] = self._pool[start:start + take]
            done += take
        x = x.view(*shape).to(self.device)
        return x.to(torch_dtype(dtype)) if dtype != "fp32" else x

    def _sets(self, bytes_per_set: float) -> int:
        return max(1, min(MAX_SETS, math.ceil(self.rotate_bytes / max(bytes_per_set, 1))))

    def reset(self) -> None:
        """Drop cached weight / KV sets so the next points allocate fresh ones."""
        self._cache.clear()

    def _cached(self, key, make):
        if key not in self._cache:
            while len(self._cache) >= 2:
                self._cache.pop(next(iter(self._cache)))  # free before allocating
            self._cache[key] = make()
        return self._cache[key]

    def _timed(self, calls, graph: bool = True) -> Timing:
        if self.device == "cuda":
            return time_cuda(calls, graph=graph, min_time_s=self.min_time_s)
        return time_cpu(calls, min_time_s=self.min_time_s)

    # ---- ops ---------------------------------------------------------------------------
    def measure(self, point) -> Timing:
        """Time one point on its own."""
        calls, graph = self.calls(point)
        with self.torch.inference_mode():
            return self._timed(calls, graph)

    def measure_block(self, points: list) -> list[Timing]:
        """Time points that share weights or a KV cache together (CPU), their repeats interleaved
        round-robin, so a slow spell of the machine hits every point of the block alike instead
        of shifting some against their neighbours. On CUDA each point is timed alone."""
        if self.device == "cuda" or len(points) == 1:
            return [self.measure(p) for p in points]
        calls = [self.calls(p)[0] for p in points]  # a block shares one weight / KV key of the cache
        with self.torch.inference_mode():
            return time_cpu_interleaved(calls, min_time_s=self.min_time_s)

    def calls(self, point) -> tuple[list, bool]:
        """The rotating-input closures of `point` and whether CUDA may graph-capture them."""
        with self.torch.inference_mode():
            if isinstance(point, GemmPoint):
                return self._gemm(point), True
            if isinstance(point, AttentionPoint):
                return self._attention(point), True
            if isinstance(point, ElementwisePoint):
                return self._elementwise(point), True
            if isinstance(point, FloorPoint):
                return self._floor(point), bool(point.graph)
        raise TypeError(point)

    def _gemm(self, p: GemmPoint) -> list:
        torch, F = self.torch, self.torch.nn.functional
        sets = self._sets(p.n * p.k * DTYPE_BYTES[p.dtype])
        ws = self._cached((p.n, p.k, p.dtype, sets),  # grids are sorted by (n, k): reuse the weights
                          lambda: [self._rand(p.n, p.k, dtype=p.dtype) for _ in range(sets)])
        xs = [self._rand(p.m, p.k, dtype=p.dtype) for _ in range(sets)]
        if p.dtype == "fp8":
            one = torch.ones((), device=self.device)
            calls = [lambda x=x, w=w: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one,
                                                       out_dtype=torch.bfloat16) for x, w in zip(xs, ws)]
        elif self.device == "cpu" and p.dtype == "fp32" and torch.backends.mkldnn.is_available():
            # the kernel speedplan.runtime runs on CPU fp32: oneDNN with a pre-packed weight
            # (runtime/model.py `linear`); MKL's sgemv behind F.linear is ~1.5x slower here
            packed = self._cached(("packed", p.n, p.k, sets),
                                  lambda: [torch.ops.mkldnn._reorder_linear_weight(w, 1) for w in ws])
            linear = torch.ops.mkldnn._linear_pointwise
            calls = [lambda x=x, w=w: linear(x, w, None, "none", [], "") for x, w in zip(xs, packed)]
        else:
            calls = [lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, ws)]
        return calls

    def _attention(self, p: AttentionPoint) -> list:
        F = self.torch.nn.functional
        kv_bytes = 2 * p.batch * p.num_kv_heads * p.kv_len * p.head_dim * DTYPE_BYTES[p.dtype]
        sets = self._sets(kv_bytes)
        shape = (p.batch, p.num_kv_heads, p.kv_len, p.head_dim)
        kv_sets = self._cached(("kv", *shape, p.dtype, sets),  # q_len and mask vary fastest: reuse the KV
                               lambda: [(self._rand(*shape, dtype=p.dtype), self._rand(*shape, dtype=p.dtype))
                                        for _ in range(sets)])
        gqa = p.num_heads != p.num_kv_heads
        calls = []
        for k, v in kv_sets:
            q = self._rand(p.batch, p.q_len, p.num_heads, p.head_dim, dtype=p.dtype).transpose(1, 2)
            mask = attention_mask(p, self.gen)
            mask = mask.to(self.device) if mask is not None else None
            calls.append(lambda q=q, k=k, v=v, m=mask: F.scaled_dot_product_attention(
                q, k, v, attn_mask=m, enable_gqa=gqa))
        return calls

    def _elementwise(self, p: ElementwisePoint) -> list:
        torch, F = self.torch, self.torch.nn.functional
        tokens, h = p.numel // p.hidden, p.hidden
        sets = self._sets(p.numel * DTYPE_BYTES[p.dtype] * 3)
        calls = []
        for _ in range(sets):
            if p.op == "scale":
                x = self._rand(tokens, h, dtype=p.dtype)
                calls.append(lambda x=x: x * 0.5)
            elif p.op == "rmsnorm":
                x, w = self._rand(tokens, h, dtype=p.dtype), self._rand(h, dtype=p.dtype)
                calls.append(lambda x=x, w=w: F.rms_norm(x, (h,), w, 1e-5))
            elif p.op == "silu_mul":
                gate_up = self._rand(tokens, 2 * h, dtype=p.dtype)
                calls.append(lambda g=gate_up: (lambda a, b: F.silu(a) * b)(*g.chunk(2, -1)))
            elif p.op == "rotary":
                hd = 64 if h % 64 == 0 else h
                x = self._rand(tokens, h // hd, hd, dtype=p.dtype)
                cos, sin = self._rand(tokens, 1, hd, dtype=p.dtype), self._rand(tokens, 1, hd, dtype=p.dtype)
                calls.append(lambda x=x, c=cos, s=sin: x * c + torch.cat((-x[..., hd // 2:], x[..., : hd // 2]), -1) * s)
            else:
                raise ValueError(f"unknown elementwise op {p.op!r}")
        return calls

    def _floor(self, p: FloorPoint) -> list:
        xs = [self._rand(1, dtype=p.dtype) for _ in range(8)]
        calls = [lambda x=x: x.add_(1.0) for x in xs]  # one tiny kernel per call
        return calls
