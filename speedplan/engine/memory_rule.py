"""How much of one GPU an engine lets weights and KV cache use: an engine profile's optional
"memory" object, beside its terms (not one of them: it prices no step, it decides which steps fit).

    "memory": {"share": 0.9, "of": "device", "source": "document: ..."}
    "memory": {"share": 0.9, "of": "free after weights", "source": "document: ..."}

Engines define the budget differently. vLLM's gpu_memory_utilization is a share of the whole
device for weights, activations and KV cache ("device"); TensorRT-LLM's
KvCacheConfig.free_gpu_memory_fraction is a share of the memory still free once the weights are
loaded, given to the KV cache ("free after weights"). A profile without the object (older or
user files) gets `DEFAULT_MEMORY`, 0.9 of the device, the rule speedplan applied to every engine
before profiles said.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speedplan.specs.files import finite
from speedplan.errors import SpeedplanInputError

DEVICE = "device"
FREE_AFTER_WEIGHTS = "free after weights"
KINDS = (DEVICE, FREE_AFTER_WEIGHTS)


@dataclass(frozen=True)
class MemoryRule:
    """`share` (0 < share <= 1) of `of`: the whole device's memory ("device"), or the memory left
    free once the launch's weights are loaded ("free after weights"); `source`: where it comes from."""

    share: float = 0.9
    of: str = DEVICE
    source: str = ("default: 0.9 of the device (vLLM's default gpu_memory_utilization; the engine profile "
                   "does not say)")

    def to_json(self) -> dict:
        return {"share": self.share, "of": self.of, "source": self.source}

    def describe(self, device_bytes: float, weight_bytes: float) -> str:
        """The rule in words for one GPU, e.g. "90% of 80 GB" or "the weights and 90% of the 18.9 GB
        free after them"."""
        if self.of == DEVICE:
            return f"{self.share:.0%} of {device_bytes / 1e9:.0f} GB"
        if weight_bytes >= device_bytes:
            return f"the {device_bytes / 1e9:.0f} GB GPU, which the weights fill: nothing is free after them"
        return f"the weights and {self.share:.0%} of the {(device_bytes - weight_bytes) / 1e9:.1f} GB free after them"


DEFAULT_MEMORY = MemoryRule()


def usable_bytes(rule: MemoryRule, device_bytes: float, weight_bytes):
    """Bytes per GPU that weights + KV cache + drafter state may hold under `rule`.

    device_bytes: the GPU's memory (bytes); weight_bytes: every weight the launch loads on that GPU,
    target and drafter (bytes; a number or an array, one per row), i.e. the launch's memory at zero
    sequences. "device": share × device_bytes (weights ignored). "free after weights":
    weight_bytes + share × (device_bytes − weight_bytes), at most device_bytes (weights that do not fit
    leave nothing). Activations, CUDA graphs and workspace, which an engine allocates before it
    sizes its KV cache from the free memory, are not modelled: under "free after weights" the result
    is an upper bound by share × that much."""
    if rule.of == DEVICE:
        return device_bytes * rule.share
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
    unknown = sorted(set(data) - {"share", "of", "source"})
    if unknown:
        raise SpeedplanInputError(f"{where}: memory.{unknown[0]}: unknown key; 'memory' takes share, of and source")
    share, of, source = data.get("share"), data.get("of"), data.get("source")
    if not finite(share) or not 0 < share <= 1:
        raise SpeedplanInputError(f"{where}: memory.share must be a number in (0, 1], got {share!r}")
    if of not in KINDS:
        raise SpeedplanInputError(f"{where}: memory.of must be one of {', '.join(repr(k) for k in KINDS)}, got {of!r}")
    if not isinstance(source, str) or not source.strip():
        raise SpeedplanInputError(f"{where}: memory.source must be text saying where the share comes from, got {source!r}")
    return MemoryRule(float(share), of, source)
