"""Model architecture, and the shipped presets (`speedplan.specs.hf_config` reads a Hugging Face config.json into one).
`ModelSpec` holds what the cost model needs: layer shapes (dense GQA, MoE, MLA, sliding or chunked windows, linear
and sparse attention), vocabulary, MTP layers. Parameter counts follow from the shapes (within 1% of the published
totals), and weight and KV bytes from the same numbers the op list uses."""

from __future__ import annotations

import numbers
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from speedplan.errors import SpeedplanInputError, clipped, did_you_mean
from speedplan.specs.files import is_a, read_json
from speedplan.specs.hardware import DTYPE_BYTES
from speedplan.specs.hub import hf_repo_of
from speedplan.specs.labels import attention_label  # noqa: F401  (reports import it from here)
from speedplan.specs.linear_attention import LinearAttentionSpec
from speedplan.specs.sparse_attention import SparseIndexSpec

PRESET_DIR = Path(__file__).parent / "presets" / "models"
DEFAULT_MODEL = "llama-3.1-8b"
MAX_POSITIONS = 2 ** 31  # tokens a sequence may hold: Llama-4 Scout's 10,485,760 is far below
MAX_MTP_LAYERS = 8  # MTP modules a model may have (the DeepSeek-V3, GLM-4.5 and Qwen3-Next checkpoints ship 1)


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
    sparse: SparseIndexSpec | None = None  # DeepSeek sparse attention: each query reads the indexer's top-k
    source: str = ""
    published_params: float | None = None
    max_context: int = 0  # tokens a sequence may hold (max_position_embeddings, with rope scaling); 0: not stated
    tp_gathers: tuple[int, ...] = ()  # per attention layer at TP > 1: each all-gather's width, elements a token
    embed_bits: int = 0  # bits per embedding and lm_head weight where wider than dtype (FP8 checkpoints: 16); 0: dtype

    def __post_init__(self) -> None:
        for label in ("hidden", "layers", "heads", "kv_heads", "head_dim", "vocab"):
            value = getattr(self, label)
            if not isinstance(value, int) or value <= 0:
                raise SpeedplanInputError(f"model {self.name}: {label} must be a positive integer, got {value!r}")
        if self.heads % self.kv_heads:
            raise SpeedplanInputError(f"model {self.name}: heads ({self.heads}) not a multiple of kv_heads ({self.kv_heads})")
        mtp = self.mtp_layers  # 1000 on a 32-layer Llama was priced as MTP (the checkpoints ship 1)
        if isinstance(mtp, bool) or not isinstance(mtp, int) or not 0 <= mtp <= min(self.layers, MAX_MTP_LAYERS):
            raise SpeedplanInputError(f"model {self.name}: {mtp!r:.20} MTP layers (num_nextn_predict_layers) on a model of "
                                      f"{self.layers}: speedplan takes 0..{MAX_MTP_LAYERS}, and no more than the layers")
        if not (isinstance(self.window, int) and isinstance(self.window_layers, int)
                and self.window >= 0 and self.window_layers >= 0):
            raise SpeedplanInputError(f"model {self.name}: sliding window and its layer count must be integers >= 0")
        top = self.max_context  # NaN, "131072" or 2**40 failed in serving.context (ValueError, TypeError, 8 GiB arrays)
        if isinstance(top, bool) or not isinstance(top, numbers.Integral) or not 0 <= top <= MAX_POSITIONS:
            raise SpeedplanInputError(f"model {self.name}: max_context must be an integer in 0..{MAX_POSITIONS:,} "
                                      f"(tokens; 0: not stated), got {top!r:.60}")
        object.__setattr__(self, "max_context", int(top))  # np.int64 from a notebook: the plain int outputs print
        if self.moe is None and self.intermediate <= 0:
            raise SpeedplanInputError(f"model {self.name}: intermediate_size must be > 0 (a dense model's MLP width; "
                                      "missing or 0 in its config)")
        if self.moe is not None and not 0 <= self.moe.first_dense_layers <= self.layers:
            raise SpeedplanInputError(f"model {self.name}: {self.moe.first_dense_layers} dense-MLP layers of "
                                      f"{self.layers} (first_k_dense_replace or mlp_only_layers)")

    # ---- shapes -------------------------------------------------------------------------
    @property
    def group_size(self) -> int:
        """G: query heads per KV head (for MLA: all heads share one latent)."""
        return self.heads if self.mla else self.heads // self.kv_heads

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
    def indexer_layers(self) -> int:
        """Layers that compute the sparse-attention indexer (and cache its keys)."""
        return min(self.sparse.indexer_layers, self.layers) if self.sparse else 0

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
        if self.sparse:
            n += self.indexer_layers * self.sparse.layer_params(self.hidden, self.mla.q_lora_rank if self.mla else 0)
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
        wide = self.embedding_params() * max(0.0, self.embed_bits / 8 - b)  # kept at the checkpoint's 16 bits
        if self.moe is None or not self.moe.expert_bits:
            return self.param_count() * b + wide
        routed = self.moe_layers * self.moe.num_experts * 3 * self.hidden * self.moe.expert_intermediate
        return self.param_count() * b - routed * (b - self.moe.expert_bits / 8) + wide

    @property
    def kv_dtype(self) -> str:  # engines' --kv-cache-dtype auto: the compute dtype, bf16 for FP8 weights
        return "bf16" if self.dtype == "fp8" else self.dtype

    def kv_bytes_per_token(self, dtype_bytes: int | None = None) -> float:
        """KV-cache bytes one token occupies over all layers (MLA: the compressed latent), in `kv_dtype`."""
        b = dtype_bytes or DTYPE_BYTES[self.kv_dtype]
        if self.mla:
            index_keys = self.indexer_layers * self.sparse.key_bytes if self.sparse else 0
            return self.attention_layers * (self.mla.kv_lora_rank + self.mla.qk_rope_head_dim) * b + index_keys
        return self.attention_layers * 2 * self.kv_heads * self.head_dim * b

    @property
    def local_layers(self) -> int:
        """Layers that attend within the sliding window (a spec cut to fewer layers keeps at most its own)."""
        return min(self.window_layers, self.attention_layers) if self.window else 0

    def priced_on(self, hw) -> "ModelSpec":
        """This model at the dtype `hw` prices: its own, or the hardware's default where `hw` has
        no peak for it (a bf16 checkpoint on an fp32-only CPU), as the sweep and calibrate price it."""
        from dataclasses import replace

        return self if self.dtype in hw.peak_flops_per_s else replace(self, dtype=hw.default_dtype)

    def kv_bytes_per_rank(self, tokens, tp: int, states=1, window_pool=None):
        """KV-cache bytes one sequence of `tokens` tokens (array or number) holds on one of `tp`
        ranks: full-attention layers keep every token, sliding-window layers at most `window`
        (vLLM's hybrid KV cache manager frees what left the window), or, with `window_pool` r (the
        engine memory rule's: SGLang sizes its sliding-window pool at r x the full layers' tokens,
        swa_full_tokens_ratio 0.8), r x `tokens` each, whatever the window,
        linear-attention layers `states` recurrent states whatever the length: one, or one per
        verified position while speculating (vLLM's mamba cache holds 1 + num_speculative_tokens
        blocks a request, SGLang an intermediate state per draft token)."""
        import numpy as np

        per_layer = self.kv_bytes_per_token_per_rank(tp) / max(self.attention_layers, 1)
        local = self.local_layers
        state = self.linear.layers * self.linear.state_bytes_per_rank(self.dtype_bytes, tp) if self.linear else 0.0
        held = np.minimum(tokens, self.window or 0) if window_pool is None else window_pool * np.asarray(tokens, float)
        return per_layer * ((self.attention_layers - local) * np.asarray(tokens, float)
                            + local * held) + state * np.asarray(states, float)

    def kv_bytes_per_token_per_rank(self, tp: int) -> float:
        """KV-cache bytes one token occupies on one of `tp` tensor-parallel ranks. Each rank
        holds ceil(kv_heads / tp) KV heads: with fewer KV heads than ranks, KV heads are
        replicated (as vLLM and SGLang do). MLA's compressed latent is replicated on every rank."""
        if self.mla:
            return self.kv_bytes_per_token()
        return self.kv_bytes_per_token() * -(-self.kv_heads // tp) / self.kv_heads

    def check_tp(self, tp: int, option: str = "--tp") -> None:
        """Refuse a tensor-parallel size vLLM refuses (vllm-project/vllm): query heads % tp
        (vllm/config/model.py verify_with_parallel_config, at 18ec66292536); KV heads split when
        kv_heads % tp == 0, replicated when tp % kv_heads == 0 (QKVParallelLinear), and each MLP
        width % tp (MergedColumnParallelLinear, RowParallelLinear: divide() asserts it), in
        vllm/model_executor/layers/linear.py at 0036d38de46c; the experts' width % tp (FusedMoE,
        vllm/model_executor/layers/fused_moe/layer.py at c439a1397901: speedplan prices no expert
        parallelism). MLA caches one latent on every rank: no KV-head condition."""
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise SpeedplanInputError(f"{option} must be a positive integer, got {tp!r}")
        if tp > self.heads:
            raise SpeedplanInputError(f"{option} {tp}: above {self.name}'s {self.heads} query heads")
        if self.heads % tp:
            raise SpeedplanInputError(f"{option} {tp}: {self.name}'s {self.heads} query heads do not split "
                                      f"evenly over {tp} GPUs")
        kv = self.kv_heads
        if not self.mla and (kv % tp if tp < kv else tp % kv):
            raise SpeedplanInputError(f"{option} {tp}: {self.name}'s {kv} KV heads neither split evenly over {tp} "
                                      f"GPUs nor replicate evenly onto them (vLLM needs {kv} % tp == 0 or "
                                      f"tp % {kv} == 0)")
        label = "intermediate_size" if self.moe is None else "dense layers' intermediate size"
        widths = [(label, self.dense_intermediate)] if self.dense_layers else []
        if self.moe is not None:
            widths += [("routed experts' intermediate size", self.moe.expert_intermediate),
                       ("shared experts' intermediate size", self.moe.shared_experts * self.moe.shared_intermediate)]
        if self.linear is not None:  # Gated DeltaNet: divide(num_v_heads, tp) and the key heads' share of
            # in_proj_qkvz (vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py at 00545a8acc22)
            widths += [("linear-attention key heads", self.linear.key_heads),
                       ("linear-attention value heads", self.linear.value_heads)]
        for label, width in widths:
            if width % tp:
                raise SpeedplanInputError(f"{option} {tp}: {self.name}'s {label} {width} does not split evenly "
                                          f"over {tp} GPUs (vLLM shards it by TP)")

    def check_context(self, contexts, option: str = "--context") -> None:
        """Refuse a context above what the model's config says it holds (`max_context`)."""
        over = [int(c) for c in contexts if self.max_context and c > self.max_context]
        if over:
            raise SpeedplanInputError(f"{option} {over[0]}: above {self.name}'s {self.max_context:,}-token context "
                                      "(max_position_embeddings; a config.json whose rope_scaling extends it prices more)")

    def serve_as(self) -> str:
        """What a serving engine loads: a preset's name (mapped to its Hugging Face repo), else the
        config.json's folder, absolute (a bare name is looked up as a repo), else the repo its `_source`
        names, else a placeholder for a JSON of another name (an engine reads config.json only)."""
        source = Path(self.source) if self.source else None
        if self.name in preset_names():
            return self.name
        if source is not None and source.name == "config.json" and source.is_file():
            return str(source.parent.resolve())
        return hf_repo_of(self.source) or (f"<checkpoint folder of {source.name}>" if source is not None and source.suffix
                                           == ".json" and source.is_file() else self.name)  # "fp8q" was a bare repo id

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
            "sparse_attention": (f"top-{self.sparse.topk}, indexer on {self.indexer_layers} of {self.layers} layers"
                                 if self.sparse else ""),
            "linear_attention": (f"{self.linear.layers} of {self.layers} layers, "
                                 f"{self.linear.layers * self.linear.state_bytes_per_rank(self.dtype_bytes, 1) / 2**20:.1f}"
                                 " MiB/seq" if self.linear else ""),
        }


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


