"""One-layer draft heads (EAGLE-1/2, EAGLE-3, MTP): their shape as a ModelSpec and the cost
of one pass, as the engines run them (vLLM 0.33 model_executor/models/llama_eagle.py and
llama_eagle3.py; SGLang and TensorRT-LLM build the same layers).

- EAGLE-1/2 and MTP: every pass fuses [embedding, hidden] (2h → h), runs one decoder layer and
  the target's full lm_head (shared with the target).
- EAGLE-3: the first pass after verification fuses the target's low/mid/high hidden states
  (fc: 3h → h); every pass runs the decoder layer on [embedding, hidden] (its qkv projection
  reads 2h) and a reduced-vocabulary lm_head (`draft_vocab_size`, 32000 for the published
  Llama-3.1-8B head). A head's config.json gives its shape; without one, the target's.
- The first pass after verification runs the 1 + D verified tokens of each sequence and
  scores one of them (`base.first_pass_tokens`); the others one token each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from speedplan.cost.forward import ForwardCost, forward_cost
from speedplan.errors import SpeedplanInputError, clipped
from speedplan.plan.mechanisms.base import first_pass_tokens
from speedplan.specs.files import is_a, parse_json
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import ModelSpec

# yuhuili/EAGLE3-LLaMA3.1-Instruct-8B config.json: "draft_vocab_size": 32000 (the head vLLM's
# and TensorRT-LLM's docs use); the default for a head whose config is not given.
EAGLE3_DRAFT_VOCAB = 32000
EAGLE3_AUX_STATES = 3  # vLLM llama_eagle3.py: num_aux_hidden_states defaults to 3
# The published EAGLE-3 heads have one decoder layer (EAGLE-3, Li et al. 2025; SpecForge's EAGLE3
# docs: "often consists of only one dense decoder layer"). vLLM builds `num_hidden_layers` of them
# (vllm/model_executor/models/llama_eagle3.py at 00bd1493b3e8: the first reads [embedding, hidden],
# 2h wide, the others h). A head of more than a few layers costs what a small draft model costs and
# has no published acceptance: price it with draft-model:PATH.
EAGLE3_MAX_LAYERS = 4


def head_spec(target: ModelSpec, name: str, draft_vocab: int | None = None) -> ModelSpec:
    """The one-layer head an EAGLE (dense layer) or MTP (the target's own layer type, MoE
    included) drafter runs, as a ModelSpec of the target's dimensions."""
    if name == "mtp" and target.moe is not None:
        moe = replace(target.moe, first_dense_layers=0)
        return replace(target, name=f"{target.name}-mtp", layers=1, moe=moe, mtp_layers=0, window=0, window_layers=0,
                       linear=None)  # an MTP layer attends (Qwen3-Next's: gated full attention)
    inter = target.dense_intermediate if target.dense_intermediate > 0 else 4 * target.hidden
    return replace(
        target, name=f"{target.name}-{name}-head", layers=1, moe=None, intermediate=inter,
        vocab=draft_vocab or target.vocab, mtp_layers=0, window=0, window_layers=0,  # heads attend to every token
        linear=None, attn_gate=False, tp_gathers=(),  # a Llama decoder layer (vLLM's llama_eagle*.py: no gathers)
    )


def _gemm(cost, m, n: int, k: int, dtype: str, bytes_per: int) -> ForwardCost:
    op = cost.gemm(m, n, k, dtype)
    zero = np.zeros_like(op.latency_us)
    return ForwardCost(
        gemm_s=op.latency_us * 1e-6, attention_s=zero, tree_mask_s=zero, comm_s=zero, elementwise_s=zero,
        gemm_flops=2.0 * m * n * k + zero, gemm_bytes=float(n * k * bytes_per) + zero,
        gemm_compute_bound_s=np.where(op.bound == "compute", op.latency_us * 1e-6, 0.0),
        profile_share=op.from_profile.astype(float), out_of_range_share=op.out_of_range.astype(float))


