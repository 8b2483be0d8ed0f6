"""Head configs of the published EAGLE and EAGLE-3 heads' shapes for Llama-3.1-8B (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B,
as in tests/plan/test_eagle_head_configs.py) that holds Llama-3.1's 131,072 positions, where the published one
holds 2,048: tests that price EAGLE or EAGLE-3 at long contexts for what they check (memory caps, SLO picks, figures,
SGLang's cap) use them, since past a drafter's positions vLLM's V1 runner drafts nothing and SGLang's drafter runs on for
nothing (plan/drafter_positions.py). They price as the default heads do (tests/plan/test_mechanisms.py: test_eagle3_head_shape_comes_from_its_config)."""

from __future__ import annotations

import json
import tempfile
from functools import lru_cache
from pathlib import Path

HEAD3 = {"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 32000, "hidden_size": 4096,
         "intermediate_size": 14336, "model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
         "num_hidden_layers": 1, "torch_dtype": "float16", "vocab_size": 128256, "max_position_embeddings": 131072}


# the EAGLE-1 head: one decoder layer of the target's shape (what `eagle` prices without a config)
HEAD1 = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336, "model_type": "llama",
         "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1, "torch_dtype": "float16",
         "vocab_size": 128256, "max_position_embeddings": 131072}


@lru_cache(maxsize=2)
def _config(family: str = "eagle3") -> str:
    path = Path(tempfile.mkdtemp(prefix="speedplan-long-head-")) / "config.json"
    path.write_text(json.dumps(HEAD3 if family == "eagle3" else HEAD1))
    return str(path)


def long_heads(*names: str) -> list[str]:
    """`eagle`, `eagle-tree`, `eagle3` and `eagle3-tree` specs that load a long head: ["eagle3:config=PATH", ...]."""
    return [f"{name}:config={_config('eagle3' if name.startswith('eagle3') else 'eagle')}" for name in names]
