"""A Llama-family decoder (RMSNorm, RoPE, GQA, SwiGLU) with a preallocated, ragged KV cache.

One forward serves every step the runtime needs: prefill of ragged prompts, decode (T=1),
chain verify of 1+D tokens and tree verify of N nodes under a tree mask. The forward writes
the new tokens' K/V into the cache *after* each sequence's committed length and never moves
the length itself; the caller commits what it accepted with `KVCache.commit`, so rollback of
rejected draft positions is simply not advancing the pointer.

Layout: sequences are left-aligned in the cache, sequence b owns slots [0, lengths[b]).
New token t of sequence b goes to slot lengths[b] + t; its RoPE position is lengths[b] + t
for a chain and lengths[b] + depth[t] for a tree node.

Hidden states: `forward` returns the last layer's output *after* the final RMSNorm
(`[B, T, hidden]`), i.e. exactly what `lm_head` is applied to; EAGLE-style heads take this.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speedplan.specs.model import ModelSpec


@dataclass(frozen=True, kw_only=True)
class LlamaConfig(ModelSpec):
    """A dense Llama-family model as the runtime runs it: the planner's `ModelSpec` (the same
    shape fields, sizes in elements) plus the RoPE base and the RMSNorm epsilon."""

    name: str = "llama"
    rope_theta: float = 10000.0  # RoPE frequency base
    norm_eps: float = 1e-5  # RMSNorm epsilon

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.moe is not None or self.mla is not None:
            raise ValueError(f"model {self.name}: the runtime supports dense Llama-family models only")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even for RoPE")

    @classmethod
    def from_spec(cls, spec: ModelSpec, rope_theta: float = 10000.0, norm_eps: float = 1e-5) -> "LlamaConfig":
        """A preset's shape (dense GQA only) with the given RoPE base and epsilon."""
        return cls(**{f.name: getattr(spec, f.name) for f in fields(ModelSpec)}, rope_theta=rope_theta,
                   norm_eps=norm_eps)

    def truncated(self, layers: int) -> "LlamaConfig":
        """The same shape with only the first `layers` decoder layers."""
        return replace(self, layers=layers, name=f"{self.name}[:{layers}]")


GPU_SLOT_BLOCK = 16  # KV slots a GPU cache is allocated in (vLLM's default block size)


