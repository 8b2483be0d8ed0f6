"""A head config of the published EAGLE-3 head's shape for Llama-3.1-8B (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B,
as in tests/plan/test_eagle_head_configs.py) that holds Llama-3.1's 131,072 positions, where the published one
holds 2,048: tests that price EAGLE-3 at long contexts for what they check (memory caps, SLO picks, figures) use
it, since past a drafter's positions vLLM gains nothing (plan/drafter_positions.py). It prices as the default
head does (tests/plan/test_mechanisms.py: test_eagle3_head_shape_comes_from_its_config)."""

from __future__ import annotations

import json
import tempfile
from functools import lru_cache
from pathlib import Path

HEAD3 = {"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 32000, "hidden_size": 4096,
         "intermediate_size": 14336, "model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
         "num_hidden_layers": 1, "torch_dtype": "float16", "vocab_size": 128256, "max_position_embeddings": 131072}


@lru_cache(maxsize=1)
def _config() -> str:
    path = Path(tempfile.mkdtemp(prefix="speedplan-long-head-")) / "config.json"
    path.write_text(json.dumps(HEAD3))
    return str(path)


def long_heads(*names: str) -> list[str]:
    """`eagle3` and `eagle3-tree` specs that load the long head: ["eagle3:config=PATH", ...]."""
    return [f"{name}:config={_config()}" for name in names]
