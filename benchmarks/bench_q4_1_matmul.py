"""The Q4_1 kernel vs the fp32 oneDNN packed GEMM on SmolLM2-135M's matmul shapes.

For each row count M it times one forward's worth of matmuls (all 30 layers' wqkv, wo,
w_gate_up, w_down, real GGUF blocks) both ways and prints ms per forward and the effective
weight-read bandwidth (bytes of weights read / time: 0.625 B/weight for Q4_1, 4 B for fp32).
The crossover sets `kernels.q4.MAX_ROWS`.

    flock /tmp/speedplan-cpu.lock python benchmarks/bench_q4_1_matmul.py --rows 1 2 5 8 16 24 32
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch


def time_ms(fn, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 5, 8, 16, 24, 32, 64])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)

    from gguf import GGUFReader

    from speedplan.runtime.transformer import linear, pack_weight
    from speedplan.runtime.kernels.q4 import load_kernel
    from speedplan.runtime.io.weights import gguf_config, gguf_q4_1_blocks, load_gguf, smollm2_gguf_path

    path = smollm2_gguf_path()
    reader = GGUFReader(str(path))
    model = load_gguf(path, reader)
    blocks = gguf_q4_1_blocks(reader, gguf_config(reader))
    kernel = load_kernel()
    if kernel is None:
        raise SystemExit("kernel unavailable")
    mats = []
    for (layer, name), b in blocks.items():
        block = model.blocks[layer]
        w = getattr(block.attn if name in ("wqkv", "wo") else block.mlp, name).detach()
        mats.append((w, pack_weight(w), torch.from_numpy(b)))
    n_weights = sum(w.numel() for w, _, _ in mats)
    rows = []
    for m in args.rows:
        xs = [torch.randn(m, w.shape[1]) for w, _, _ in mats]

        def fp32():
            for x, (w, packed, _) in zip(xs, mats):
                linear(x, w, packed)

        def q4():
            for x, (w, _, b) in zip(xs, mats):
                kernel.matmul(x, b, w.shape[0])

        t_fp32, t_q4 = time_ms(fp32, args.repeats), time_ms(q4, args.repeats)
        rows.append({"rows": m, "fp32_ms": round(t_fp32, 2), "q4_1_ms": round(t_q4, 2),
                     "fp32_GBps": round(n_weights * 4 / t_fp32 / 1e6, 1),
                     "q4_1_GBps": round(n_weights * 0.625 / t_q4 / 1e6, 1),
                     "q4_1_speedup": round(t_fp32 / t_q4, 2)})
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"matrices": len(mats), "weights": n_weights, "isa": kernel.isa,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
