"""The H200 verify step (reports/validation-h200) priced from the runtime's own kernel list.

`forward_cost` prices a forward as engines run it: GEMMs, attention and four fused elementwise
kernels per decoder layer. `speedplan.runtime` is plain PyTorch and launches more, smaller
kernels (counted from `runtime/transformer.py`, one per aten op that writes memory):

per decoder layer: 2 RMSNorms (2·T·h·b bytes each); rotary on Q and K: x·cos, −x2, cat, ·sin,
+ (2, 1, 2, 2, 3 · T·(H+Hkv)·Dh·b); 2 KV-cache writes (2·T·Hkv·Dh·b each); the attention
output made contiguous (2·T·H·Dh·b); 2 residual adds (3·T·h·b each); SiLU(gate), · up
(2 and 3 · T·I·b).
per step: 4 small kernels for the new tokens' slots (T·8 bytes); the mask: arange(S) (S·8),
slot − length (3·B·S·8), ≤ offset (B·S·8 + B·q·S); RoPE cos and sin rows (2·T·Dh·b each);
embedding and final RMSNorm (2·T·h·b each); logits to fp32 (T·V·(b+4)).

T = B·q tokens, b bytes per element, S the slots a graph-captured step attends over (context
+ q + 1 rounded up to 16: `gpu_timing.attended`). Two ways to price those kernels, nothing fitted:

  table  each kernel from the measured profile's elementwise table at its bytes
  floor  each kernel at max(the graph launch floor, bytes / the table's streaming bandwidth)

    python benchmarks/bench_runtime_kernels_h200.py

prints each way's step-time errors against the measured verify steps, next to forward_cost's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from speedplan.cost.forward import attention_shape, forward_cost
from speedplan.cost.ops import load_cost_model
from speedplan.specs.model import get_model
from speedplan.validate.gpu_timing import attended

ROOT = Path(__file__).resolve().parents[1] / "reports" / "validation-h200"


def kernel_bytes(spec, batch: int, q_len: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    """(bytes of each elementwise kernel of one decoder layer, of each once-per-step kernel)."""
    b, t = spec.dtype_bytes, batch * q_len
    heads, kv_heads, dh = attention_shape(spec)
    h, qk, inter = spec.hidden, (heads + kv_heads) * dh, spec.dense_intermediate
    layer = [2 * t * h * b, 2 * t * h * b, 2 * t * qk * b, t * qk * b, 2 * t * qk * b, 2 * t * qk * b,
             3 * t * qk * b, 2 * t * kv_heads * dh * b, 2 * t * kv_heads * dh * b, 2 * t * heads * dh * b,
             3 * t * h * b, 3 * t * h * b, 2 * t * inter * b, 3 * t * inter * b]
    step = [8.0 * t] * 4 + [8.0 * span, 3 * 8.0 * batch * span, 8.0 * batch * span + t * span,
                            2 * t * dh * b, 2 * t * dh * b, 2 * t * h * b, 2 * t * h * b, t * spec.vocab * (b + 4)]
    return np.asarray(layer, float), np.asarray(step, float)


def main() -> None:
    table = pd.read_csv(ROOT / "verify_timing.csv")
    profile = ROOT / "profile-measured"
    cost = load_cost_model(profile)
    spec = replace(get_model("llama-3.1-8b"), dtype="bf16")
    ew = pd.read_csv(profile / "elementwise.csv")
    big = ew[ew.nbytes >= 2**28]
    bandwidth = float((big.nbytes / big.latency_us).median()) * 1e6  # bytes/s, streaming
    floors = pd.read_csv(profile / "floors.csv")
    floor_us = float(floors[floors.graph == 1].latency_us.iloc[0])
    print(f"elementwise streaming bandwidth {bandwidth / 1e9:.0f} GB/s; graph launch floor {floor_us:.2f} us")
    ways = {"forward_cost (4 fused kernels per layer)": [], "runtime kernels, table": [], "runtime kernels, floor": []}
    for r in table.itertuples():
        q = int(r.draft_len) + 1
        span = attended(int(r.context), q, "cuda")  # the slots the timed step read
        fc = forward_cost(cost, spec, int(r.batch), q, span - q)
        kernels_s = float(fc.gemm_s + fc.attention_s + fc.comm_s)
        layer, step = kernel_bytes(spec, int(r.batch), q, span)
        table_us = lambda x: float(np.sum(cost.elementwise(x, "bf16").latency_us))
        floor_way = lambda x: float(np.sum(np.maximum(floor_us, x / bandwidth * 1e6)))
        ways["forward_cost (4 fused kernels per layer)"].append(float(fc.total_s))
        for name, price in (("runtime kernels, table", table_us), ("runtime kernels, floor", floor_way)):
            ways[name].append(kernels_s + (spec.layers * price(layer) + price(step)) * 1e-6)
    measured = table.meas_t_verify.to_numpy()
    for name, pred in ways.items():
        ratio = np.asarray(pred) / measured
        err = np.abs(ratio - 1)
        print(f"{name:42s} median {np.median(err):6.1%}  p90 {np.percentile(err, 90):6.1%}  "
              f"predicted/measured {ratio.min():.2f}-{ratio.max():.2f}")


if __name__ == "__main__":
    main()
