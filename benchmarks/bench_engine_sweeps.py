"""Out-of-sample check of the shipped vLLM engine profile on the one vLLM sweep of
../shared/cases that varies both the batch and the draft length.

    python benchmarks/bench_engine_sweeps.py          # the check
    python benchmarks/bench_engine_sweeps.py --fit    # and why its rows are not fitted

The sweep: vLLM PR #32628, table 'Vanilla EAGLE3 Results (HumanEval)' (vLLM main of January
2026 with --async-scheduling): gpt-oss-120b on one GPU (TP 1), EAGLE-3 chains of K = 3..8
drafts at concurrency 1, 2, 4 and 8, tokens/s, and vLLM's per-position acceptance for each K.
The CSV marks the unit as assumed (output tokens/s, all requests together); the table's TPOT at
K = 3, 2.91 ms, agrees with 1 / 336 tokens/s = 2.98 ms at concurrency 1. The acceptance length of
a row is 1 + the sum of its per-position rates (vLLM counts accepted-at-position over drafts, an
unconditional rate: speedplan/engine/readers/vllm_metrics.py). The source states no GPU and runs
no plain decoding, so no row enters the shipped fit (benchmarks/fit_engine_profiles.py) and every
row is priced under each GPU preset that holds the model's weights on one GPU. Printed for each:

- each row's tokens/s, predicted against measured (this depends on the GPU assumed);
- the shape in B: tokens/s at each B over the smallest B, same K (what the engine adds as the
  batch grows, with the same acceptance); the rows at the smallest B, 1 by construction, are
  left out of its errors;
- the shape in K: tokens/s at each K over the smallest K, same B (reference rows left out);
- the best K at each B, and what the predicted best loses against the measured best
  (regret: 1 − measured tokens/s at the predicted K / best measured tokens/s at that B);
- the GPU's kernels and sampler alone (every host and launch cost 0), their tokens/s over the
  measured: below 1, the GPU assumed cannot have run the row as fast as measured, whatever the
  engine's host work;
- the step time each draft token adds at the smallest B (slope of B·AL / tokens/s over K),
  measured and predicted, the prediction split into the verify pass, the drafting and the
  kernels launched outside CUDA graphs.

With --fit, the vllm profile is refitted to its four usual rows plus these 24 under each GPU
(the same code as `speedplan calibrate`): how well it fits, the terms it takes, and the EAGLE-3
speedup shape of benchmarks/bench_engine_shape.py that follows. benchmarks/README.md quotes a run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_cases import CASES, DEFAULT_CONTEXT, as_pairs, load_cases  # noqa: E402

from speedplan.engine.calibrate import Setting, calibrate, predict, price  # noqa: E402
from speedplan.engine.calibration_bounds import kernels_alone  # noqa: E402
from speedplan.engine.profile import get_engine  # noqa: E402
from speedplan.engine.readers.measurements import Measurement  # noqa: E402
from speedplan.engine.step import step_cost  # noqa: E402

SOURCE = "vllm PR #32628 (PTD; 'Vanilla EAGLE3 Results (HumanEval)' table)"
MODEL, TP = "gpt-oss-120b", 1
# The GPU presets whose memory holds gpt-oss-120b's weights (about 65 GB, experts in MXFP4) on one
# GPU; L40S's 48 GB does not. H100 and H200 are the GPUs of most threads in shared/cases; the
# P-EAGLE team's other vLLM runs were on a B200 (vLLM PR #32887).
GPUS = ("h100-sxm", "h200-sxm", "b200", "mi300x", "a100-80gb")
FIT_TERMS = ["host_step_us", "draft_step_launches", "layer_launches", "host_seq_us", "host_spec_seq_us"]


def acceptance_length(per_position: str) -> float:
    """1 + Σ unconditional per-position acceptance rates, from text like '73%;52%;36%'."""
    return 1.0 + sum(float(x.strip().rstrip("%")) / 100.0 for x in str(per_position).split(";"))


def sweep_rows(path: Path = CASES) -> pd.DataFrame:
    """The sweep's rows, index 0..n−1: line (in the CSV), batch (concurrency), draft_len (K),
    acceptance_length (tokens per step), tokens_per_s (output tokens/s, all requests)."""
    frame = pd.read_csv(path)
    rows = frame[frame.source == SOURCE]
    if rows.empty:
        raise SystemExit(f"{path}: no rows of {SOURCE!r}")
    return pd.DataFrame({
        "line": rows.index + 2,
        "batch": rows.batch_or_concurrency.astype(int).to_numpy(),
        "draft_len": rows.draft_len.astype(int).to_numpy(),
        "acceptance_length": [acceptance_length(p) for p in rows.per_position_acceptance],
        "tokens_per_s": rows.tokens_per_s.astype(float).to_numpy(),
    })


def pairs_for(rows: pd.DataFrame, hardware: str) -> list:
    """(Measurement, Setting) pairs of `rows` on `hardware` (a GPU preset), for calibrate/price."""
    from speedplan.cost.ops import load_cost_model
    from speedplan.specs.model import get_model

    setting = Setting(get_model(MODEL), load_cost_model(hardware), TP, f"{MODEL} on {hardware}, TP={TP}")
    return [(Measurement("eagle3", int(r.batch), int(r.draft_len), DEFAULT_CONTEXT, "tokens_per_s",
                         float(r.tokens_per_s), float(r.acceptance_length),
                         f"{CASES.name} line {r.line} ({SOURCE}; GPU assumed {hardware})"), setting)
            for r in rows.itertuples()]


def ratio_to_smallest(rows: pd.DataFrame, values: np.ndarray, within: str, over: str) -> tuple[np.ndarray, np.ndarray]:
    """(values over the value at the smallest `over` in the same `within` group, row-aligned with
    `rows`; mask of the rows that are not that reference). E.g. within="draft_len", over="batch":
    tokens/s at each B over tokens/s at the smallest B, same K."""
    groups = rows[within].to_numpy()
    key = rows[over].to_numpy()
    ratio = np.empty(len(rows))
    for g in np.unique(groups):
        sel = groups == g
        ref = values[sel][np.argmin(key[sel])]
        ratio[sel] = values[sel] / ref
    smallest = pd.Series(key).groupby(groups).transform("min").to_numpy()
    return ratio, key != smallest


def best_k(rows: pd.DataFrame, measured: np.ndarray, predicted: np.ndarray) -> list[tuple[int, int, int, float]]:
    """[(B, measured best K, predicted best K, regret of the predicted K)] per batch size."""
    out = []
    for b in sorted(rows.batch.unique()):
        sel = rows.batch.to_numpy() == b
        k = rows.draft_len.to_numpy()[sel]
        m, p = measured[sel], predicted[sel]
        out.append((int(b), int(k[np.argmax(m)]), int(k[np.argmax(p)]), float(1 - m[np.argmax(p)] / m.max())))
    return out


def per_draft_token_ms(rows: pd.DataFrame, step_s: np.ndarray) -> float:
    """Step time each draft token adds at the smallest batch (ms): slope of `step_s` (seconds,
    one per row) over K."""
    sel = rows.batch.to_numpy() == rows.batch.min()
    return float(np.polyfit(rows.draft_len.to_numpy()[sel], 1e3 * step_s[sel], 1)[0])


def median_by_batch(rows: pd.DataFrame, values: np.ndarray) -> dict[int, float]:
    """Median of `values` over the rows of each batch size."""
    b = rows.batch.to_numpy()
    return {int(x): float(np.median(values[b == x])) for x in sorted(np.unique(b))}


def _err(pred: np.ndarray, meas: np.ndarray) -> str:
    e = 100 * (pred / meas - 1)
    return f"median |error| {np.median(abs(e)):.1f}%, max {abs(e).max():.1f}% (signed median {np.median(e):+.1f}%)"


def check(rows: pd.DataFrame, hardware: str, engine: str = "vllm") -> str:
    """The figures of the module docstring for `rows` priced with `engine` on `hardware`, as text."""
    profile = get_engine(engine)
    values = profile.values()
    measured = rows.tokens_per_s.to_numpy()
    priced = price(pairs_for(rows, hardware), profile.spec_max_running)
    predicted = predict(values, priced)
    cost = step_cost(values, priced.step)
    gpu_only = kernels_alone(values, priced)  # tokens/s if each step took only its kernels and sampler
    measured_step = rows.batch.to_numpy() * rows.acceptance_length.to_numpy() / measured
    b_min, k_min = rows.batch.min(), rows.draft_len.min()
    lines = [f"{engine} profile, GPU assumed {hardware}:",
             f"  tokens/s, {len(rows)} rows:            {_err(predicted, measured)}",
             f"  TPOT at B = {b_min} (1 / tokens/s): "
             + _err(1 / predicted[rows.batch == b_min], 1 / measured[rows.batch == b_min])]
    for name, within, over, ref in (("B", "draft_len", "batch", b_min), ("K", "batch", "draft_len", k_min)):
        pred_ratio, other = ratio_to_smallest(rows, predicted, within, over)
        meas_ratio, _ = ratio_to_smallest(rows, measured, within, over)
        lines.append(f"  shape in {name} (over {name} = {ref}, {other.sum()} rows): {_err(pred_ratio[other], meas_ratio[other])}")
    picks = best_k(rows, measured, predicted)
    lines += ["  best K per B (measured/predicted, regret): "
              + ", ".join(f"B={b} {m}/{p} {100 * r:.1f}%" for b, m, p, r in picks)
              + f"  [{sum(m == p for _, m, p, _ in picks)} of {len(picks)} right; K tried: "
              f"{k_min}..{rows.draft_len.max()}]",
              "  GPU kernels and sampler alone (no host work, no launches), tokens/s over measured, median per B: "
              + ", ".join(f"B={b} {v:.2f}" for b, v in median_by_batch(rows, gpu_only / measured).items()),
              f"  step time per draft token at B = {b_min}: measured {per_draft_token_ms(rows, measured_step):.2f} ms, "
              f"predicted {per_draft_token_ms(rows, cost.total_s):.2f} ms (verify pass "
              f"{per_draft_token_ms(rows, cost.verify_s):.2f}, drafting {per_draft_token_ms(rows, cost.draft_s):.2f}, "
              f"rest {per_draft_token_ms(rows, cost.total_s - cost.verify_s - cost.draft_s):.2f})"]
    table = rows.assign(predicted=predicted.round(0), error=[f"{100 * (p / m - 1):+.1f}%" for p, m in zip(predicted, measured)])
    lines.append("  " + table[["batch", "draft_len", "acceptance_length", "tokens_per_s", "predicted", "error"]]
                 .round({"acceptance_length": 2}).to_string(index=False).replace("\n", "\n  "))
    return "\n".join(lines)


def refit(rows: pd.DataFrame, hardware: str) -> str:
    """The vllm profile refitted with its usual rows and `rows` under `hardware`, and the
    Llama-3.1-8B EAGLE-3 speedup shape that follows (benchmarks/bench_engine_shape.py), as text."""
    from bench_engine_shape import shape
    from fit_engine_profiles import base_profile

    cases, _ = load_cases()
    usual = as_pairs([c for c in cases if c.engine == "vllm"])
    result = calibrate(base_profile("vllm"), usual + pairs_for(rows, hardware), FIT_TERMS, name="vllm-refit",
                       described=f"{CASES.name}: the shipped fit's rows and {SOURCE} (GPU assumed {hardware})")
    r = np.abs(result.residual)
    values = result.profile.values()
    sp = shape(result.profile).speedup
    kept = f"; kept: {', '.join(result.kept)}" if result.kept else ""
    kept += f"; {int(result.too_fast.sum())} of {len(r)} rows faster than their kernels alone" if result.too_fast.any() else ""
    return (f"  refitted under {hardware}: |residual| median {100 * np.median(r):.1f}%, max {100 * r.max():.1f}%, "
            f"leave-one-out median {100 * np.median(result.loo_error):.1f}%; "
            + ", ".join(f"{t} {values[t] if abs(values[t]) > 1e-6 else 0:.4g}" for t in result.fitted) + kept
            + f"; Llama-3.1-8B EAGLE-3 D = 3 speedup B = 64 over B = 2: {sp[64] / sp[2]:.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true", help="also refit the vllm profile with these rows under each GPU")
    args = ap.parse_args(argv)
    rows = sweep_rows()
    batches, drafts = sorted(int(b) for b in rows.batch.unique()), sorted(int(k) for k in rows.draft_len.unique())
    print(f"{SOURCE}: {MODEL} TP {TP}, EAGLE-3, B {batches} x K {drafts}, "
          f"context {DEFAULT_CONTEXT} assumed; no GPU and no plain decoding stated\n")
    for hardware in GPUS:
        print(check(rows, hardware))
        if args.fit:
            print(refit(rows, hardware))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
