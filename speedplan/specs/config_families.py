"""What some model families' config.json says beyond the standard keys: the weight width a
`quantization_config` ships, and which layers attend within a sliding window or a chunk. Pure functions
of the config dict; `speedplan.specs.hf_config.from_hf_config` calls them."""

from __future__ import annotations

import re

from speedplan.errors import SpeedplanInputError

_FP8_METHODS = {"fp8", "fbgemm_fp8"}
MXFP4_BITS = 4.25  # OCP MXFP4: a 4-bit value per weight and one 8-bit scale per block of 32


def quantized_dtype(quant, dtype: str, where: str, moe: bool = False) -> str:
    """The weight dtype a checkpoint's `quantization_config` ships: "fp8" for FP8 checkpoints
    (DeepSeek-V3's "fp8"; compressed-tensors or ModelOpt with 8-bit float weights), else
    `dtype`. Weights of another width (MXFP4 in gpt-oss, AWQ/GPTQ int4, NVFP4) are refused:
    speedplan prices bf16, fp16 and fp8 GEMMs only, and pricing 4-bit weights as 16-bit ones
    would overstate memory and time four-fold. MXFP4 on a MoE's routed experts only (gpt-oss)
    is read by `expert_weight_bits`, and the rest of the model keeps `dtype`."""
    if not quant:
        return dtype
    if not isinstance(quant, dict):
        raise SpeedplanInputError(f"{where}: 'quantization_config' must be an object")
    method = str(quant.get("quant_method", "")).lower()
    if method in _FP8_METHODS:
        return "fp8"
    if method in ("compressed-tensors", "modelopt") and _fp8_weights(quant):
        return "fp8"
    if method == "mxfp4" and moe:
        return dtype
    raise SpeedplanInputError(
        f"{where}: quantization {method or '?'!r} is not modelled (speedplan prices bf16, fp16 and fp8 weights); "
        "to price the model with 16-bit weights, remove 'quantization_config' from a copy of the config")


def expert_weight_bits(quant) -> float:
    """Bits per routed-expert weight when a MoE checkpoint ships its experts in MXFP4 (gpt-oss:
    `quant_method` "mxfp4", attention, router, embeddings and head left in bf16 by
    `modules_to_not_convert`); 0 otherwise (the model's dtype). Call after `quantized_dtype`."""
    return MXFP4_BITS if isinstance(quant, dict) and str(quant.get("quant_method", "")).lower() == "mxfp4" else 0.0


def _fp8_weights(node) -> bool:
    """Whether a compressed-tensors or ModelOpt config states 8-bit float weights anywhere
    ({"num_bits": 8, "type": "float"}, or a quant_algo / format naming FP8)."""
    if isinstance(node, dict):
        if node.get("num_bits") == 8 and str(node.get("type", "")).lower() == "float":
            return True
        if any("fp8" in str(node.get(k, "")).lower() for k in ("quant_algo", "format")):
            return True
        return any(_fp8_weights(v) for v in node.values())
    if isinstance(node, list):
        return any(_fp8_weights(v) for v in node)
    return False


OLMO3_WINDOW = 4096  # Olmo3Config.sliding_window's default


def family_of(name: str) -> str:
    """An architecture's family as speedplan spells it: `Qwen3_5MoeForConditionalGeneration` →
    "qwen35moe", `LlamaForCausalLMEagle3` → "llama", `Olmo2ForCausalLM` → "olmo2"."""
    base = re.sub(r"For(CausalLM|ConditionalGeneration)", "", name)
    return re.sub(r"^Eagle3?|Eagle3?$", "", base).replace("_", "").lower()


def _is(cfg: dict, family: str) -> bool:
    """Whether the config names `family` by its model_type or an architecture's class name."""
    names = cfg.get("architectures")
    return cfg.get("model_type") == family or (isinstance(names, list) and any(
        isinstance(n, str) and family_of(n) == family for n in names))


