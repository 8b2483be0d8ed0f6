"""Linear-attention token mixers (Gated DeltaNet, as in Qwen3-Next and Qwen3.5): layers that
keep no KV cache but a fixed-size recurrent state per sequence.

One such layer, per token: in_proj_qkvz (hidden → 2·key_dim + 2·value_dim) and in_proj_ba
(hidden → 2·value_heads) GEMMs, a causal depthwise conv over q, k, v (`conv_kernel` taps), the
delta-rule update of a state of value_heads × key_head_dim × value_head_dim numbers, and
out_proj (value_dim → hidden). The state is what decoding reads and writes: about 1 MiB per
layer and sequence for Qwen3-Next in bf16, whatever the context. A speculative verify of
q tokens keeps the state after every token (the accepted count picks one), so it reads one
state and writes q: vLLM's mamba cache holds a slot per speculative position, SGLang an
intermediate state per draft token.
"""

from __future__ import annotations

from dataclasses import dataclass

from speedplan.errors import SpeedplanInputError


@dataclass(frozen=True)
class LinearAttentionSpec:
    """How many layers mix tokens with Gated DeltaNet, and their shapes (heads, dims: counts)."""

    layers: int
    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    state_bytes_per_value: int = 0  # 0: the model's dtype (vLLM's mamba_ssm_cache_dtype "auto")

    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """Channels the causal conv runs over: q, k and v."""
        return 2 * self.key_dim + self.value_dim

    def layer_params(self, hidden: int) -> int:
        """One layer's token mixer: projections in and out, conv taps, per-head decay and step
        parameters (A_log, dt_bias) and the gated RMSNorm's weight."""
        projections_in = hidden * (2 * self.key_dim + 2 * self.value_dim + 2 * self.value_heads)
        return (projections_in + self.conv_channels * self.conv_kernel + self.value_dim * hidden
                + 2 * self.value_heads + self.value_head_dim)

    def state_bytes_per_rank(self, dtype_bytes: int, tp: int) -> float:
        """Bytes of one layer's recurrent state for one sequence on one of `tp` ranks (the
        value heads split over ranks); the conv state, (conv_kernel − 1) columns of
        conv_channels, is counted with it."""
        heads = -(-self.value_heads // tp)
        value_bytes = self.state_bytes_per_value or dtype_bytes
        conv = -(-self.conv_channels // tp) * (self.conv_kernel - 1) * dtype_bytes
        return heads * self.key_head_dim * self.value_head_dim * value_bytes + conv


_STATE_DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}


def linear_attention(cfg: dict, layers: int, where: str) -> LinearAttentionSpec | None:
    """The Gated DeltaNet layers a config.json states, or None. Which layers: `layer_types`
    ("linear_attention"), else all but every `full_attention_interval`-th (Qwen3NextConfig's
    default, 4). Shapes: `linear_num_key_heads`, `linear_num_value_heads`,
    `linear_key_head_dim`, `linear_value_head_dim`, `linear_conv_kernel_dim`; the state's
    width from `mamba_ssm_dtype` where the config sets it (Qwen3.5), else the model's."""
    types = cfg.get("layer_types")
    if "linear_num_value_heads" not in cfg and not (isinstance(types, list) and "linear_attention" in types):
        return None
    if isinstance(types, list) and types:
        count = sum(1 for t in types if t == "linear_attention")
    else:
        interval = cfg.get("full_attention_interval", 4)
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise SpeedplanInputError(f"{where}: 'full_attention_interval' must be a positive integer, got {interval!r}")
        count = layers - layers // interval
    shapes = {}
    for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                "linear_conv_kernel_dim"):
        value = cfg.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1_000_000:
            raise SpeedplanInputError(f"{where}: linear attention needs '{key}' as a positive integer, got {value!r}")
        shapes[key] = value
    state_dtype = cfg.get("mamba_ssm_dtype")
    if state_dtype is not None and state_dtype not in _STATE_DTYPES:
        raise SpeedplanInputError(f"{where}: 'mamba_ssm_dtype' must be one of {', '.join(_STATE_DTYPES)}, "
                                  f"got {state_dtype!r}")
    if not count:
        return None
    return LinearAttentionSpec(
        layers=min(count, layers),
        key_heads=shapes["linear_num_key_heads"],
        value_heads=shapes["linear_num_value_heads"],
        key_head_dim=shapes["linear_key_head_dim"],
        value_head_dim=shapes["linear_value_head_dim"],
        conv_kernel=shapes["linear_conv_kernel_dim"],
        state_bytes_per_value=_STATE_DTYPES.get(state_dtype, 0),
    )
