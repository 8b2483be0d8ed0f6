"""How much of one GPU an engine lets weights and KV cache use: an engine profile's optional
"memory" object, beside its terms (not one of them: it prices no step, it decides which steps fit).

    "memory": {"share": 0.9, "of": "device", "source": "document: ..."}
    "memory": {"share": 0.9, "of": "free after weights", "source": "document: ..."}
    "memory": {"of": "device less reserve", "reserve": "sglang-0.5.23", "source": "document: ..."}

Engines define the budget differently. vLLM's gpu_memory_utilization is a share of the whole
device for weights, activations and KV cache ("device"); TensorRT-LLM's
KvCacheConfig.free_gpu_memory_fraction is a share of the memory still free once the weights are
loaded, given to the KV cache ("free after weights"). SGLang's mem_fraction_static is a share of
the device too, but its default is no fixed share: the device less a reserve SGLang computes
from the GPU's memory, the TP size and the software platform, scaled on ROCm by the context length
and attention backend ("device less reserve", the formula named by "reserve": `RESERVES`). A
profile without the object (older or user files) gets `DEFAULT_MEMORY`, 0.9 of the device, the
rule speedplan applied to every engine before profiles said.

What a rule reads of the launch besides the GPU's memory: `tp`, the hardware's `platform`
("cuda", "rocm" or "cpu": `specs.hardware.Hardware.platform`), the target's context length
`context_len` (tokens, `ModelSpec.max_context`; 0: not stated) and the target itself (`model`, a
`ModelSpec` or None), all keyword-only with defaults: a CUDA launch of a model of no stated context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from speedplan.specs.files import finite
from speedplan.errors import SpeedplanInputError
from speedplan.units import gigabytes

DEVICE = "device"
FREE_AFTER_WEIGHTS = "free after weights"
DEVICE_LESS_RESERVE = "device less reserve"
KINDS = (DEVICE, FREE_AFTER_WEIGHTS, DEVICE_LESS_RESERVE)
MIB = 2 ** 20  # bytes; SGLang counts GPU memory in MiB (nvidia-smi's memory.total)

# SGLang 0.5.23 (the wheel, sglang/srt/...): GPU memory classes in MiB, each with its defaults
# (chunked_prefill_size, decode CUDA graph max batch below TP 4, at TP 4 or more):
# arg_groups/memory_hook.py:89-170, handle_gpu_memory_settings.
_SGLANG_0_5_23_CLASSES = ((20 * 1024, 2048, 8, 8),  # :90-100, T4, 4080
                          (35 * 1024, 4096, 48, 160),  # :101-117, A10, 4090, 5090
                          (60 * 1024, 4096, 32, 160),  # :118-131, A100 40GB, L40(S)
                          (90 * 1024, 8192, 256, 512),  # :132-145, H100, A100 80GB
                          (160 * 1024, 8192, 256, 512),  # :146-159, H20, H200
                          (float("inf"), 16384, 512, 512))  # :160-170, B200, MI300


_CPU_GRAPH_BS = 32  # torch_compile_max_bs, its default: arg_groups/fields/exec_.py:698-701


def sglang_0_5_23_defaults(gpu_mib: float, tp: int = 1, platform: str = "cuda") -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA graph max batch) SGLang 0.5.23 defaults to on a GPU of
    `gpu_mib` MiB at TP `tp` (memory_hook.py:89-170; the max batch is lowered to
    --max-running-requests only where that is given, :182-188: not by default). The classes are
    the same on ROCm (get_device_memory_capacity reads rocminfo there instead of nvidia-smi,
    utils/common.py:990-1001 and :682-712); on a CPU the decode graph max batch is
    torch_compile_max_bs, 32 by default (memory_hook.py:201-231)."""
    for below, chunk, small_tp, large_tp in _SGLANG_0_5_23_CLASSES:
        if gpu_mib < below:
            return chunk, (_CPU_GRAPH_BS if platform == "cpu" else small_tp if tp < 4 else large_tp)
    raise AssertionError("unreachable: the last class has no bound")