def flag(cfg: dict, key: str, where: str) -> bool:
    """A true/false key (absent or null: false); "false" as text would read as true."""
    value = cfg.get(key)
    if value is not None and not isinstance(value, bool):
        raise SpeedplanInputError(f"{where}: {key!r} must be true, false or null, got {value!r:.60}")
    return bool(value)


# Families whose transformers config class defaults tie_word_embeddings to True, read where the
# config.json states none (GemmaConfig, Gemma2Config, Gemma3TextConfig: huggingface/transformers
# configuration_gemma2.py at 008e5743, configuration_gemma3.py at 008f5c8c; google/gemma-2-9b-it's
# config.json has no such key and its checkpoint holds one embedding the lm_head reuses). The other
# priced families' classes default to False, as a config without the key was read before.
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3")


def tied_embeddings(cfg: dict, where: str) -> bool:
    """Whether the lm_head reuses the embedding: `tie_word_embeddings`, else the family's default."""
    if cfg.get("tie_word_embeddings") is None:
        family = str(cfg.get("model_type", "")).removesuffix("_text")
        return family in _TIED_BY_DEFAULT or any(_is(cfg, f) for f in _TIED_BY_DEFAULT)
    return flag(cfg, "tie_word_embeddings", where)


# What a composite (multimodal) config.json states for the whole checkpoint beside its text_config:
# transformers saves quantization_config at the top (an FP8 Qwen3.5 or Llama-4 checkpoint), and the
# weights' dtype and tie_word_embeddings there where the text_config leaves them out.
_WHOLE_MODEL_KEYS = ("quantization_config", "tie_word_embeddings")
_DTYPE_KEYS = ("torch_dtype", "dtype")


# What transformers' text config classes set where a composite checkpoint's text_config leaves a
# key out. save_pretrained writes a nested config as its difference from its class's defaults
# (configuration_utils.recursive_diff_dict), so google/gemma-3-4b-it's text_config states six keys
# and not its 8 heads, 4 KV heads, 256-wide heads or 262,208-token vocabulary; vLLM and
# transformers read the class's values there. Keys the readers use, from huggingface/transformers
# models/gemma3/configuration_gemma3.py at 008f5c8c (Gemma3TextConfig.__init__; the global
# layer every 6th), models/llama4/configuration_llama4.py, models/qwen3_5/configuration_qwen3_5.py and
# qwen3_5_moe/configuration_qwen3_5_moe.py at 008e5743 (Llama4TextConfig, Qwen3_5TextConfig and
# Qwen3_5MoeTextConfig: full attention every 4th layer).
TEXT_CLASS_DEFAULTS = {
    "gemma3_text": dict(vocab_size=262_208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                        num_attention_heads=8, num_key_value_heads=4, head_dim=256, max_position_embeddings=131_072,
                        sliding_window=4096, sliding_window_pattern=6),
    "llama4_text": dict(vocab_size=202_048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
                        num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128,
                        max_position_embeddings=131_072, num_experts_per_tok=1, num_local_experts=16,
                        interleave_moe_layer_step=1, no_rope_layer_interval=4, attention_chunk_size=8192),
    "qwen3_5_text": dict(vocab_size=248_320, hidden_size=4096, intermediate_size=12288, num_hidden_layers=32,
                         num_attention_heads=16, num_key_value_heads=4, head_dim=256, max_position_embeddings=32768,
                         linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                         linear_num_key_heads=16, linear_num_value_heads=32, full_attention_interval=4),
    "qwen3_5_moe_text": dict(vocab_size=248_320, hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
                             num_key_value_heads=2, head_dim=256, max_position_embeddings=32768,
                             linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
                             linear_num_key_heads=16, linear_num_value_heads=32, full_attention_interval=4,
                             moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts_per_tok=8,
                             num_experts=256),
}


