"""Model architecture from a Hugging Face config.json, and the shipped presets.

`ModelSpec` holds what the cost model needs: layer shapes (dense GQA, MoE, MLA), vocabulary,
MTP layers. Parameter counts are computed from the shapes (tests hold them within 1% of the
published totals), so weight bytes and KV bytes follow from the same numbers the op list uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.specs.config_families import expert_weight_bits, quantized_dtype, sliding_window
from speedplan.specs.files import read_json
from speedplan.specs.hardware import DTYPE_BYTES
from speedplan.specs.linear_attention import LinearAttentionSpec, linear_attention

PRESET_DIR = Path(__file__).parent / "presets" / "models"
DEFAULT_MODEL = "llama-3.1-8b"


@dataclass(frozen=True)
class MoESpec:
    """Routed experts (plus optional always-on shared experts) replacing the dense MLP."""

    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_experts: int = 0
    shared_intermediate: int = 0
    first_dense_layers: int = 0  # leading layers that keep a dense MLP (DeepSeek-V3: 3)
    dense_intermediate: int = 0
    shared_gate: bool = False  # Qwen-MoE's sigmoid gate on the shared expert (hidden → 1)
    expert_bits: float = 0.0  # bits per routed-expert weight when they ship narrower than the model (gpt-oss: MXFP4)


@dataclass(frozen=True)
class MLASpec:
    """DeepSeek multi-head latent attention: low-rank Q and a compressed, shared KV latent."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tie_embeddings: bool = False
    qk_norm: bool = False
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    mtp_layers: int = 0
    dtype: str = "bf16"
    window: int = 0  # sliding-window attention: tokens a local layer attends to (0: none)
    window_layers: int = 0  # how many layers attend within `window` (the rest attend to every token)
    chunked: bool = False  # the window is Llama-4's attention chunk (priced as a window of one chunk)
    linear: LinearAttentionSpec | None = None  # Gated DeltaNet layers (no KV cache; a state per sequence)
    attn_gate: bool = False  # q_proj also emits a sigmoid output gate (Qwen3-Next): twice its width
    source: str = ""
    published_params: float | None = None

    def __post_init__(self) -> None:
        for label in ("hidden", "layers", "heads", "kv_heads", "head_dim", "vocab"):
            value = getattr(self, label)
            if not isinstance(value, int) or value <= 0:
                raise SpeedplanInputError(f"model {self.name}: {label} must be a positive integer, got {value!r}")
        if self.heads % self.kv_heads:
            raise SpeedplanInputError(
                f"model {self.name}: heads ({self.heads}) not a multiple of kv_heads ({self.kv_heads})"
            )
        if not (isinstance(self.window, int) and isinstance(self.window_layers, int)
                and self.window >= 0 and self.window_layers >= 0):
            raise SpeedplanInputError(f"model {self.name}: sliding window and its layer count must be integers >= 0")
        if self.moe is None and self.intermediate <= 0:
            raise SpeedplanInputError(f"model {self.name}: intermediate_size must be > 0")

    # ---- shapes -------------------------------------------------------------------------
    @property
    def group_size(self) -> int:
        """G: query heads per KV head (for MLA: all heads share one latent)."""
        return self.heads if self.mla else self.heads // self.kv_heads

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and layer >= self.moe.first_dense_layers

    @property
    def moe_layers(self) -> int:
        return 0 if self.moe is None else self.layers - self.moe.first_dense_layers

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers

    @property
    def attention_layers(self) -> int:
        """Layers with softmax attention over a KV cache (the rest, if any, are linear attention)."""
        return self.layers - (min(self.linear.layers, self.layers) if self.linear else 0)

    @property
    def dense_intermediate(self) -> int:
        if self.moe is not None and self.moe.dense_intermediate:
            return self.moe.dense_intermediate
        return self.intermediate

    # ---- parameter counts ---------------------------------------------------------------
    def attention_params(self) -> int:
        h = self.hidden
        if self.mla:
            m = self.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            q = (h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * self.heads * qk) if m.q_lora_rank else h * self.heads * qk
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv += m.kv_lora_rank * self.heads * (m.qk_nope_head_dim + m.v_head_dim)
            return q + kv + self.heads * m.v_head_dim * h
        q = h * self.heads * self.head_dim * (2 if self.attn_gate else 1)
        kv = 2 * h * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * h
        return q + kv + o + (2 * self.head_dim if self.qk_norm else 0)

    def mlp_params(self, moe_layer: bool, active: bool = False) -> int:
        h = self.hidden
        if not moe_layer:
            return 3 * h * self.dense_intermediate
        m = self.moe
        experts = m.top_k if active else m.num_experts
        return (h * m.num_experts + experts * 3 * h * m.expert_intermediate
                + m.shared_experts * 3 * h * m.shared_intermediate + (h if m.shared_gate else 0))

    def layer_params(self, moe_layer: bool, active: bool = False) -> int:
        return self.attention_params() + self.mlp_params(moe_layer, active) + 2 * self.hidden

    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tie_embeddings else 2)

    def param_count(self, include_mtp: bool = False, active: bool = False) -> int:
        """Total (or, with active=True, per-token active) parameters."""
        n = self.embedding_params() + self.hidden
        n += self.dense_layers * self.layer_params(False, active)
        if self.moe is not None:
            n += self.moe_layers * self.layer_params(True, active)
        if self.linear:  # their token mixer replaces softmax attention
            n += self.linear.layers * (self.linear.layer_params(self.hidden) - self.attention_params())
        if include_mtp:
            n += self.mtp_layers * self.mtp_module_params(active)
        return n

    def mtp_module_params(self, active: bool = False) -> int:
        """One DeepSeek-V3 MTP module: two RMSNorms, the 2h→h projection, one decoder layer,
        and its own copies of embedding and output head as stored in the checkpoint."""
        h = self.hidden
        return 2 * h + 2 * h * h + self.layer_params(self.moe is not None, active) + h + 2 * self.vocab * h

    # ---- bytes --------------------------------------------------------------------------
    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def weight_bytes(self, dtype_bytes: int | None = None) -> float:
        b = dtype_bytes or self.dtype_bytes
        narrow = self.moe.expert_bits / 8 if self.moe is not None and self.moe.expert_bits else b
        experts = self.moe_layers * self.moe.num_experts * 3 * self.hidden * self.moe.expert_intermediate if self.moe else 0
        return self.param_count() * b - experts * (b - narrow)

    def kv_bytes_per_token(self, dtype_bytes: int | None = None) -> float:
        """KV-cache bytes one token occupies over all layers (MLA: the compressed latent)."""
        b = dtype_bytes or self.dtype_bytes
        if self.mla:
            return self.attention_layers * (self.mla.kv_lora_rank + self.mla.qk_rope_head_dim) * b
        return self.attention_layers * 2 * self.kv_heads * self.head_dim * b

    @property
    def local_layers(self) -> int:
        """Layers that attend within the sliding window (a spec cut to fewer layers keeps at most its own)."""
        return min(self.window_layers, self.attention_layers) if self.window else 0

    def kv_bytes_per_rank(self, tokens, tp: int):
        """KV-cache bytes one sequence of `tokens` tokens (array or number) holds on one of `tp`
        ranks: full-attention layers keep every token, sliding-window layers at most `window`
        (vLLM's hybrid KV cache manager and SGLang's SWA pool free what left the window),
        linear-attention layers their recurrent state whatever the length."""
        import numpy as np

        per_layer = self.kv_bytes_per_token_per_rank(tp) / max(self.attention_layers, 1)
        local = self.local_layers
        state = self.linear.layers * self.linear.state_bytes_per_rank(self.dtype_bytes, tp) if self.linear else 0.0
        return per_layer * ((self.attention_layers - local) * np.asarray(tokens, float)
                            + local * np.minimum(tokens, self.window or 0)) + state

    def kv_bytes_per_token_per_rank(self, tp: int) -> float:
        """KV-cache bytes one token occupies on one of `tp` tensor-parallel ranks. Each rank
        holds ceil(kv_heads / tp) KV heads: with fewer KV heads than ranks, KV heads are
        replicated (as vLLM and SGLang do). MLA's compressed latent is replicated on every rank."""
        if self.mla:
            return self.kv_bytes_per_token()
        return self.kv_bytes_per_token() * -(-self.kv_heads // tp) / self.kv_heads

    def check_tp(self, tp: int, option: str = "--tp") -> None:
        """Refuse a tensor-parallel size the engines refuse: query heads must split evenly."""
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise SpeedplanInputError(f"{option} must be a positive integer, got {tp!r}")
        if tp > self.heads:
            raise SpeedplanInputError(f"{option} {tp}: above {self.name}'s {self.heads} query heads")
        if self.heads % tp:
            raise SpeedplanInputError(f"{option} {tp}: {self.name}'s {self.heads} query heads do not split "
                                      f"evenly over {tp} GPUs")

    def summary(self) -> dict:
        return {
            "model": self.name,
            "params_b": round(self.param_count() / 1e9, 3),
            "active_params_b": round(self.param_count(active=True) / 1e9, 3),
            "layers": self.layers,
            "hidden": self.hidden,
            "heads": self.heads,
            "kv_heads": self.kv_heads if not self.mla else 1,
            "experts": (f"{self.moe.top_k}/{self.moe.num_experts}" + (" mxfp4" if self.moe.expert_bits else "")
                        if self.moe else ""),
            "mtp_layers": self.mtp_layers,
            "kv_kib_per_token": round(self.kv_bytes_per_token() / 1024, 1),
            "sliding_window": (f"{self.window}-token {'chunks' if self.chunked else 'window'} on "
                               f"{self.local_layers} of {self.layers} layers" if self.local_layers else ""),
            "linear_attention": (f"{self.linear.layers} of {self.layers} layers, "
                                 f"{self.linear.layers * self.linear.state_bytes_per_rank(self.dtype_bytes, 1) / 2**20:.1f}"
                                 " MiB/seq" if self.linear else ""),
        }


_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "fp8"}


