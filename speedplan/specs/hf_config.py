"""Reading a Hugging Face config.json into a `ModelSpec`: the standard keys (hidden size,
layers, heads, KV heads, head_dim, vocabulary, MoE and MLA keys) here; what some families
say beyond them in `config_families`, `linear_attention` and `sparse_attention`. Every
malformed or missing key is one `SpeedplanInputError` naming the file and the key."""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError
from speedplan.specs.config_families import (check_bias_flags, check_layer_types, expert_weight_bits, family_of,
                                             quantized_dtype, shared_mlp_width, sliding_window, text_config,
                                             tied_embeddings, tp_gathers)
from speedplan.specs.files import finite
from speedplan.specs.hardware import DTYPE_BYTES
from speedplan.specs.linear_attention import linear_attention
from speedplan.specs.model import MAX_POSITIONS, MLASpec, MoESpec, ModelSpec
from speedplan.specs.sparse_attention import sparse_index
from speedplan.units import billions


_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "fp8", "auto": "bf16"}

# Families whose layers speedplan's forward pass does not describe: encoders and encoder-decoders
# (no autoregressive decode step to speculate on) and state-space or recurrent mixers other than
# Gated DeltaNet (Mamba, RWKV, Griffin; speedplan/specs/linear_attention.py prices Qwen3-Next's).
_NOT_PRICED = {
    **dict.fromkeys(("bert", "roberta", "xlm-roberta", "deberta", "deberta-v2", "distilbert", "electra", "albert",
                     "modernbert", "t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "whisper"),
                    "an encoder or encoder-decoder model, not a decoder-only language model"),
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba", "jamba", "zamba", "zamba2", "bamba", "nemotron_h",
                     "granitemoehybrid", "falcon_h1", "plamo2", "rwkv", "rwkv5", "rwkv6", "recurrent_gemma"),
                    "its Mamba or recurrent layers are not priced (speedplan prices attention, and Gated DeltaNet)"),
}
_NOT_CAUSAL_LM = ("ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
                  "ForImageClassification")
# Architectures whose layers speedplan describes (README "A Hugging Face config.json is read for these
# families"), as `config_families.family_of` spells them; EAGLE heads name their base family (LlamaForCausalLMEagle3).
# Read from the standard keys alone, as their sources build them (huggingface/transformers
# src/transformers/models/<family>/, modular_*.py and configuration_*.py; no head_dim key, so hidden / heads):
# - granite: Llama layers; embedding_/attention_/residual_multiplier and logits_scaling scale, add no weights.
# - granitemoe: every layer a MoE, GraniteMoeMoE: num_local_experts experts intermediate_size wide
#   (input_linear 2 x intermediate_size), num_experts_per_tok of them a token, router hidden -> experts.
# - olmo: Llama layers, weightless LayerNorms, clip_qkv clamps Q/K/V; olmo2: RMSNorm after attention and MLP,
#   q_norm / k_norm over the whole Q and K projections (a few weights, uncounted).
# - internlm2 (remote code, InternLM2Config; vLLM vllm/model_executor/models/internlm2.py): one fused wqkv,
#   (heads + 2 x num_key_value_heads) x head_dim wide: q, k and v side by side; feed_forward w1/w3/w2.
# - phimoe (PhiMoEForCausalLM in checkpoints, PhimoeForCausalLM in transformers): Mixtral's sparse MoE block
#   (num_local_experts experts intermediate_size wide, top num_experts_per_tok), Llama attention.
# - olmoe (olmoe/modular_olmoe.py at 052b1dcdbe75, configuration_olmoe.py at 008e57439125; vLLM olmoe.py at
#   e9b0f07b6969): every layer OlmoeSparseMoeBlock, num_experts (num_local_experts in attribute_map) experts
#   intermediate_size wide (OlmoeMLP), top num_experts_per_tok, gate hidden -> experts; OLMo-2's whole-projection
#   q_norm / k_norm (uncounted), Llama pre-norms.
# - olmo3 (olmo3/modular_olmo3.py at 02e8340b967f, configuration_olmo3.py at 008e57439125; vLLM serves it as
#   Olmo2ForCausalLM, vllm/transformers_utils/configs/olmo3.py): OLMo-2 layers; layer_types' "sliding_attention"
#   layers attend within sliding_window. Without the keys, Olmo3Config's defaults: 4,096 tokens on three layers
#   in four (config_families.sliding_window).
# - internlm3 (remote code; vLLM registry.py at bf8e76246223 maps InternLM3ForCausalLM to llama.py, whose
#   LlamaDecoderLayer takes qkv_bias for q/k/v and bias for o_proj): Llama layers with head_dim; biases uncounted.
# - granitemoeshared (granitemoeshared/modular_granitemoeshared.py at 01819372ec80,
#   configuration_granitemoeshared.py at 040e1a7e4bb4; vLLM granitemoeshared.py at ec98ba02c8d6): granitemoe
#   plus, where shared_intermediate_size > 0, an ungated shared_mlp that wide added to every MoE output: one
#   shared expert in MoESpec, as Qwen2-MoE's (without its gate) and DeepSeek's (n_shared_experts) are.
PRICED_FAMILIES = ("llama", "llama4", "mistral", "mixtral", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "qwen3next",
                   "qwen35", "qwen35moe", "gemma", "gemma2", "gemma3", "phi3", "deepseekv2", "deepseekv3",
                   "deepseekv32", "glm", "glm4", "glm4moe", "glm4moelite", "glmmoedsa", "gptoss", "granite",
                   "granitemoe", "granitemoeshared", "olmo", "olmo2", "olmo3", "olmoe", "internlm2", "internlm3",
                   "phimoe")