class KVCache:
    """Preallocated K/V for `batch` sequences of up to `max_len` tokens, per-sequence lengths."""

    def __init__(self, cfg: LlamaConfig, batch: int, max_len: int, device="cpu", dtype=torch.float32):
        shape = (cfg.layers, batch, cfg.kv_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)  # [L, B, Hkv, S, Dh]
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)  # committed tokens [B]
        self.max_len = max_len

    @property
    def batch(self) -> int:
        return self.k.shape[1]

    def resized(self, max_len: int) -> "KVCache":
        """A copy holding the same committed K/V in a cache of `max_len` slots (zeros past the
        longest sequence, as a fresh prefill leaves them)."""
        width = int(self.lengths.max()) if self.lengths.numel() else 0
        if max_len < width:
            raise ValueError(f"a cache of {max_len} slots cannot hold {width} committed tokens")
        out = KVCache.__new__(KVCache)
        shape = (*self.k.shape[:3], max_len, self.k.shape[4])
        out.k = torch.zeros(shape, device=self.k.device, dtype=self.k.dtype)
        out.v = torch.zeros(shape, device=self.v.device, dtype=self.v.dtype)
        out.k[:, :, :, :width] = self.k[:, :, :, :width]
        out.v[:, :, :, :width] = self.v[:, :, :, :width]
        out.lengths = self.lengths.clone()
        out.max_len = max_len
        return out

    def commit(self, rows: Tensor, num_tokens: Tensor) -> None:
        """Advance the committed length of `rows` by `num_tokens`. Slots written past the new
        length by a rejected draft stay in memory but are harmless: attention never reads a
        slot at or past a sequence's length except the ones the current forward just wrote."""
        self.lengths[rows] += num_tokens

    def set_lengths(self, rows: Tensor, lengths: Tensor) -> None:
        """Move the committed length of `rows` (rollback or reset)."""
        self.lengths[rows] = lengths

    def move(self, rows: Tensor, src_offsets: Tensor, dst_offset: int) -> None:
        """Copy slots lengths+src_offsets[:, i] to lengths+dst_offset+i for every layer
        (tree verify: pack the accepted path's K/V right after the committed prefix)."""
        if src_offsets.numel() == 0:
            return
        base = self.lengths[rows][:, None]  # [b, 1]
        src = base + src_offsets  # [b, n]
        dst = base + dst_offset + torch.arange(src_offsets.shape[1], device=src.device)[None, :]
        r = rows[:, None]
        for cache in (self.k, self.v):
            moved = cache[:, r, :, src]  # [b, n, L, Hkv, Dh]
            cache[:, r, :, dst] = moved


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def linear(x: Tensor, weight: Tensor, packed: Tensor | None = None, quantized=None) -> Tensor:
    """x [..., in] @ weight[out, in].T. On CPU fp32, `packed` is the same weight reordered
    for oneDNN: at the 1..64 rows a decode/verify step has, MKL's sgemm/sgemv reached only
    ~10 GB/s of weight reads on the 2-core AMD EPYC dev box, oneDNN's packed GEMM ~17 GB/s
    (per-shape sweep on 2026-11-29; numbers in benchmarks/README.md). `quantized` (opt-in,
    `kernels.q4.Q41Linear`) computes the same product from the GGUF's Q4_1 blocks and returns
    None for row counts it leaves to the fp32 path."""
    if quantized is not None:
        out = quantized(x)
        if out is not None:
            return out
    if packed is None:
        return F.linear(x, weight)
    out = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]), packed, None, "none", [], "")
    return out.view(*x.shape[:-1], out.shape[-1])


def pack_weight(weight: Tensor) -> Tensor | None:
    """oneDNN-packed copy of a CPU fp32 weight, or None where packing does not apply."""
    if weight.device.type != "cpu" or weight.dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return None
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 1)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        q_out, kv_out = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        self.wqkv = nn.Parameter(torch.empty(q_out + 2 * kv_out, cfg.hidden))  # fused Q, K, V
        self.wo = nn.Parameter(torch.empty(cfg.hidden, q_out))
        self.packed: dict[str, Tensor | None] = {"wqkv": None, "wo": None}
        self.quantized: dict[str, object | None] = {"wqkv": None, "wo": None}  # kernels.q4.Q41Linear

    def forward(self, x: Tensor, layer: int, cache: KVCache, step: "StepInputs") -> Tensor:
        cfg = self.cfg
        b, t, _ = x.shape
        qkv = linear(x, self.wqkv, self.packed["wqkv"], self.quantized["wqkv"])
        qkv = qkv.view(b, t, cfg.heads + 2 * cfg.kv_heads, cfg.head_dim)
        qk = apply_rope(qkv[:, :, : cfg.heads + cfg.kv_heads], step.cos, step.sin)  # Q and K heads in one go
        q, k = qk.split([cfg.heads, cfg.kv_heads], 2)  # [b, T, H, Dh], [b, T, Hkv, Dh]
        v = qkv[:, :, cfg.heads + cfg.kv_heads :]
        kc, vc = cache.k[layer], cache.v[layer]  # [B, Hkv, S, Dh]
        kc[step.rows_col, :, step.slots] = k  # write new K/V at slots [b, T]
        vc[step.rows_col, :, step.slots] = v
        if step.all_rows:
            keys, values = kc[:, :, : step.span], vc[:, :, : step.span]  # [b, Hkv, S, Dh] views
        else:
            keys, values = kc[step.rows, :, : step.span], vc[step.rows, :, : step.span]
        out = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=step.mask,
                                             enable_gqa=cfg.heads != cfg.kv_heads)  # [b, H, T, Dh]
        return linear(out.transpose(1, 2).reshape(b, t, -1), self.wo, self.packed["wo"], self.quantized["wo"])