@lru_cache(maxsize=64)
def _preset_model(name: str) -> ModelSpec:
    """A shipped preset, read once per process (package data does not change under us)."""
    from speedplan.specs.hf_config import from_hf_config  # it builds ModelSpecs: imported here, not at the top

    preset = PRESET_DIR / f"{name}.json"
    return from_hf_config(read_json(preset), name=name, where=str(preset))


def get_model(name_or_path: str) -> ModelSpec:
    """A preset name (`llama-3.1-8b`), a config.json path, or a folder holding config.json.
    A user's file is read at every call (it may have been edited since); presets once. A
    ModelSpec is returned as it is (as `sweep` takes one)."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    if not isinstance(name_or_path, (str, os.PathLike)):  # str(None) would be looked up as the model "None"
        raise SpeedplanInputError(f"model: expected a preset name, a config.json path or a ModelSpec, "
                                  f"got {name_or_path!r}")
    key = str(name_or_path).strip()
    if not key:
        raise SpeedplanInputError(f"model: empty name; presets: {', '.join(preset_names())} (or a config.json path)")
    if is_a(PRESET_DIR / f"{key.lower()}.json", "file"):  # is_a: a name too long for the OS is no file
        return _preset_model(key.lower())
    from speedplan.specs.hf_config import check_preset_name, from_hf_config

    path = Path(key)
    if is_a(path, "dir"):
        path = path / "config.json"
        if not path.exists():
            raise SpeedplanInputError(f"{key}: folder has no config.json")
    there = is_a(path, "any")  # a device too: read_json names it
    if path.suffix == ".json" or there:
        if not there:
            raise SpeedplanInputError(f"{clipped(key)}: no such file")
        name = path.parent.name if path.name == "config.json" else path.stem
        if path.name == "config.json" and path.parent.parent.name == "snapshots":  # the Hugging Face cache's layout,
            name = path.parent.parent.parent.name.split("--")[-1]  # models--ORG--NAME/snapshots/COMMIT: NAME, not COMMIT
        spec = from_hf_config(read_json(path), name=name or "custom", where=str(path))
        check_preset_name(spec, str(path))
        return spec
    preset = preset_named(key)
    if preset:  # a preset's instruct variant, or a Hugging Face repo id whose architecture a preset holds
        raise SpeedplanInputError(f"unknown model {key!r:.60}: its architecture is the preset {preset} (--model {preset}); "
                                  "a config.json path prices any other checkpoint")
    raise SpeedplanInputError(f"unknown model {key!r:.60}{did_you_mean(key, preset_names())}; presets: {', '.join(preset_names())} (or a config.json path)")


def preset_named(name: str) -> str | None:
    """The preset a name plainly names, itself or its instruct/chat variant: the preset's name (Qwen3-32B-Instruct) or
    its config.json's Hugging Face repo (meta-llama/Llama-3.1-8B-Instruct -> llama-3.1-8b); else None (a fine-tune, a path)."""
    def base(text: str) -> str:
        return re.sub(r"-(instruct|chat|it|base)(?=-|$)", "", text.strip().strip("/").lower())

    if (repo := name.strip().strip("/")).count("/") != 1:
        return base(repo) if "/" not in repo and base(repo) in preset_names() else None
    for preset in preset_names():
        match = re.search(r"huggingface\.co/([^/]+/[^/]+)/", _preset_model(preset).source or "")
        if match and base(match.group(1)) == base(repo):
            return preset
    return None


def __getattr__(name: str):
    """`speedplan.specs.model.from_hf_config`, where it lived before `speedplan.specs.hf_config`."""
    if name == "from_hf_config":
        from speedplan.specs.hf_config import from_hf_config

        return from_hf_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