# Families whose intermediate_size is the dense MLP's width and whose experts' width is
# moe_intermediate_size (Mixtral, gpt-oss and Llama-4 give the experts' width as intermediate_size).
_EXPERT_WIDTH_OWN_KEY = ("qwen2moe", "qwen3moe", "qwen3next", "qwen35", "deepseek", "glm4moe", "glmmoe")


def _check_family(cfg: dict, arch: list[str], where: str) -> None:
    """Refuse a config speedplan would price as something it is not (module constants above)."""
    family = str(cfg.get("model_type", "")).lower()
    if family in _NOT_PRICED:
        raise SpeedplanInputError(f"{where}: model_type {family!r}: {_NOT_PRICED[family]}")
    if cfg.get("is_encoder_decoder") is True:  # (is_decoder: false is transformers' default, saved by many decoders)
        raise SpeedplanInputError(f"{where}: is_encoder_decoder is true: an encoder-decoder model, not a decoder-only "
                                  "language model")
    wrong = [a for a in arch if a.endswith(_NOT_CAUSAL_LM)]
    if wrong:
        raise SpeedplanInputError(f"{where}: architecture {wrong[0]!r} is not a causal language model")
    if not arch and not family:  # a hand-written config of the standard keys: read as a Llama-style decoder
        return
    # without architectures, the model_type names the family ("gemma3_text", "llama4_text": a text-only config)
    named = arch or [family.removesuffix("_text")]
    if not any(family_of(a) in PRICED_FAMILIES for a in named):
        what = f"architecture {arch[0]!r}" if arch else f"model_type {family!r}"
        raise SpeedplanInputError(
            f"{where}: {what} is not a family speedplan prices (Llama, Mistral, Mixtral, Qwen2/3, "
            "Qwen-MoE, Qwen3-Next, Gemma, Phi-3, Phi-3.5-MoE, DeepSeek-V2/V3, GLM-4 MoE, Llama-4, gpt-oss, Granite, "
            "Granite-MoE, Granite-MoE-Shared, OLMo, OLMo-2, OLMo-3, OLMoE, InternLM2, InternLM3); to price it as a "
            "Llama-style decoder from its standard keys, set \"architectures\": [\"LlamaForCausalLM\"] in a copy")


def _dtype(cfg: dict, where: str) -> str:
    """The checkpoint's dtype (torch_dtype, or dtype in newer configs); bf16 when unstated."""
    key = "torch_dtype" if cfg.get("torch_dtype") is not None else "dtype"
    raw = "bfloat16" if cfg.get(key) is None else cfg[key]  # null: unstated; [] or "" are no dtype
    name = raw.removeprefix("torch.") if isinstance(raw, str) else None
    if name not in _DTYPES:
        raise SpeedplanInputError(f"{where}: {key} {raw!r} is not one of {', '.join(_DTYPES)}")
    return _DTYPES[name]