def prefill_graph_sizes(max_bs: int) -> int:
    """How many prefill CUDA graphs SGLang 0.5.23 captures up to `max_bs` tokens:
    len(generate_prefill_cuda_graph_batch_sizes(max_bs)), arg_groups/cuda_graph_hook.py:480-497."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_bs + 1, 512)]
    return sum(s <= max_bs for s in sizes)


def sglang_0_5_23_reserve_mib(gpu_mib: float, tp: int = 1, platform: str = "cuda") -> float:
    """MiB SGLang 0.5.23 holds back from a GPU of `gpu_mib` MiB when --mem-fraction-static is not
    given, for a plain single-node launch (PP 1, no DP attention, no PD disaggregation, a model
    without MLA on CUDA, text only), at TP `tp` on `platform` (wheel sglang/srt/arg_groups/memory_hook.py):

        C, M = chunked_prefill_size, decode graph max batch (defaults by GPU class, :89-170)
        reserve = 512                                   :309  attention metadata + slack
                + 1.5 × max(C, 2048)                    :304-305, :310  activations
                + TP × PP / 8 × 1024                    :312  large parallel sizes (PP = 1)
                + 2 × M                                 :313, :364-368  decode CUDA graphs (on by
                                                        default everywhere: cuda_graph_config.py:149-151)
                + 8 × (prefill graphs up to C tokens)   :233-236, :384-386  prefill graphs
                                                        (breakable, on by default on CUDA only:
                                                        cuda_graph_config.py:119-123, 152-154;
                                                        is_cuda() is False on ROCm, utils/common.py:158-159)
        on a GPU above 60 GiB at least 10 GiB          :314-315
        mem_fraction_static = round((gpu_mib − reserve) / gpu_mib, 3)   :324-328
        then, on ROCm, × 0.85 (`sglang_0_5_23_scale`)

    The terms that do not apply to that launch: DP attention (:370-378), DeepEP all-to-all
    buffers (:317, :402-414), XPU (:321-322), a multimodal model (:331-337), post-capture KV
    sizing (:291-295, off by default: SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, environ.py:640), PD
    disaggregation (:298-303), MLA on CUDA (1.5 GiB for prefill graphs instead, :387-389: about
    1 GiB more on an H100; on ROCm no prefill graphs are captured, so MLA changes nothing), a CPU's
    memory per NUMA node (utils/common.py:911-927: speedplan takes the preset's whole memory).
    --speculative-algorithm does not change it: its hook, which caps running requests at 48, runs
    after this one (arg_groups/pipeline.py:218 and :306). cuda_graph_config.py is in
    model_executor/.

    Worked (GPU memory as the driver reports it: nvidia-smi's memory.total on CUDA, rocminfo's
    first pool on ROCm, 201,310,208 KB on an MI300X; what SGLang reads and speedplan's presets
    state; reserve in MiB → share):

        GPU (MiB)                TP 1            TP 2            TP 4            TP 8
        H100 SXM (81,559)        13,904 → 0.830  14,032 → 0.828  14,800 → 0.819  15,312 → 0.812
        A100 80 GB (81,920)      13,904 → 0.830  14,032 → 0.829  14,800 → 0.819  15,312 → 0.813
        H200 SXM (143,771)       13,904 → 0.903  14,032 → 0.902  14,800 → 0.897  15,312 → 0.893
        B200 (183,359)           26,832 → 0.854  26,960 → 0.853  27,216 → 0.852  27,728 → 0.849
        L40S (46,068)            7,248 → 0.843   7,376 → 0.840   7,888 → 0.829   8,400 → 0.818
        A100 40 GB (40,960)      7,248 → 0.823   7,376 → 0.820   7,888 → 0.807   8,400 → 0.795
        MI300X, ROCm (196,592)   26,240 → 0.867  26,368 → 0.866  26,624 → 0.865  27,136 → 0.862
          8,192-token model      0.867           0.866           0.865           0.862
          131,072-token model    0.737           0.736           0.735           0.733   (× 0.85)

    The 10 GiB floor binds on none of them. The MI300X's reserve has no prefill graphs: 16,384
    tokens and decode graphs to 512 as on a B200, 512 + 24,576 + 128 + 1,024 = 26,240 at TP 1.
    """
    chunk, decode_max_bs = sglang_0_5_23_defaults(gpu_mib, tp, platform)
    prefill_graphs = 8 * prefill_graph_sizes(chunk) if platform == "cuda" else 0
    reserve = 512 + 1.5 * max(chunk, 2048) + tp / 8 * 1024 + 2 * decode_max_bs + prefill_graphs
    return max(reserve, 10 * 1024) if gpu_mib > 60 * 1024 else reserve


def sglang_0_5_23_rocm_backend(model, tp: int = 1) -> str:
    """The attention backend SGLang 0.5.23 picks on ROCm when --attention-backend is not given, for
    `model` (a `ModelSpec`; None: an MHA/GQA model) at TP `tp`: get_default_attn_backend,
    arg_groups/model_override_base.py:277-351, filled in at attention_hook.py:120
    (overrides.py:1126-1140), after the per-model overrides (model_hook.py:233-237, pipeline.py:225).

    MHA and GQA models (Llama, Qwen3, Qwen3-Next, Mixtral): "aiter" (:326-327); GPT-OSS the same by
    its override (model_overrides/gpt_oss.py:38-39). MLA models: "aiter" where the KV heads per
    rank, num_key_value_heads // TP (configs/model_config.py:1700-1711), are 16 or 128, else
    "triton" (:340-346): DeepSeek-V3's 128 heads at TP 1 or 8, not at TP 2 or 4; GLM-4.7-Flash's
    20 at no TP. DSA models (an index_topk: DeepSeek-V3.2) take "dsa" on every platform
    (model_overrides/deepseek_v2.py:99-103, configs/model_config.py:191-212). Other per-model
    overrides that speedplan's presets do not meet (MiniMax-M3's triton on ROCm,
    model_overrides/minimax_m3.py:124-126) are not modelled: such a model is taken as MHA."""
    if model is None or getattr(model, "mla", None) is None:
        return "aiter"
    if getattr(model, "sparse", None) is not None:
        return "dsa"
    return "aiter" if max(1, int(model.kv_heads) // max(int(tp), 1)) in (16, 128) else "triton"


def sglang_0_5_23_scale(platform: str, context_len: int, tp: int = 1, model=None) -> tuple[float, str]:
    """(factor, why in words) SGLang 0.5.23 multiplies its default mem_fraction_static by, after
    rounding it (`sglang_0_5_23_reserve_mib`): 0.85 where the attention backend is aiter and the
    model's context length exceeds 8192 tokens (arg_groups/attention_hook.py:243-268; it runs after
    the memory hook, pipeline.py:218 and :242; the product is not rounded again), else 1. aiter is
    a ROCm backend, picked by default there only (`sglang_0_5_23_rocm_backend`). The length
    compared is ModelConfig.context_len: --context-length where given, else the model config's
    (max_position_embeddings, with rope scaling: configs/model_config.py:1291-1329,
    utils/hf_transformers/common.py:677-694), which `context_len` (the target's max_context) is.
    A --context-length of 8,192 or fewer, where a launch gives one, lifts the 0.85: the share taken
    here is then low by 15% (on the safe side); one above 8,192, as speedplan writes for a full
    context that does not fit (`serving.context`), keeps it."""
    if platform != "rocm" or not context_len > 8192 or sglang_0_5_23_rocm_backend(model, tp) != "aiter":
        return 1.0, ""
    return 0.85, (f"for aiter attention where the model's context length ({context_len:,} tokens, its config's, which a "
                  "launch's --context-length of 8,192 or fewer would lift) is above 8,192")


@dataclass(frozen=True)
class Reserve:
    """A formula by which an engine's default holds back part of the device: `mib(GPU memory in
    MiB, TP, platform)` → MiB held back, the rest a share of the device rounded as the engine
    rounds it (`digits`), then multiplied by `scale(platform, context length, TP, model)`'s
    (factor, why in words); `engine` and `version` whose default it is, `knob` the setting it sets."""

    engine: str
    version: str
    knob: str
    mib: Callable[[float, int, str], float]
    scale: Callable[..., tuple[float, str]] = lambda platform, context_len, tp, model: (1.0, "")
    digits: int = 3


RESERVES = {"sglang-0.5.23": Reserve("SGLang", "0.5.23", "mem_fraction_static", sglang_0_5_23_reserve_mib,
                                     sglang_0_5_23_scale)}
_ON = {"cuda": "", "rocm": " on ROCm", "cpu": " on a CPU"}  # how describe() names the platform


@dataclass(frozen=True)
class MemoryRule:
    """`share` (0 < share <= 1) of `of`: the whole device's memory ("device"), or the memory left
    free once the launch's weights are loaded ("free after weights"); or, of "device less
    reserve", the share of the device the formula `reserve` (a `RESERVES` key) leaves, which
    depends on the GPU, the TP size, the platform and (on ROCm) the model (`share` None);
    `source`: where it comes from."""

    share: float | None = 0.9
    of: str = DEVICE
    source: str = ("default: 0.9 of the device (vLLM's default gpu_memory_utilization; the engine profile "
                   "does not say)")
    reserve: str | None = None
    # Share of the full-attention layers' token pool the engine gives each sliding-window layer
    # (SGLang's swa_full_tokens_ratio, 0.8 by default): a sequence of C tokens then costs
    # window_pool x C on a sliding layer. None: a sliding layer holds only its window (vLLM's
    # hybrid KV cache manager frees what left it). `ModelSpec.kv_bytes_per_rank`.
    window_pool: float | None = None

    def __post_init__(self) -> None:
        """A rule built in Python (`dataclasses.replace(profile, memory=MemoryRule(...))`) is checked
        as a profile file's is (`memory_rule`): a share of None or "0.8", an unknown `of` or reserve
        failed deep in the planner (TypeError, KeyError, MemoryError). Of "device less reserve" the
        share is None: the reserve sets it (the field's default, 0.9, is taken for not given)."""
        if self.of not in KINDS:
            raise SpeedplanInputError(f"memory rule: of must be one of {', '.join(map(repr, KINDS))}, got {self.of!r:.60}")
        if self.window_pool is not None and (not finite(self.window_pool) or not 0 < self.window_pool <= 1):
            raise SpeedplanInputError(f"memory rule: window_pool must be a number in (0, 1] or absent, got "
                                      f"{self.window_pool!r:.60}")
        if not isinstance(self.source, str) or not self.source.strip():
            raise SpeedplanInputError(f"memory rule: source must be text saying where the share comes from, "
                                      f"got {self.source!r:.60}")
        if self.of == DEVICE_LESS_RESERVE:
            if not isinstance(self.reserve, str) or self.reserve not in RESERVES:
                raise SpeedplanInputError(f"memory rule: reserve must be one of {', '.join(map(repr, RESERVES))}, "
                                          f"got {self.reserve!r:.60}")
            if self.share not in (None, 0.9) or isinstance(self.share, bool):
                raise SpeedplanInputError(f"memory rule: of {self.of!r} takes no share (its reserve sets it), got "
                                          f"share {self.share!r:.60}")
            object.__setattr__(self, "share", None)
            return
        if self.reserve is not None:
            raise SpeedplanInputError(f"memory rule: only of {DEVICE_LESS_RESERVE!r} takes a reserve, not of {self.of!r}")
        if not finite(self.share) or not 0 < self.share <= 1:
            raise SpeedplanInputError(f"memory rule: share must be a number in (0, 1], got {self.share!r:.60}")

    def to_json(self) -> dict:
        pool = {} if self.window_pool is None else {"window_pool": self.window_pool}
        if self.of == DEVICE_LESS_RESERVE:
            return {"of": self.of, "reserve": self.reserve, **pool, "source": self.source}
        return {"share": self.share, "of": self.of, **pool, "source": self.source}

    def summary(self) -> str:
        """The rule in a few words, whatever the GPU, e.g. "0.9 of the device" or "the device less
        SGLang 0.5.23's reserve; sliding-window layers at 0.8 of the tokens" (`speedplan engines`)."""
        if self.of == DEVICE_LESS_RESERVE:
            r = RESERVES[self.reserve]
            text = f"the device less {r.engine} {r.version}'s reserve"
        else:
            text = f"{self.share:g} of the {'device' if self.of == DEVICE else 'memory free after the weights'}"
        return text + ("" if self.window_pool is None else f"; sliding-window layers at {self.window_pool:g} of the tokens")

    def _reserved(self, device_bytes: float, tp: int, platform: str) -> tuple[float, float]:
        """("device less reserve") MiB held back and the rounded share they leave, before any scale."""
        r, gpu_mib = RESERVES[self.reserve], device_bytes / MIB
        held = r.mib(gpu_mib, tp, platform)
        return held, max(round((gpu_mib - held) / gpu_mib, r.digits), 0.0)

    def device_share(self, device_bytes: float, tp: int = 1, *, platform: str = "cuda", context_len: int = 0,
                     model=None) -> float:
        """The share of the device weights + KV may use ("device" and "device less reserve")."""
        if self.of != DEVICE_LESS_RESERVE:
            return self.share
        factor, _ = RESERVES[self.reserve].scale(platform, context_len, tp, model)
        return self._reserved(device_bytes, tp, platform)[1] * factor

    def describe(self, device_bytes: float, weight_bytes: float, *, tp: int = 1, platform: str = "cuda",
                 context_len: int = 0, model=None) -> str:
        """The rule in words for one GPU, e.g. "90% of 85.5 GB", "the weights and 90% of the 18.9 GB
        free after them", "85.5 GB less SGLang's 14.5 GB reserve (mem_fraction_static 0.830, its
        0.5.23 default at TP 1)" (the reserve said is what the rounded share leaves, 1 − 0.830 of
        the device) or, on ROCm, "206.1 GB less SGLang's 27.4 GB reserve, × 0.85 for
        aiter attention at a context above 8,192 tokens (mem_fraction_static 0.867 × 0.85 = 0.737,
        its 0.5.23 default on ROCm at TP 1)"."""
        if self.of == DEVICE:
            return f"{self.share:.0%} of {gigabytes(device_bytes)}"
        if self.of == DEVICE_LESS_RESERVE:
            r = RESERVES[self.reserve]
            _, share = self._reserved(device_bytes, tp, platform)
            factor, why = r.scale(platform, context_len, tp, model)
            knob = f"{share:.{r.digits}f}" + (f" × {factor:g} = {share * factor:.{r.digits}f}" if factor != 1 else "")
            held = device_bytes * (1 - share)  # what the rounded knob holds back: the reserve as the launch applies it
            return (f"{gigabytes(device_bytes)} less {r.engine}'s {gigabytes(held)} reserve"
                    + (f", × {factor:g} {why}" if factor != 1 else "")
                    + f" ({r.knob} {knob}, its {r.version} default{_ON.get(platform, '')} at TP {tp})")
        if weight_bytes >= device_bytes:
            return f"the {gigabytes(device_bytes)} GPU, which the weights fill: nothing is free after them"
        return f"the weights and {self.share:.0%} of the {gigabytes(device_bytes - weight_bytes)} free after them"


DEFAULT_MEMORY = MemoryRule()


def usable_bytes(rule: MemoryRule, device_bytes: float, weight_bytes, *, tp: int = 1, platform: str = "cuda",
                 context_len: int = 0, model=None):
    """Bytes per GPU that weights + KV cache + drafter state may hold under `rule`.

    device_bytes: the GPU's memory (bytes); weight_bytes: every weight the launch loads on that GPU,
    target and drafter (bytes; a number or an array, one per row), i.e. the launch's memory at zero
    sequences; tp: the launch's tensor-parallel size; platform: the hardware's ("cuda", "rocm",
    "cpu"); context_len: the target's context length (tokens); model: the target `ModelSpec` (only
    "device less reserve" reads tp, platform, context_len and model).
    "device": share × device_bytes (weights ignored). "device less reserve": the share the reserve
    formula leaves × device_bytes (SGLang's KV pool is that share of the memory free before the
    model loads less what loading took: sglang/srt/mem_cache/kv_cache_configurator.py:3007 and
    :3038, the memory measured at distributed/bootstrap.py:207; speedplan takes that memory to be
    the device's). "free after weights": weight_bytes + share × (device_bytes − weight_bytes), at
    most device_bytes (weights that do not fit leave nothing). Activations, CUDA graphs and
    workspace, which an engine allocates before it sizes its KV cache from the free memory, are not
    modelled: under "free after weights" the result is an upper bound by share × that much."""
    if rule.of in (DEVICE, DEVICE_LESS_RESERVE):
        return device_bytes * rule.device_share(device_bytes, tp, platform=platform, context_len=context_len,
                                                model=model)
    w = np.asarray(weight_bytes, dtype=float)
    return np.minimum(w + rule.share * (device_bytes - w), device_bytes)


def memory_rule(data, where: str) -> MemoryRule:
    """The rule a profile's "memory" object states (None: absent, `DEFAULT_MEMORY`); a malformed
    one is a SpeedplanInputError in one line naming `where` (the file) and the key."""
    if data is None:
        return DEFAULT_MEMORY
    if not isinstance(data, dict):
        raise SpeedplanInputError(f"{where}: 'memory' must be an object like {{\"share\": 0.9, \"of\": \"device\", "
                                  f"\"source\": \"...\"}}, got {data!r}")
    unknown = sorted(set(data) - {"share", "of", "source", "reserve", "window_pool"})
    if unknown:
        raise SpeedplanInputError(f"{where}: memory.{unknown[0]}: unknown key; 'memory' takes share, of, source and "
                                  f"optionally window_pool (of {DEVICE_LESS_RESERVE!r}: reserve, of and source)")
    share, of, source, reserve = data.get("share"), data.get("of"), data.get("source"), data.get("reserve")
    pool = data.get("window_pool")
    if pool is not None and (not finite(pool) or not 0 < pool <= 1):
        raise SpeedplanInputError(f"{where}: memory.window_pool must be a number in (0, 1] (the share of the full "
                                  f"layers' token pool each sliding-window layer gets), got {pool!r:.60}")
    pool = None if pool is None else float(pool)
    if of not in KINDS:
        raise SpeedplanInputError(f"{where}: memory.of must be one of {', '.join(repr(k) for k in KINDS)}, got {of!r}")
    if of == DEVICE_LESS_RESERVE:
        if "share" in data:
            raise SpeedplanInputError(f"{where}: memory.share: of {of!r} takes no share, its reserve sets it; "
                                      f"drop share or use of 'device'")
        if not isinstance(reserve, str) or reserve not in RESERVES:
            raise SpeedplanInputError(f"{where}: memory.reserve must be one of {', '.join(map(repr, RESERVES))}, "
                                      f"got {reserve!r}")
    elif "reserve" in data:
        raise SpeedplanInputError(f"{where}: memory.reserve: only of {DEVICE_LESS_RESERVE!r} takes a reserve, "
                                  f"not of {of!r}")
    elif not finite(share) or not 0 < share <= 1:
        raise SpeedplanInputError(f"{where}: memory.share must be a number in (0, 1], got {share!r}")
    if not isinstance(source, str) or not source.strip():
        raise SpeedplanInputError(f"{where}: memory.source must be text saying where the share comes from, got {source!r}")
    if of == DEVICE_LESS_RESERVE:
        return MemoryRule(None, of, source, reserve, window_pool=pool)
    return MemoryRule(float(share), of, source, window_pool=pool)