def head_pass(cost, head: ModelSpec, target: ModelSpec, batch, q_len, context, tp: int,
              lm_head: bool = True, lm_head_rows=None) -> ForwardCost:
    """One EAGLE-1/2 or MTP head forward of `batch` × `q_len` tokens: fuse projection (2h→h),
    one decoder layer, lm_head unless `lm_head` is False, over `lm_head_rows` rows (default:
    every token) (seconds)."""
    layer = forward_cost(cost, head, batch, q_len, context, tp, lm_head_rows=lm_head_rows, lm_head=lm_head)
    return layer + _gemm(cost, batch * q_len, target.hidden, 2 * target.hidden, target.dtype, target.dtype_bytes)


def head_memory_bytes(head: ModelSpec, target: ModelSpec, draft_vocab: int | None, batch, context, tp: int):
    """A head's weights (one layer, the fuse projection, its own lm_head when the vocabulary
    is reduced) and its KV cache, on one of `tp` ranks (bytes)."""
    weights = head.layer_params(head.moe is not None) + 2 * target.hidden**2
    if draft_vocab:
        weights += draft_vocab * target.hidden
    # KV per rank as the target's: an MLA latent, or KV heads fewer than ranks, held whole on each
    return weights * target.dtype_bytes / tp + batch * context * head.kv_bytes_per_token_per_rank(tp)


def chain_passes(step, batch, draft_len, context) -> ForwardCost:
    """D sequential draft passes of a chain drafter: the first runs over the 1 + D positions
    the target just verified in each sequence (`first_pass_tokens`), the other D − 1 over 1
    token each; every pass scores one position per sequence. `step(batch, q_len, context,
    first)` prices one pass (`first`: the pass right after verification)."""
    first = step(batch, first_pass_tokens(draft_len), context, True)
    rest = step(batch, 1, context + draft_len / 2, False)
    return first.scaled(draft_len > 0) + rest.scaled(np.maximum(draft_len - 1, 0))


# ---- EAGLE-3 -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Eagle3Head:
    """An EAGLE-3 head: `layer` holds its decoder layer(s) with vocab = the draft vocabulary;
    `aux_states` target hidden states of width `target_hidden` feed its fc."""

    layer: ModelSpec
    aux_states: int
    target_hidden: int
    source: str

    @property
    def draft_vocab(self) -> int:
        return self.layer.vocab

    def describe(self) -> str:
        l = self.layer
        return (f"{l.layers} layer(s), hidden {l.hidden}, {l.heads}/{l.kv_heads} heads, intermediate "
                f"{l.intermediate}, draft vocab {l.vocab}, fc {self.aux_states}x{self.target_hidden}->{l.hidden} "
                f"({self.source})")