def text_config(cfg: dict, where: str) -> dict:
    """A composite config's text_config, with the whole-checkpoint keys it leaves to the top
    level (an object of its own wins; the text_config's own dtype wins over the top's), and the
    keys its class's defaults fill where it leaves them out (`TEXT_CLASS_DEFAULTS`, by the
    text_config's model_type, else the top's with "_text")."""
    text = cfg["text_config"]
    if not isinstance(text, dict):
        raise SpeedplanInputError(f"{where}: 'text_config' must be an object")
    keys = _WHOLE_MODEL_KEYS + (() if any(text.get(k) is not None for k in _DTYPE_KEYS) else _DTYPE_KEYS)
    kind = text.get("model_type") or f"{cfg.get('model_type')}_text"
    defaults = TEXT_CLASS_DEFAULTS.get(kind, {}) if isinstance(kind, str) else {}
    return {**defaults, **text, **{k: cfg[k] for k in keys if cfg.get(k) is not None and text.get(k) is None}}


def check_bias_flags(cfg: dict, where: str) -> None:
    """InternLM3's `qkv_bias` (q, k and v projections) and `bias` (o_proj; vLLM's LlamaDecoderLayer
    reads both): booleans. Bias vectors are not counted, as no family's are."""
    if _is(cfg, "internlm3"):
        for key in ("qkv_bias", "bias"):
            flag(cfg, key, where)


def shared_mlp_width(cfg: dict, where: str) -> int:
    """Granite-MoE-Shared's always-on `shared_mlp` width (`shared_intermediate_size`; 0 or
    absent: none, GraniteMoeSharedDecoderLayer builds no shared_mlp); 0 for other families."""
    if not _is(cfg, "granitemoeshared"):
        return 0
    value = cfg.get("shared_intermediate_size")
    value = 0 if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000_000:
        raise SpeedplanInputError(f"{where}: 'shared_intermediate_size' must be an integer in 0..10,000,000 "
                                  f"(0: no shared expert), got {value!r}")
    return value


def tp_gathers(cfg: dict, heads: int, kv_heads: int, head_dim: int) -> tuple[int, ...]:
    """Widths (elements a token) of the all-gathers each attention layer adds at TP > 1, as vLLM
    builds the family: OLMo-2, OLMo-3 and OLMoE gather q and k across the GPUs to normalise each
    over its whole projection (olmo2.py `_apply_qk_norm`, vllm commit 028aedf62ade; olmoe.py
    `OlmoeAttention._apply_qk_norm`, commit 048a32c74781); InternLM2 gathers its fused wqkv output
    to split q, k and v (internlm2.py `split_qkv`, commit 0531c2226a6a). () for other families."""
    if any(_is(cfg, f) for f in ("olmo2", "olmo3", "olmoe")):
        return heads * head_dim, kv_heads * head_dim
    if _is(cfg, "internlm2"):
        return ((heads + 2 * kv_heads) * head_dim,)
    return ()


# The per-layer kinds speedplan prices: transformers' ALLOWED_LAYER_TYPES for attention and
# Gated DeltaNet; "mamba", "conv" and the like name mixers it does not price.
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")


def check_layer_types(cfg: dict, layers: int, where: str) -> None:
    """Refuse a `layer_types` that is not one known kind per layer: a list as long as
    num_hidden_layers (transformers' layer_type_validation asks the same), of `LAYER_TYPES`.
    `sliding_window`, `chunked_attention` and `linear_attention` then count its entries."""
    types = cfg.get("layer_types")
    if types is None:
        return
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        text = repr(types)
        raise SpeedplanInputError(f"{where}: 'layer_types' must be a list of layer kinds, one per layer, got "
                                  f"{text if len(text) <= 60 else text[:57] + '...'}")
    if len(types) != layers:
        raise SpeedplanInputError(f"{where}: 'layer_types' names {len(types)} layers, num_hidden_layers is {layers}")
    unknown = next((t for t in types if t not in LAYER_TYPES), None)
    if unknown is not None:
        raise SpeedplanInputError(f"{where}: 'layer_types' holds {unknown[:40]!r}; speedplan prices "
                                  f"{', '.join(LAYER_TYPES)}")


