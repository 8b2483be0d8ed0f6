"""How each shipped engine profile makes the speculative speedup fall with the batch size.

    python benchmarks/bench_engine_shape.py

Llama-3.1-8B on the measured H100 profile, an EAGLE-3 chain of D = 3 with per-position
acceptance 0.8, 0.75, 0.7 (AL 2.82), context 1024, B = 2 to 64. Prints each engine's speedup
per batch size, the requests a speculative step runs (SGLang's cap of 48), and the speedup at
B = 56 and 64 over B = 2: the shape published engine sweeps report as 0.55-0.76 (issue 13).
Acceptance is fixed here, so the shape is the engine model's alone.
"""

from __future__ import annotations

from speedplan.plan.acceptance import Acceptance
from speedplan.plan.sweep import sweep

BATCHES = [2, 4, 8, 16, 24, 32, 48, 56, 64]


def shape(engine: str):
    acc = Acceptance.positional([0.8, 0.75, 0.7], "bench_engine_shape: per-position acceptance 0.8, 0.75, 0.7")
    r = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], BATCHES, [0, 3], contexts=[1024], acceptance=acc, engine=engine)
    return r.frame[r.frame.mechanism != "none"].set_index("batch")


if __name__ == "__main__":
    print("Llama-3.1-8B, h100-sxm, eagle3 D=3 (AL 2.82), context 1024: speedup over the same engine's plain decoding")
    print(f"{'engine':8s} " + " ".join(f"{'B=' + str(b):>6s}" for b in BATCHES) + "   B56/B2  B64/B2")
    for engine in ("vllm", "sglang", "trtllm"):
        f = shape(engine)
        sp = f.speedup
        print(f"{engine:8s} " + " ".join(f"{sp[b]:6.2f}" for b in BATCHES) + f"   {sp[56] / sp[2]:6.2f}  {sp[64] / sp[2]:6.2f}"
              + ("" if (f.running == f.index).all() else
                 "   (running: " + ", ".join(f"B={b}: {int(n)}" for b, n in f.running.items() if n != b) + ")"))