def eagle3_head(target: ModelSpec, config: str | None = None, draft_vocab: int | None = None) -> Eagle3Head:
    """The head's shape from its config.json (file or folder; `LlamaForCausalLMEagle3` keys or
    the speculators format's `transformer_layer_config`), else the target's dimensions with a
    32000-token draft vocabulary."""
    if config is None:
        base = head_spec(target, "eagle3", min(draft_vocab or EAGLE3_DRAFT_VOCAB, target.vocab))
        vocab = (f"draft vocabulary {base.vocab} (eagle3:vocab=N)" if draft_vocab else
                 f"the draft vocabulary of yuhuili/EAGLE3-LLaMA3.1-Instruct-8B ({EAGLE3_DRAFT_VOCAB})")
        return Eagle3Head(base, EAGLE3_AUX_STATES, target.hidden,
                          f"no head config given: the target's layer dimensions, {vocab}; "
                          "eagle3:config=PATH prices your head")
    path = Path(config)
    path = path / "config.json" if is_a(path, "dir") else path
    where = f"eagle3 head config {clipped(path)}"  # a path of thousands of characters is quoted by its ends
    try:
        text = path.read_text()
    except OSError as e:
        raise SpeedplanInputError(f"{where}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise SpeedplanInputError(f"{where}: not a text file (expected a config.json)") from None
    cfg = parse_json(text, where)
    if not isinstance(cfg, dict):
        raise SpeedplanInputError(f"{where}: expected a JSON object")
    layer_cfg = dict(cfg.get("transformer_layer_config") or cfg)  # speculators format nests the layer
    layer_cfg.setdefault("num_hidden_layers", 1)
    layer_cfg.setdefault("vocab_size", target.vocab)
    vocab = draft_vocab or cfg.get("draft_vocab_size") or layer_cfg.get("draft_vocab_size") or layer_cfg["vocab_size"]
    layer_cfg["vocab_size"] = vocab
    eagle_cfg = cfg.get("eagle_config") or {}
    aux = eagle_cfg.get("eagle_aux_hidden_state_layer_ids") or cfg.get("eagle_aux_hidden_state_layer_ids")
    aux_states = len(aux) if isinstance(aux, list) and aux else cfg.get("num_aux_hidden_states") or EAGLE3_AUX_STATES
    if isinstance(aux_states, bool) or not isinstance(aux_states, int) or not 1 <= aux_states <= 64:
        raise SpeedplanInputError(f"{where}: the auxiliary hidden states (eagle_aux_hidden_state_layer_ids, "
                                  "num_aux_hidden_states) must be a list of layer ids or a count in 1..64")
    layer = from_hf_config(layer_cfg, name=f"{target.name}-eagle3-head", where=where)
    layer = replace(layer, moe=None, mla=None, mtp_layers=0, dtype=target.dtype)
    if layer.intermediate <= 0:
        raise SpeedplanInputError(f"{where}: intermediate_size must be > 0")
    if layer.layers > EAGLE3_MAX_LAYERS:
        raise SpeedplanInputError(f"{where}: {layer.layers} decoder layers (num_hidden_layers); an EAGLE-3 head has 1 "
                                  f"(speedplan takes up to {EAGLE3_MAX_LAYERS}); a full model drafts as "
                                  "draft-model:PATH")
    target_hidden = cfg.get("target_hidden_size", layer_cfg.get("target_hidden_size")) or layer.hidden
    wide = isinstance(target_hidden, int) and not isinstance(target_hidden, bool)
    if not wide or target_hidden != target.hidden:  # vLLM's fc reads 3 x (target_hidden_size, else hidden_size)
        raise SpeedplanInputError(f"{where}: the head reads hidden states {target_hidden!r} wide (target_hidden_size, "
                                  f"else hidden_size), {target.name}'s are {target.hidden}: a head for another model")
    if not 1 <= vocab <= target.vocab:
        raise SpeedplanInputError(f"{where}: draft vocab {vocab} is outside 1..{target.vocab}")
    return Eagle3Head(layer, aux_states, target_hidden, f"config {path}")


def eagle3_pass(cost, head: Eagle3Head, batch, q_len, context, tp: int, first: bool,
                lm_head: bool = True, lm_head_rows=None) -> ForwardCost:
    """One EAGLE-3 head forward of `batch` × `q_len` tokens on one of `tp` ranks: the
    decoder layer(s) with the reduced lm_head (unless `lm_head` is False; over `lm_head_rows`
    rows, default every token), the embedding half
    of the first layer's 2h qkv input, and on the first pass the fc over the target's fused
    hidden states (seconds)."""
    l = head.layer
    tokens = batch * q_len
    cost_ = forward_cost(cost, l, batch, q_len, context, tp, lm_head_rows=lm_head_rows, lm_head=lm_head)
    qkv_out = -(-(l.heads + 2 * l.kv_heads) * l.head_dim // tp)
    cost_ = cost_ + _gemm(cost, tokens, qkv_out, l.hidden, l.dtype, l.dtype_bytes)  # the first layer's only
    if first:
        cost_ = cost_ + _gemm(cost, tokens, l.hidden, head.aux_states * head.target_hidden, l.dtype, l.dtype_bytes)
    return cost_


def eagle3_memory_bytes(head: Eagle3Head, batch, context, tp: int):
    """Weights (layers, the first with a 2h qkv input, fc, reduced lm_head) and KV cache per rank (bytes)."""
    l = head.layer
    extra_qkv = (l.heads + 2 * l.kv_heads) * l.head_dim * l.hidden
    weights = l.layers * l.layer_params(False) + extra_qkv + head.aux_states * head.target_hidden * l.hidden
    weights += l.vocab * l.hidden
    return weights * l.dtype_bytes / tp + batch * context * l.kv_bytes_per_token_per_rank(tp)