MAX_COUNT = 10_000_000  # no dimension, vocabulary or layer count of a real model comes near this


def _int(cfg: dict, key: str, where: str, default: int | None = None) -> int:
    value = cfg.get(key)
    value = default if value is None else value  # null, as Hugging Face reads it: not given
    if value is None:
        raise SpeedplanInputError(f"{where}: missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise SpeedplanInputError(f"{where}: {key!r} must be an integer in 0..{MAX_COUNT:,}, got {value!r}")
    return value


def _optional(cfg: dict, key: str, where: str) -> int:
    """A count the config may leave out or set to null: 0 then."""
    return _int({key: cfg.get(key) or 0}, key, where)


# Families whose every checkpoint is a MoE: a config of one stating no experts is damaged, not dense.
_MOE_ONLY = ("olmoe", "granitemoe", "granitemoeshared", "mixtral", "phimoe", "qwen2_moe", "qwen3_moe")


def _published(value) -> float | None:
    """The shipped presets' published parameter count (a number), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _names(cfg: dict, key: str, where: str) -> list:
    value = cfg.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpeedplanInputError(f"{where}: {key!r} must be a list of names, got {value!r}")
    return value


def _short(value) -> str:
    """A config value as an error line quotes it: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expert_width(cfg: dict, intermediate: int, where: str) -> int:
    """The routed experts' MLP width: `moe_intermediate_size`, else `intermediate_size` where
    that is the experts' width (Mixtral, gpt-oss). Qwen-MoE, Qwen3-Next, DeepSeek and GLM give
    the dense MLP's width as intermediate_size (Qwen3-30B-A3B: 6144 dense, 768 per expert), so
    a config of theirs without moe_intermediate_size is refused, not priced with dense experts."""
    names = [str(cfg.get("model_type", ""))] + _names(cfg, "architectures", where)
    own_key = any(f in family_of(n) for n in names for f in _EXPERT_WIDTH_OWN_KEY)
    if own_key and cfg.get("moe_intermediate_size") is None:
        raise SpeedplanInputError(f"{where}: missing 'moe_intermediate_size' (the experts' width; in this family "
                                  f"intermediate_size, {intermediate}, is the dense MLP's)")
    width = _int(cfg, "moe_intermediate_size", where, intermediate)
    if width == 0:
        raise SpeedplanInputError(f"{where}: the experts' width ('moe_intermediate_size', else 'intermediate_size') "
                                  "must be > 0")
    return width


def _dense_mlp_layers(cfg: dict, layers: int, where: str) -> int:
    """How many of a MoE model's `layers` keep a dense MLP: DeepSeek's `first_k_dense_replace`
    leading layers, or the layers Qwen-MoE's `mlp_only_layers` lists (distinct indices below
    `layers`). Either must leave at least one MoE layer."""
    first = _optional(cfg, "first_k_dense_replace", where)
    if first >= layers:
        raise SpeedplanInputError(f"{where}: 'first_k_dense_replace' {first} leaves no MoE layer of the {layers} "
                                  "(num_hidden_layers)")
    listed = cfg.get("mlp_only_layers")
    # Qwen-MoE's decoder_sparse_step: layer i is MoE where (i + 1) % step == 0; DeepSeek-V2's moe_layer_freq:
    # where i >= first_k_dense_replace and i % freq == 0 (transformers' Qwen2MoeDecoderLayer, DeepseekV2DecoderLayer);
    # both had been read as MoE on every layer (decoder_sparse_step 2 gave 14.3B, not about 8.3B)
    deepseek = any(str(n).lower().startswith("deepseek") for n in [cfg.get("model_type", "")]  # whose moe_layer_freq
                   + (cfg.get("architectures") if isinstance(cfg.get("architectures"), list) else []))  # this reads
    step, freq = _int(cfg, "decoder_sparse_step", where, 1), _int(cfg, "moe_layer_freq", where, 1) if deepseek else 1
    if step < 1 or freq < 1:
        raise SpeedplanInputError(f"{where}: '{'decoder_sparse_step' if step < 1 else 'moe_layer_freq'}' must be >= 1")
    dense = {i for i in range(layers) if (i + 1) % step or i < first or i % freq}
    if listed is None or listed == []:
        if len(dense) == layers:
            raise SpeedplanInputError(f"{where}: 'decoder_sparse_step' {step} / 'moe_layer_freq' {freq} leave no MoE "
                                      f"layer of the {layers}")
        return len(dense)
    if not isinstance(listed, list) or len(set(map(repr, listed))) != len(listed) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in listed):
        raise SpeedplanInputError(f"{where}: 'mlp_only_layers' must list distinct layer indices in 0..{layers - 1} "
                                  f"(num_hidden_layers {layers}), got {_short(listed)}")
    if len(dense | set(listed)) == layers:
        raise SpeedplanInputError(f"{where}: 'mlp_only_layers' lists all {layers} layers: no MoE layer is left")
    return len(dense | set(listed))


