"""Plain decoding at B=1 vs the sum of its own ops' measured latencies (overhead ratio).

Times a steady-state decode step of the runtime (median of `--steps` steps at a context of
`--context` tokens), then times every op that step runs on its own: each op kind is run over
all layers' distinct weights in a row (so weights come from memory, not cache, as in the real
step), median of `--repeats`, divided per call. Ratio = step / sum of ops; target <= 1.25.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_runtime_overhead.py
    (--weights random:smollm2-135m needs no GGUF; the timings depend on shapes only)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F


def median_s(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", default="smollm2")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)

    from speedplan.runtime.api import load_target
    from speedplan.runtime.transformer import apply_rope, linear, rms_norm

    model = load_target(args.weights).model
    cfg = model.cfg
    with torch.inference_mode():
        cache = model.new_cache(1, args.context + args.steps + 8)
        model(torch.randint(0, cfg.vocab, (1, args.context)), cache)
        cache.commit(torch.tensor([0]), torch.tensor([args.context]))
        tok = torch.tensor([[17]])
        step_times = []
        for _ in range(args.steps):  # the same work as speculative_step with no drafter
            t0 = time.perf_counter()
            h = model(tok, cache, torch.tensor([0]))
            tok = model.logits(h).argmax(-1)
            cache.commit(torch.tensor([0]), torch.tensor([1]))
            int(tok)
            step_times.append(time.perf_counter() - t0)
        step_s = statistics.median(step_times[3:])

        x = torch.randn(1, 1, cfg.hidden)
        xi = torch.randn(1, 1, cfg.intermediate)
        xq = torch.randn(1, 1, cfg.heads * cfg.head_dim)
        blocks = model.blocks
        L = cfg.layers
        cos, sin = model.rope_cos[:1][None, :, None], model.rope_sin[:1][None, :, None]
        q4 = torch.randn(1, 1, cfg.heads, cfg.head_dim)
        k4 = torch.randn(1, 1, cfg.kv_heads, cfg.head_dim)
        qk4 = torch.randn(1, 1, cfg.heads + cfg.kv_heads, cfg.head_dim)
        keys = torch.randn(1, cfg.kv_heads, args.context + 1, cfg.head_dim)
        ops = {  # name: (seconds per call, calls per step)
            "qkv_linear": (median_s(lambda: [linear(x, b.attn.wqkv, b.attn.packed["wqkv"]) for b in blocks], args.repeats) / L, L),
            "o_linear": (median_s(lambda: [linear(xq, b.attn.wo, b.attn.packed["wo"]) for b in blocks], args.repeats) / L, L),
            "gate_up_linear": (median_s(lambda: [linear(x, b.mlp.w_gate_up, b.mlp.packed["w_gate_up"]) for b in blocks], args.repeats) / L, L),
            "down_linear": (median_s(lambda: [linear(xi, b.mlp.w_down, b.mlp.packed["w_down"]) for b in blocks], args.repeats) / L, L),
            "lm_head": (median_s(lambda: model.logits(x), args.repeats), 1),
            "attention": (median_s(lambda: F.scaled_dot_product_attention(q4.transpose(1, 2), keys, keys, enable_gqa=True), args.repeats), L),
            "rope_qk": (median_s(lambda: apply_rope(qk4, cos, sin), args.repeats), L),
            "kv_write": (median_s(lambda: cache.k[0][torch.tensor([[0]]), :, torch.tensor([[5]])].copy_(k4), args.repeats), 2 * L),
            "rms_norm": (median_s(lambda: rms_norm(x, model.norm, cfg.norm_eps), args.repeats), 2 * L + 1),
            "silu_mul": (median_s(lambda: F.silu(xi) * xi, args.repeats), L),
            "residual_add": (median_s(lambda: x + x, args.repeats), 2 * L),
            "embedding+argmax": (median_s(lambda: (F.embedding(tok, model.embed), torch.randn(1, cfg.vocab).argmax(-1)), args.repeats), 1),
        }
    total_s = sum(t * n for t, n in ops.values())
    print(json.dumps({
        "weights": args.weights, "context": args.context, "threads": torch.get_num_threads(),
        "step_ms": round(step_s * 1e3, 2), "tokens_per_s": round(1 / step_s, 1),
        "sum_of_ops_ms": round(total_s * 1e3, 2), "overhead_ratio": round(step_s / total_s, 3),
        "ops_ms_per_step": {k: round(t * n * 1e3, 3) for k, (t, n) in ops.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
