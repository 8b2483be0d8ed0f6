"""Constants and helpers shared by the engine memory-rule tests (test_engine_memory*.py)."""

import math

from speedplan.engine.memory_rule import MemoryRule
from speedplan.specs.hardware import get_hardware
from speedplan.specs.model import get_model

MODEL, GPU, CONTEXT = "qwen3-30b-a3b", "h100-sxm", 4096
# SGLang 0.5.23's default mem_fraction_static: the device less a reserve (memory_rule.py cites the
# wheel's lines; test_engine_memory_sglang.py works its figures by hand).
SGLANG = MemoryRule(None, "device less reserve", "x", "sglang-0.5.23")
MIB = 2 ** 20


def _most_plain(frame) -> int:
    """The largest swept batch at which plain decoding fits in memory."""
    plain = frame[(frame["mechanism"] == "none") & frame["fits_memory"]]
    return int(plain["batch"].max())


def _by_the_rules():
    """Plain-decoding sequences one H100 holds: vLLM's 0.9 of the device against TensorRT-LLM's
    weights + 0.9 of the memory free after them (bytes: weights 61.1 GB, device 85.5 GB, the
    81,559 MiB the driver reports; 0.40 GB a sequence: 39 and 54)."""
    target, device = get_model(MODEL), get_hardware(GPU).memory_bytes
    weights = target.weight_bytes()  # TP 1: one GPU holds every weight
    per_seq = float(target.kv_bytes_per_rank(CONTEXT + 1, 1))  # a plain step's KV: context + its one token
    return math.floor((0.9 * device - weights) / per_seq), math.floor(0.9 * (device - weights) / per_seq)