def from_hf_config(cfg: dict, name: str = "custom", where: str | None = None) -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config.json dict (Llama/Qwen/Mistral/Mixtral/
    Qwen-MoE/DeepSeek-V3 families and anything with the standard keys)."""
    where = where or f"config for {name}"
    if not isinstance(cfg, dict):
        raise SpeedplanInputError(f"{where}: expected a JSON object")
    if "text_config" in cfg and "hidden_size" not in cfg:
        cfg = text_config(cfg, where)
    hidden = _int(cfg, "hidden_size", where)
    heads = _int(cfg, "num_attention_heads", where)
    if hidden == 0 or heads == 0:
        raise SpeedplanInputError(f"{where}: hidden_size and num_attention_heads must be > 0")
    kv_heads = _int(cfg, "num_key_value_heads", where, heads)
    if cfg.get("head_dim") is None and heads and hidden % heads and not cfg.get("kv_lora_rank"):  # as transformers
        raise SpeedplanInputError(f"{where}: 'hidden_size' {hidden} is not a multiple of 'num_attention_heads' {heads} "
                                  "and no 'head_dim' is given")
    head_dim = hidden // heads if cfg.get("head_dim") is None else cfg["head_dim"]  # null: the default; 0 is refused
    head_dim = _int({"head_dim": head_dim}, "head_dim", where)
    layers = _int(cfg, "num_hidden_layers", where)
    vocab = _int(cfg, "vocab_size", where)
    intermediate = _int(cfg, "intermediate_size", where, 0)
    arch_names = _names(cfg, "architectures", where)
    _check_family(cfg, arch_names, where)
    arch = " ".join(arch_names)

    moe = None
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):  # "" or a word is no count (0 and null: none)
        if cfg.get(key) not in (None, 0):
            _int(cfg, key, where)
    experts_key = next((k for k in ("n_routed_experts", "num_local_experts", "num_experts") if cfg.get(k)), None)
    n_experts = _int(cfg, experts_key, where) if experts_key else 0
    if not n_experts and str(cfg.get("model_type", "")) in _MOE_ONLY:
        raise SpeedplanInputError(f"{where}: model_type {cfg['model_type']!r} is a mixture of experts, but "
                                  "'num_experts' (or 'num_local_experts') gives none")
    if n_experts:
        top_k = _int(cfg, "num_experts_per_tok", where)
        expert_inter = _expert_width(cfg, intermediate, where)
        shared = _optional(cfg, "n_shared_experts", where)
        shared_inter = expert_inter if "n_shared_experts" in cfg else _int(cfg, "shared_expert_intermediate_size", where, 0)
        llama4 = str(cfg.get("model_type", "")).startswith("llama4")
        if llama4:  # every Llama-4 MoE layer adds one shared expert as wide as a routed one (Llama4TextMoe)
            shared_inter = expert_inter
        granite_shared = shared_mlp_width(cfg, where)  # GraniteMoeShared's ungated shared_mlp
        if granite_shared:
            shared_inter = granite_shared
        if shared_inter and not shared:
            shared = 1
        first_dense = _dense_mlp_layers(cfg, layers, where)
        step = _int(cfg, "interleave_moe_layer_step", where, 1) if llama4 else 1
        if step < 1:
            raise SpeedplanInputError(f"{where}: 'interleave_moe_layer_step' must be >= 1, got {step}")
        if step > 1:  # Llama-4 Maverick: every step-th layer is MoE, the others dense (order does not change cost)
            first_dense = layers - layers // step
        if llama4 and first_dense:
            intermediate = _int(cfg, "intermediate_size_mlp", where, intermediate)  # the dense layers' width
        moe = MoESpec(
            num_experts=int(n_experts),
            top_k=top_k,
            expert_intermediate=expert_inter,
            shared_experts=int(shared),
            shared_intermediate=shared_inter,
            first_dense_layers=int(first_dense),
            dense_intermediate=intermediate if first_dense else 0,
            shared_gate=bool(shared_inter) and "n_shared_experts" not in cfg and not llama4 and not granite_shared,
            expert_bits=expert_weight_bits(cfg.get("quantization_config")),
        )
        if not 0 < top_k <= moe.num_experts:
            raise SpeedplanInputError(f"{where}: num_experts_per_tok must be in 1..{moe.num_experts}")

    mla = None
    if cfg.get("kv_lora_rank"):
        mla = MLASpec(
            q_lora_rank=_optional(cfg, "q_lora_rank", where),  # null: no Q LoRA (DeepSeek-V2-Lite)
            kv_lora_rank=_int(cfg, "kv_lora_rank", where),
            qk_nope_head_dim=_int(cfg, "qk_nope_head_dim", where),
            qk_rope_head_dim=_int(cfg, "qk_rope_head_dim", where),
            v_head_dim=_int(cfg, "v_head_dim", where),
        )
        zero = [k for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim") if not cfg[k]]
        if zero:
            raise SpeedplanInputError(f"{where}: {zero[0]!r} must be > 0 (multi-head latent attention), got 0")
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim

    stored = _dtype(cfg, where)
    if stored == "fp32":
        stored = "bf16"  # served in bf16 unless the user says otherwise
    dtype = quantized_dtype(cfg.get("quantization_config"), stored, where, moe=moe is not None)
    check_layer_types(cfg, layers, where)
    check_bias_flags(cfg, where)
    window, window_layers, chunked = sliding_window(cfg, layers, where)
    max_context = _max_context(cfg, where)
    if window and max_context and window >= max_context:  # Phi-3.5-MoE's 131,072 at 131,072 positions: full attention
        window, window_layers, chunked = 0, 0, False
    linear = linear_attention(cfg, layers, where)
    try:
        return ModelSpec(
            name=name,
            hidden=hidden,
            layers=layers,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=intermediate,
            vocab=vocab,
            tie_embeddings=tied_embeddings(cfg, where),
            qk_norm="Qwen3" in arch,
            moe=moe,
            mla=mla,
            mtp_layers=(_optional(cfg, "num_nextn_predict_layers", where) or _optional(cfg, "mtp_num_hidden_layers", where)
                        or int(str(cfg.get("model_type", "")) == "qwen3_next")),  # its checkpoints ship one, unstated
            dtype=dtype,
            embed_bits=8 * DTYPE_BYTES[stored] if dtype == "fp8" and stored != "fp8" else 0,  # FP8: embeddings stay
            window=window,
            window_layers=window_layers,
            chunked=chunked,
            linear=linear,
            sparse=sparse_index(cfg, layers, where) if mla else None,
            attn_gate=cfg.get("attn_output_gate") is True or str(cfg.get("model_type", "")).startswith("qwen3_next"),
            source=str(cfg.get("_source", where)),
            published_params=_published(cfg.get("_published_params")),
            max_context=max_context,
            tp_gathers=tp_gathers(cfg, heads, kv_heads, head_dim),
        )
    except SpeedplanInputError as e:  # the spec's own checks ("heads (28) not a multiple of kv_heads (5)")
        raise SpeedplanInputError(f"{where}: {e} (config.json keys: hidden_size, num_attention_heads, "
                                  "num_key_value_heads, intermediate_size, ...)" if where not in str(e) else str(e)) from None


def _max_context(cfg: dict, where: str) -> int:
    """Tokens a sequence may hold: max_position_embeddings, extended by the config's rope
    scaling as vLLM reads it: YaRN holds original_max_position_embeddings × factor, llama3 and
    LongRoPE configs state the extended length itself, other scalings (linear, dynamic) multiply
    max_position_embeddings by their factor. 0 where the config says nothing (no limit).
    A rope_scaling that is not an object, a rope_type that is not text, a factor that is not a
    number > 0, or an extension past MAX_POSITIONS is refused: each was ignored (or cut to
    MAX_POSITIONS) without a word, and the context the serving files write follows from it."""
    most = cfg.get("max_position_embeddings")
    if most is None:
        return 0
    if isinstance(most, bool) or not isinstance(most, int) or not 0 <= most <= MAX_POSITIONS:
        raise SpeedplanInputError(f"{where}: 'max_position_embeddings' must be an integer in 0..{MAX_POSITIONS:,}, "
                                  f"got {_short(most)}")
    if most == 0:  # was read as "not stated": no limit
        raise SpeedplanInputError(f"{where}: 'max_position_embeddings' is 0, a model that holds no token; leave it "
                                  "out (or null) where the config states no limit")
    for key in ("rope_scaling", "rope_parameters"):  # transformers v5 names it rope_parameters
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            raise SpeedplanInputError(f"{where}: {key!r} must be an object (or null), got {_short(cfg[key])}")
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if not isinstance(rope, dict):
        return most
    kind = rope.get("rope_type") or rope.get("type")  # "" or null: the older key
    if kind is not None and not isinstance(kind, str):
        raise SpeedplanInputError(f"{where}: rope_scaling rope_type must be text, got {_short(kind)}")
    kind = kind or ""
    factor = rope.get("factor")
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))):
        raise SpeedplanInputError(f"{where}: rope_scaling factor must be a number, got {_short(factor)}")
    if isinstance(factor, (int, float)) and not finite(factor) or (finite(factor) and factor > MAX_POSITIONS):
        raise SpeedplanInputError(f"{where}: rope_scaling factor must be a finite number up to {MAX_POSITIONS:,}, got {_short(factor)}")
    if factor is not None and not factor > 0:
        raise SpeedplanInputError(f"{where}: rope_scaling factor must be > 0 (the context's scale), got {_short(factor)}")
    if kind in ("llama3", "longrope", "su") or factor is None or factor <= 1:
        return most
    if "gemma3" in str(cfg.get("model_type", "")):  # its max_position_embeddings already holds the factor (vLLM
        return most  # _get_and_verify_max_len skips gemma3's: google/gemma-3-12b-it holds 131,072, not 8 x that)
    original = rope.get("original_max_position_embeddings")
    if original is not None and (isinstance(original, bool) or not isinstance(original, int)
                                 or not 0 < original <= MAX_POSITIONS):
        raise SpeedplanInputError(f"{where}: rope_scaling original_max_position_embeddings must be an integer in "
                                  f"1..{MAX_POSITIONS:,}, got {_short(original)}")
    base = original if kind == "yarn" and original is not None else most
    if base * factor > MAX_POSITIONS:  # was cut to MAX_POSITIONS without a word
        raise SpeedplanInputError(f"{where}: rope_scaling extends the context to {base:,} × {factor:g} = "
                                  f"{base * factor:,.0f} tokens, above the {MAX_POSITIONS:,} a sequence may hold")
    return max(most, int(base * factor))


def check_preset_name(spec, where: str) -> None:
    """Refuse a config.json whose folder (or file stem) is a preset's name but which describes
    another model: it was planned and served as that preset (a Qwen2-7B config in a folder named
    llama-3.1-8b got Llama's published acceptance, EAGLE-3 head and launch line). A copy of the
    preset's own config is taken as the preset."""
    from speedplan.specs.model import _preset_model, preset_names

    if spec.name not in preset_names():
        return
    preset = _preset_model(spec.name)
    keys = ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab")
    differ = [k for k in keys if getattr(spec, k) != getattr(preset, k)]
    if differ or round(spec.param_count() / 1e9, 2) != round(preset.param_count() / 1e9, 2):
        k = differ[0] if differ else None
        what = (f"{k} {getattr(spec, k)} where the preset has {getattr(preset, k)}" if k else
                f"{billions(spec.param_count(), 2)} parameters where the preset has {billions(preset.param_count(), 2)}")
        raise SpeedplanInputError(f"{where}: named like the preset {spec.name} (its folder or file name) but "
                                  f"another model ({what}): rename the folder or file so it is not taken for the preset")