def sliding_window(cfg: dict, layers: int, where: str) -> tuple[int, int, bool]:
    """(window in tokens, how many of the `layers` attend only within it, whether the window is
    Llama-4's attention chunk); (0, 0, False) for full attention everywhere. Read, in this order:
    - `layer_types` (transformers' per-layer list: Gemma-2/3, gpt-oss, newer Qwen): the
      "sliding_attention" entries;
    - `use_sliding_window: false` (Qwen2/Qwen3 state a window they do not use): none;
    - Gemma-2: every other layer, starting with the first (`Gemma2DecoderLayer`);
      Gemma-3: all but every `sliding_window_pattern`-th layer (6: five local, one global);
      OLMo-3: Olmo3Config's defaults, three layers in four (every 4th full) and a window of
      4,096 tokens where the config names none (null: no window);
    - else a numeric `sliding_window` applies to every layer (Mistral-7B-v0.1, Phi-3).
    Without a sliding window, Llama-4's chunked attention (`attention_chunk_size`) is read as
    one: see `chunked_attention`."""
    family = "olmo3" if _is(cfg, "olmo3") else str(cfg.get("model_type", ""))
    window = cfg.get("sliding_window", OLMO3_WINDOW if family == "olmo3" else None)
    if window is None or window is False:
        chunk, local = chunked_attention(cfg, layers, where)
        return chunk, local, bool(local)
    if isinstance(window, bool) or not isinstance(window, int) or not 0 < window <= 2 ** 31:
        raise SpeedplanInputError(f"{where}: 'sliding_window' must be a positive integer (at most 2**31) or null, "
                                  f"got {window!r:.40}")
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        local = sum(1 for t in types if t == "sliding_attention")
        return (window, local, False) if local else (0, 0, False)
    if cfg.get("use_sliding_window") is False:
        return 0, 0, False
    full = cfg.get("max_window_layers")  # Qwen2/Qwen3 with use_sliding_window: layers from this index on are local
    if cfg.get("use_sliding_window") is True and isinstance(full, int) and not isinstance(full, bool) and full >= 0:
        return (window, layers - full, False) if full < layers else (0, 0, False)
    if family == "olmo3":
        return window, layers - layers // 4, False
    if family == "gemma2":
        return window, (layers + 1) // 2, False
    if family.startswith("gemma3"):
        pattern = cfg.get("sliding_window_pattern") or 6
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
            raise SpeedplanInputError(f"{where}: 'sliding_window_pattern' must be a positive integer, got {pattern!r}")
        return window, layers - layers // pattern, False
    return window, layers, False


def chunked_attention(cfg: dict, layers: int, where: str) -> tuple[int, int]:
    """(chunk in tokens, how many of the `layers` attend only within their chunk); (0, 0)
    without `attention_chunk_size`. Llama-4's RoPE layers attend to the tokens of their own
    chunk of `attention_chunk_size` positions; its NoPE layers (every 4th by default) to every
    token. Which are which: `layer_types` ("chunked_attention"), else `no_rope_layers` (1 =
    RoPE = chunked), else all but every `no_rope_layer_interval`-th layer (Llama4TextConfig).

    A query at position p reads (p mod chunk) + 1 keys, between 1 and the chunk; speedplan
    prices a chunked layer as a sliding window of one chunk, the upper bound (a query late in a
    chunk; about twice the average over a long generation), and holds one chunk of its KV, as
    vLLM's chunked local attention does."""
    chunk = cfg.get("attention_chunk_size")
    if chunk is None or chunk is False:
        return 0, 0
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0:
        raise SpeedplanInputError(f"{where}: 'attention_chunk_size' must be a positive integer or null, got {chunk!r}")
    types, rope = cfg.get("layer_types"), cfg.get("no_rope_layers")
    if isinstance(types, list) and types:
        local = sum(1 for t in types if t == "chunked_attention")
    elif isinstance(rope, list) and rope:
        local = sum(1 for r in rope if r)
    else:
        interval = cfg.get("no_rope_layer_interval", 4)
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise SpeedplanInputError(f"{where}: 'no_rope_layer_interval' must be a positive integer, got {interval!r}")
        local = layers - layers // interval
    return (chunk, min(local, layers)) if local else (0, 0)
