"""Does a CPU profile price the runtime's own GEMMs? Profile lookup / runtime time, per shape and M.

Times each linear layer kind of `speedplan.runtime` (fused QKV, O, fused gate/up, down: each
over all 30 layers' distinct weights in a row, so weights come from memory as in a real step;
lm_head on its own) at M tokens, median of `--repeats`, per call; then asks each profile for
the same (M, N, K). A ratio of 1.00 means the profile prices that op as the runtime runs it,
with the runtime's packed weights, in the runtime's process, at this moment.

Then one verify forward (`--forward B,T` at `--context`): its end-to-end time (forward + logits,
median of 8), the sum of its ops under the torch profiler (linear layers, attention, the rest),
and each profile's prices for the same forward (no host overhead).

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_profile_vs_runtime_gemm.py profiles/cpu-local [OTHER ...]

(--weights random:smollm2-135m needs no GGUF; the timings depend on shapes only.)
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from bench_runtime_overhead import median_s  # this folder is on sys.path when run as a script

M_VALUES = [1, 2, 4, 8, 16, 32, 64, 128]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profiles", nargs="+", help="profile folders (or presets) to price with")
    ap.add_argument("--weights", default="smollm2")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--forward", default="16,8", help="B,T of the verify forward to break down")
    ap.add_argument("--context", type=int, default=200, help="cached tokens per sequence of that forward")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from speedplan.cost.ops import load_cost_model
    from speedplan.runtime.api import load_target
    from speedplan.runtime.transformer import linear

    costs = {p: load_cost_model(p) for p in args.profiles}
    model = load_target(args.weights).model
    cfg, blocks = model.cfg, model.blocks
    kinds = {  # name: (weights of one block -> (w, packed), K)
        "qkv": (lambda b: (b.attn.wqkv, b.attn.packed["wqkv"]), cfg.hidden),
        "o": (lambda b: (b.attn.wo, b.attn.packed["wo"]), cfg.heads * cfg.head_dim),
        "gate_up": (lambda b: (b.mlp.w_gate_up, b.mlp.packed["w_gate_up"]), cfg.hidden),
        "down": (lambda b: (b.mlp.w_down, b.mlp.packed["w_down"]), cfg.intermediate),
    }
    print(f"profile lookup / runtime time ({' / '.join(args.profiles)}); runtime time in us per call")
    ratios: dict[str, list[float]] = {p: [] for p in args.profiles}
    with torch.inference_mode():
        for m in M_VALUES:
            cells = []
            for name, (weights, k) in kinds.items():
                x = torch.randn(1, m, k)
                t_us = median_s(lambda: [linear(x, *weights(b)) for b in blocks], args.repeats) / len(blocks) * 1e6
                cells.append((name, weights(blocks[0])[0].shape[0], k, t_us))
            x = torch.randn(1, m, cfg.hidden)
            cells.append(("lm_head", cfg.vocab, cfg.hidden, median_s(lambda: model.logits(x), args.repeats) * 1e6))
            row = []
            for name, n, k, t_us in cells:
                preds = [float(np.ravel(c.gemm(np.array([m]), np.array([n]), k, "fp32").latency_us)[0]) / t_us
                         for c in costs.values()]
                for p, r in zip(args.profiles, preds):
                    ratios[p].append(r)
                row.append(f"{name} {t_us:8.1f} " + "/".join(f"{r:.2f}" for r in preds))
            print(f"M={m:<4d}" + " | ".join(row), flush=True)
    for p, r in ratios.items():
        a = np.asarray(r)
        print(f"{p}: median ratio {np.median(a):.3f}, |ratio - 1| median {np.median(abs(a - 1)):.3f}, "
              f"range {a.min():.2f}-{a.max():.2f} over {len(a)} ops")
    batch, tokens = (int(v) for v in args.forward.split(","))
    forward_breakdown(model, costs, batch, tokens, args.context)


def forward_breakdown(model, costs: dict, batch: int, tokens: int, context: int) -> None:
    """Print one verify forward's wall time, its ops' time under the profiler, and each
    profile's prices for it (milliseconds)."""
    from dataclasses import replace

    from torch.profiler import ProfilerActivity, profile

    from speedplan.cost.forward import forward_cost
    from speedplan.specs.model import get_model

    with torch.inference_mode():
        cache = model.new_cache(batch, context + tokens + 8)
        model(torch.randint(0, model.cfg.vocab, (batch, context)), cache)
        cache.commit(torch.arange(batch), torch.full((batch,), context))
        inputs, rows = torch.randint(0, model.cfg.vocab, (batch, tokens)), torch.arange(batch)
        step = lambda: model.logits(model(inputs, cache, rows))  # noqa: E731 (the cache is not committed)
        wall_ms = median_s(step, 8) * 1e3
        runs = 4
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(runs):
                step()
    ops, other = {"linear": 0.0, "attention": 0.0, "other": 0.0}, {}
    for e in prof.key_averages():
        kind = ("linear" if "linear" in e.key else "attention" if "attention" in e.key else "other")
        ops[kind] += e.self_cpu_time_total / 1e3 / runs
        if kind == "other":
            other[e.key] = e.self_cpu_time_total / 1e3 / runs
    print(f"forward B={batch} T={tokens} context={context}: {wall_ms:.1f} ms end to end; ops under the "
          f"profiler {sum(ops.values()):.1f} ms (" + ", ".join(f"{k} {v:.1f}" for k, v in ops.items()) + ")")
    top = sorted(other.items(), key=lambda kv: -kv[1])[:6]
    print("  largest other ops: " + ", ".join(f"{k} {v:.1f}" for k, v in top))
    target = replace(get_model("smollm2-135m"), dtype="fp32")
    for name, cost in costs.items():
        f = forward_cost(cost, target, np.array([batch]), np.array([tokens]), np.array([context]))
        print(f"  priced by {name}: {f.total_s[0] * 1e3:.1f} ms (GEMM {f.gemm_s[0] * 1e3:.1f}, "
              f"attention {f.attention_s[0] * 1e3:.1f}, elementwise {f.elementwise_s[0] * 1e3:.1f})")


if __name__ == "__main__":
    main()