class MLP(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.w_gate_up = nn.Parameter(torch.empty(2 * cfg.intermediate, cfg.hidden))  # fused gate, up
        self.w_down = nn.Parameter(torch.empty(cfg.hidden, cfg.intermediate))
        self.packed: dict[str, Tensor | None] = {"w_gate_up": None, "w_down": None}
        self.quantized: dict[str, object | None] = {"w_gate_up": None, "w_down": None}

    def forward(self, x: Tensor) -> Tensor:
        gate, up = linear(x, self.w_gate_up, self.packed["w_gate_up"], self.quantized["w_gate_up"]).chunk(2, -1)
        return linear(F.silu(gate) * up, self.w_down, self.packed["w_down"], self.quantized["w_down"])


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attn_norm = nn.Parameter(torch.ones(cfg.hidden))
        self.mlp_norm = nn.Parameter(torch.ones(cfg.hidden))
        self.attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.eps = cfg.norm_eps

    def forward(self, x: Tensor, layer: int, cache: KVCache, step: "StepInputs") -> Tensor:
        x = x + self.attn(rms_norm(x, self.attn_norm, self.eps), layer, cache, step)
        return x + self.mlp(rms_norm(x, self.mlp_norm, self.eps))


@dataclass
class StepInputs:
    """Per-forward indexing shared by all layers (built once per forward)."""

    rows: Tensor  # [b] cache rows of the sequences in this forward
    rows_col: Tensor  # [b, 1]
    all_rows: bool  # rows == arange(B): read the cache through views, no gather
    slots: Tensor  # [b, T] cache slot of each new token
    span: int  # attention reads slots [0, span)
    mask: Tensor | None  # [b, 1, T, span] bool, True = may attend
    cos: Tensor  # [b, T, 1, Dh]
    sin: Tensor


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate-half RoPE (Hugging Face Llama convention); x [b, T, H, Dh]."""
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat((-x2, x1), -1) * sin


class Transformer(nn.Module):
    def __init__(self, cfg: LlamaConfig, max_positions: int = 8192):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Parameter(torch.empty(cfg.vocab, cfg.hidden))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.Parameter(torch.ones(cfg.hidden))
        self.lm_head_weight = None if cfg.tie_embeddings else nn.Parameter(torch.empty(cfg.vocab, cfg.hidden))
        inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
        angles = torch.outer(torch.arange(max_positions, dtype=torch.float64), inv_freq)
        angles = torch.cat((angles, angles), -1)  # [P, Dh]
        self.register_buffer("rope_cos", angles.cos().float(), persistent=False)
        self.register_buffer("rope_sin", angles.sin().float(), persistent=False)
        self.lm_head_packed: Tensor | None = None
        self.static_span = False  # attend over the whole cache (fixed shapes for CUDA graphs)

    def pack_cpu_weights(self) -> "Transformer":
        """Keep oneDNN-packed copies of every matmul weight (CPU fp32 inference only; call
        again after changing weights, since the packed copies do not follow them)."""
        for block in self.blocks:
            for mod in (block.attn, block.mlp):
                for name in mod.packed:
                    mod.packed[name] = pack_weight(getattr(mod, name))
        self.lm_head_packed = pack_weight(self.lm_head)
        return self

    @property
    def lm_head(self) -> Tensor:
        return self.embed if self.lm_head_weight is None else self.lm_head_weight

    def logits(self, hidden: Tensor) -> Tensor:
        """[..., hidden] final-norm hidden states -> [..., V] fp32 logits."""
        return linear(hidden, self.lm_head, self.lm_head_packed).float()

    draft_token_ids: Tensor | None = None  # token ids of draft_logits' columns (None: column j is token j)

    def draft_logits(self, hidden: Tensor) -> Tensor:
        """Logits as a drafter scores them, [..., V]; a draft model with a reduced vocabulary
        returns its Vd columns, whose token ids are `draft_token_ids`."""
        return self.logits(hidden)

    def new_cache(self, batch: int, max_len: int) -> KVCache:
        """A cache of at least `max_len` slots per sequence; on a GPU rounded up to a multiple of
        GPU_SLOT_BLOCK, as engines allocate KV in blocks. A graph-captured step attends over every
        slot (`static_span`); on the H200 (reports/validation-h200) verify steps over spans such
        as 8,195 took 1.07-1.60x (median 1.31x) what they took over spans rounded up to 16."""
        if self.embed.device.type != "cpu":
            max_len = -(-max_len // GPU_SLOT_BLOCK) * GPU_SLOT_BLOCK
        return KVCache(self.cfg, batch, max_len, self.embed.device, self.embed.dtype)

    def forward(self, tokens: Tensor, cache: KVCache, rows: Tensor | None = None,
                tree_ancestors: Tensor | None = None, tree_depth: Tensor | None = None,
                tree_nodes: Tensor | None = None) -> Tensor:
        """Run `tokens` [b, T] after the committed prefix of cache rows `rows` (default: all).

        Chain (default): token t sits at position lengths+t and sees the prefix and tokens <= t.
        Tree: `tree_ancestors` [b, T, T] bool (node i sees node j iff j is i or an ancestor)
        and `tree_depth` [b, T] (position = lengths + depth). Part of a tree: `tree_nodes`
        [b, T] are the tokens' node ids in a tree of W nodes, `tree_ancestors` [b, T, W] their
        ancestor rows; node j's K/V sit in slot lengths + j, so the ancestors must have run
        before (a drafter growing a tree level by level). Ragged prefill pads each row at
        the end; padded queries produce rows the caller ignores. Returns final-norm hidden
        states [b, T, hidden]; the cache lengths are not changed (see `KVCache.commit`).
        """
        step = self._step_inputs(tokens, cache, rows, tree_ancestors, tree_depth, tree_nodes)
        x = F.embedding(tokens, self.embed)  # [b, T, hidden]
        for layer, block in enumerate(self.blocks):
            x = block(x, layer, cache, step)
        return rms_norm(x, self.norm, self.cfg.norm_eps)

    def _step_inputs(self, tokens, cache, rows, ancestors, depth, nodes=None) -> StepInputs:
        b, t = tokens.shape
        device = tokens.device
        all_rows = b == cache.batch  # active rows are a sorted subset of 0..B-1, so all of them
        if rows is None:
            rows = torch.arange(b, device=device)
        lengths = cache.lengths[rows]  # [b]
        offsets = torch.arange(t, device=device)
        slots = lengths[:, None] + (offsets[None, :] if nodes is None else nodes)  # [b, T]
        positions = slots if depth is None else lengths[:, None] + depth
        if self.static_span:  # CUDA graphs: fixed shapes, no host sync
            span = cache.max_len
        else:
            span = int(slots.max()) + 1
            if span > cache.max_len:
                raise ValueError(f"KV cache overflow: need {span} slots, cache holds {cache.max_len}")
        mask = None
        if not (b == 1 and t == 1 and not self.static_span):  # one query at the end sees everything
            rel = torch.arange(span, device=device)[None, :] - lengths[:, None]  # [b, S] slot - length
            if ancestors is None:
                sees = rel[:, None, :] <= offsets[None, :, None]  # [b, T, S] prefix + causal
            else:
                width = ancestors.shape[2]  # nodes in the tree (T unless `nodes` picks some)
                in_tree = ((rel >= 0) & (rel < width))[:, None, :]
                sees = torch.gather(ancestors, 2, rel.clamp(0, width - 1)[:, None, :].expand(b, t, span))
                sees = (rel < 0)[:, None, :] | (in_tree & sees)
            mask = sees[:, None]  # [b, 1, T, S]
        return StepInputs(rows, rows[:, None], all_rows, slots, span, mask,
                          self.rope_cos[positions][:, :, None, :], self.rope_sin[positions][:, :, None, :])
