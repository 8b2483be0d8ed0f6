"""Token mixing of the attention variants speedplan reads from config.json, against the same
model priced with full attention everywhere: time of one verify pass's attention (and
indexer, or linear-attention state traffic) and KV bytes per sequence, by context.

    python benchmarks/bench_attention_variants.py

Models: DeepSeek-V3.2 (sparse attention) against DeepSeek-V3 on H200, TP 8; Qwen3-Next
(Gated DeltaNet in 36 of 48 layers) against itself with full attention on H100, TP 4; Llama-4
Scout with 8192-token chunks against full attention on H100, TP 8. B = 16 sequences, 4 tokens
each (a verify pass of D = 3), priced with the shipped measured profiles.
"""

from __future__ import annotations

import json
from dataclasses import replace

from speedplan.cost.forward import forward_cost
from speedplan.cost.ops import load_cost_model
from speedplan.specs.hf_config import from_hf_config
from speedplan.specs.model import get_model

SCOUT = {"model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
         "num_attention_heads": 40, "num_hidden_layers": 48, "num_key_value_heads": 8, "head_dim": 128,
         "vocab_size": 202048, "num_local_experts": 16, "num_experts_per_tok": 1, "torch_dtype": "bfloat16"}


def main() -> None:
    v32, v3 = get_model("deepseek-v3.2"), get_model("deepseek-v3")
    qnext = get_model("qwen3-next-80b-a3b")
    scout = from_hf_config(json.loads(json.dumps({**SCOUT, "attention_chunk_size": 8192})), name="llama-4-scout")
    pairs = [("deepseek-v3.2 / deepseek-v3", v32, v3, "h200-sxm", 8),
             ("qwen3-next / as full attention", qnext, replace(qnext, linear=None), "h100-sxm", 4),
             ("llama-4-scout chunked / full", scout, replace(scout, window=0, window_layers=0), "h100-sxm", 8)]
    batch, q_len = 16, 4
    print(f"B = {batch}, {q_len} tokens per sequence; attention time and KV bytes per sequence, variant over full")
    print(f"{'model':34} {'context':>8} {'attention ms':>14} {'full ms':>9} {'ratio':>6} {'KV ratio':>9}")
    for label, variant, full, hardware, tp in pairs:
        cost = load_cost_model(hardware)
        for context in (1024, 4096, 32768, 131072):
            a = float(forward_cost(cost, variant, batch, q_len, context, tp).attention_s)
            b = float(forward_cost(cost, full, batch, q_len, context, tp).attention_s)
            kv = float(variant.kv_bytes_per_rank(context, tp)) / float(full.kv_bytes_per_rank(context, tp))
            print(f"{label:34} {context:>8} {a * 1e3:>14.2f} {b * 1e3:>9.2f} {a / b:>6.2f} {kv:>9.2f}")


if __name__ == "__main__":
    main()