MAX_COUNT = 10_000_000  # no dimension, vocabulary or layer count of a real model comes near this


def _int(cfg: dict, key: str, where: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise SpeedplanInputError(f"{where}: missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise SpeedplanInputError(f"{where}: {key!r} must be an integer in 0..{MAX_COUNT:,}, got {value!r}")
    return value


def _optional(cfg: dict, key: str, where: str) -> int:
    """A count the config may leave out or set to null: 0 then."""
    return _int({key: cfg.get(key) or 0}, key, where)


def _published(value) -> float | None:
    """The shipped presets' published parameter count (a number), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _names(cfg: dict, key: str, where: str) -> list:
    value = cfg.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpeedplanInputError(f"{where}: {key!r} must be a list of names, got {value!r}")
    return value


def from_hf_config(cfg: dict, name: str = "custom", where: str | None = None) -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config.json dict (Llama/Qwen/Mistral/Mixtral/
    Qwen-MoE/DeepSeek-V3 families and anything with the standard keys)."""
    where = where or f"config for {name}"
    if not isinstance(cfg, dict):
        raise SpeedplanInputError(f"{where}: expected a JSON object")
    if "text_config" in cfg and "hidden_size" not in cfg:
        cfg = cfg["text_config"]
        if not isinstance(cfg, dict):
            raise SpeedplanInputError(f"{where}: 'text_config' must be an object")
    hidden = _int(cfg, "hidden_size", where)
    heads = _int(cfg, "num_attention_heads", where)
    if hidden == 0 or heads == 0:
        raise SpeedplanInputError(f"{where}: hidden_size and num_attention_heads must be > 0")
    kv_heads = _int(cfg, "num_key_value_heads", where, heads)
    head_dim = cfg.get("head_dim") or hidden // heads
    head_dim = _int({"head_dim": head_dim}, "head_dim", where)
    layers = _int(cfg, "num_hidden_layers", where)
    vocab = _int(cfg, "vocab_size", where)
    intermediate = _int(cfg, "intermediate_size", where, 0)
    arch = " ".join(_names(cfg, "architectures", where))

    moe = None
    experts_key = next((k for k in ("n_routed_experts", "num_local_experts", "num_experts") if cfg.get(k)), None)
    n_experts = _int(cfg, experts_key, where) if experts_key else 0
    if n_experts:
        top_k = _int(cfg, "num_experts_per_tok", where)
        expert_inter = _int(cfg, "moe_intermediate_size", where, intermediate)
        shared = _optional(cfg, "n_shared_experts", where)
        shared_inter = expert_inter if "n_shared_experts" in cfg else _int(cfg, "shared_expert_intermediate_size", where, 0)
        llama4 = str(cfg.get("model_type", "")).startswith("llama4")
        if llama4:  # every Llama-4 MoE layer adds one shared expert as wide as a routed one (Llama4TextMoe)
            shared_inter = expert_inter
        if shared_inter and not shared:
            shared = 1
        first_dense = _optional(cfg, "first_k_dense_replace", where)
        if cfg.get("mlp_only_layers"):
            if not isinstance(cfg["mlp_only_layers"], list):
                raise SpeedplanInputError(f"{where}: 'mlp_only_layers' must be a list of layer indices")
            first_dense = len(cfg["mlp_only_layers"])
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
            shared_gate=bool(shared_inter) and "n_shared_experts" not in cfg and not llama4,
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
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim

    dtype = _DTYPES.get(str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"), "bf16")
    if dtype == "fp32":
        dtype = "bf16"  # served in bf16 unless the user says otherwise
    dtype = quantized_dtype(cfg.get("quantization_config"), dtype, where, moe=moe is not None)
    window, window_layers = sliding_window(cfg, layers, where)
    linear = linear_attention(cfg, layers, where)
    return ModelSpec(
        name=name,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        vocab=vocab,
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qk_norm="Qwen3" in arch,
        moe=moe,
        mla=mla,
        mtp_layers=(_optional(cfg, "num_nextn_predict_layers", where) or _optional(cfg, "mtp_num_hidden_layers", where)
                    or int(str(cfg.get("model_type", "")) == "qwen3_next")),  # its checkpoints ship one, unstated
        dtype=dtype,
        window=window,
        window_layers=window_layers,
        chunked=bool(window) and cfg.get("sliding_window") in (None, False),
        linear=linear,
        attn_gate=cfg.get("attn_output_gate") is True or str(cfg.get("model_type", "")).startswith("qwen3_next"),
        source=str(cfg.get("_source", where)),
        published_params=_published(cfg.get("_published_params")),
    )


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


@lru_cache(maxsize=64)
def get_model(name_or_path: str) -> ModelSpec:
    """A preset name (`llama-3.1-8b`), a config.json path, or a folder holding config.json."""
    key = str(name_or_path).strip()
    preset = PRESET_DIR / f"{key.lower()}.json"
    if preset.exists():
        return from_hf_config(read_json(preset), name=key.lower(), where=str(preset))
    path = Path(key)
    if path.is_dir():
        path = path / "config.json"
        if not path.exists():
            raise SpeedplanInputError(f"{key}: folder has no config.json")
    if path.suffix == ".json" or path.exists():
        if not path.exists():
            raise SpeedplanInputError(f"{key}: no such file")
        name = path.parent.name if path.name == "config.json" else path.stem
        return from_hf_config(read_json(path), name=name or "custom", where=str(path))
    raise SpeedplanInputError(f"unknown model {key!r}; presets: {', '.join(preset_names())} (or a config.json path)")
