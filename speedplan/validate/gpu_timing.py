"""Verify-step timing of the reference runtime against the cost model (issue 6).

On a GPU: a random-weight Llama-3.1-8B-shaped model in bf16, the verify forward (1+D tokens
per sequence on a KV cache of `context` tokens, plus the lm_head) captured in a CUDA graph and
replayed, for B × D × context; the cost model predicts the same points from the profile just
measured. On CPU (`--dry-run`): the same code path on a tiny grid, eager, fp32.

    python -m speedplan.validate.gpu_timing --device cuda --hardware profiles/h200-sxm --out reports/validation-h200
    python -m speedplan.validate.gpu_timing --dry-run --out /tmp/vt      # what the tests run

The summary has the CPU validation's keys: step-time errors are those of the verify step;
"speedup" compares the verify-cost ratio t_verify(1+D)/t_verify(1) predicted and measured;
"AL" is not measured here (random weights) and is reported as null; regret is that of the
best D per (B, context) under a fixed acceptance (α = 0.8), priced with measured times.
Times are seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class TimingGrid:
    model: str
    batches: tuple[int, ...]
    draft_lens: tuple[int, ...]
    contexts: tuple[int, ...]
    dtype: str
    repeats: int


GPU_GRID = TimingGrid("llama-3.1-8b", (1, 4, 16, 64, 256), (0, 1, 3, 7, 15), (1024, 8192), "bf16", 20)
DRY_GRID = TimingGrid("smollm2-135m", (1, 2), (0, 1, 3), (64, 128), "fp32", 3)
ALPHA = 0.8


def _timer(device: str):
    import torch

    def measure(fn, repeats: int) -> float:
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(repeats):
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
            return float(np.median(times))
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    return measure


def time_verify(model, batch: int, q_len: int, context: int, device: str, repeats: int) -> float:
    """Median seconds of one verify step: forward of q_len tokens per sequence after
    `context` cached ones, then the lm_head (graph-captured and replayed on CUDA)."""
    import torch

    cache = model.new_cache(batch, context + q_len + 1)
    cache.set_lengths(torch.arange(batch, device=cache.lengths.device),
                      torch.full((batch,), context, dtype=cache.lengths.dtype, device=cache.lengths.device))
    tokens = torch.randint(0, model.cfg.vocab, (batch, q_len), device=model.embed.device)

    def step():
        return model.logits(model(tokens, cache))

    measure = _timer(device)
    with torch.inference_mode():
        if device == "cuda":
            model.static_span = True
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            graph.replay()
            torch.cuda.synchronize()
            return measure(graph.replay, repeats)
        step()  # warm-up
        return measure(step, repeats)


def run(grid: TimingGrid, hardware: str, device: str, progress=print) -> tuple[pd.DataFrame, dict]:
    import torch

    from speedplan.cost.ops import load_cost_model
    from speedplan.cost.forward import forward_cost
    from speedplan.specs.model import get_model
    from speedplan.runtime.transformer import LlamaConfig
    from speedplan.runtime.io.weights import random_model

    spec = replace(get_model(grid.model), dtype=grid.dtype)
    cost = load_cost_model(hardware)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[grid.dtype]
    model = random_model(LlamaConfig.from_spec(spec), dtype=dtype, device=device)
    if device == "cpu":
        model.pack_cpu_weights()
    capacity = (torch.cuda.get_device_properties(0).total_memory if device == "cuda" else 4e9) * 0.85
    rows = []
    for context in grid.contexts:
        for batch in grid.batches:
            for d in grid.draft_lens:
                q = 1 + d
                kv = batch * (context + q + 1) * spec.kv_bytes_per_token(torch.finfo(dtype).bits // 8)
                if spec.weight_bytes(torch.finfo(dtype).bits // 8) + kv > capacity:
                    progress(f"skip B={batch} D={d} L={context}: KV cache does not fit")
                    continue
                meas = time_verify(model, batch, q, context, device, grid.repeats)
                pred = float(forward_cost(cost, spec, batch, q, context).total_s)
                rows.append({"batch": batch, "draft_len": d, "context": context, "pred_t_verify": pred,
                             "meas_t_verify": meas})
                progress(f"B={batch} D={d} L={context}: measured {meas * 1e3:.3f} ms, predicted {pred * 1e3:.3f} ms")
                if device == "cuda":
                    torch.cuda.empty_cache()
    table = pd.DataFrame(rows)
    return table, summarize(table, cost.origin, hardware, device)


def summarize(table: pd.DataFrame, origin: str, hardware: str, device: str) -> dict:
    err = np.abs(table.pred_t_verify - table.meas_t_verify) / table.meas_t_verify
    ratios, regrets = [], []
    for (_, _), g in table.groupby(["batch", "context"]):
        base = g[g.draft_len == 0]
        if base.empty:
            continue
        g = g.sort_values("draft_len")
        pred_ratio = g.pred_t_verify / float(base.pred_t_verify.iloc[0])
        meas_ratio = g.meas_t_verify / float(base.meas_t_verify.iloc[0])
        ratios += list((np.abs(pred_ratio - meas_ratio) / meas_ratio)[g.draft_len > 0])
        al = (1 - ALPHA ** (g.draft_len + 1)) / (1 - ALPHA)
        meas_tput = al / g.meas_t_verify
        pick = int(np.argmax((al / g.pred_t_verify).to_numpy()))
        regrets.append(float(1 - meas_tput.iloc[pick] / meas_tput.max()))
    q = lambda x, p: float(np.percentile(x, p)) if len(x) else None
    return {
        "points": int(len(table)), "device": device, "hardware": hardware, "cost_origin": origin,
        "step_time_median_error": q(err, 50), "step_time_p90_error": q(err, 90),
        "al_median_error": None, "speedup_median_error": q(ratios, 50),
        "max_regret": max(regrets) if regrets else None,
        "note": "verify step only (random weights): AL not measured; speedup = verify-cost ratio t(1+D)/t(1); "
                f"regret of the best D per (B, context) at alpha={ALPHA} priced with measured times",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--hardware", default="h200-sxm", help="profile folder or preset that predicts")
    parser.add_argument("--out", required=True)
    parser.add_argument("--dry-run", action="store_true", help="tiny CPU grid (what the tests run)")
    args = parser.parse_args(argv)
    grid, device, hardware = (DRY_GRID, "cpu", "cpu-local") if args.dry_run else (GPU_GRID, args.device, args.hardware)
    table, summary = run(grid, hardware, device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "verify_timing.csv", index=False, float_format="%.6g")
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: summary[k] for k in ("points", "step_time_median_error", "step_time_p90_error")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
