"""Out-of-sample check of the shipped vLLM engine profile on the one vLLM sweep of
../shared/cases that varies both the batch and the draft length.

    python benchmarks/bench_engine_sweeps.py          # the check
    python benchmarks/bench_engine_sweeps.py --fit    # and why its rows are not fitted

The sweep: vLLM PR #32628, table 'Vanilla EAGLE3 Results (HumanEval)' (vLLM main of January
2026 with --async-scheduling): gpt-oss-120b on one GPU (TP 1), EAGLE-3 chains of K = 3..8
drafts at concurrency 1, 2, 4 and 8, aggregate output tokens/s, and vLLM's per-position
acceptance for each K. The acceptance length of a row is 1 + the sum of its per-position rates
(vLLM counts accepted-at-position over drafts, an unconditional rate:
speedplan/engine/readers/vllm_metrics.py). The source states no GPU and runs no plain decoding,
so no row enters the shipped fit (benchmarks/fit_engine_profiles.py) and every row is priced
under each single-GPU preset that holds the model. Printed for each:

- each row's tokens/s, predicted against measured (this depends on the GPU assumed);
- the shape in B: tokens/s at B over tokens/s at B = 1, same K (the same requests' acceptance;
  what the engine adds as the batch grows);
- the shape in K: tokens/s at K over K = 3, same B;
- the best K at each B, and what the predicted best loses against the measured best
  (regret: 1 − measured tokens/s at the predicted K / best measured tokens/s at that B);
- the tokens/s of the GPU work alone (every host and launch term 0) over the measured: below 1,
  the GPU assumed cannot have run the row as fast as measured, whatever the engine's host work;
- the step time each draft token adds at B = 1 (slope of B·AL/tokens/s over K).

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
from speedplan.engine.profile import get_engine  # noqa: E402
from speedplan.engine.readers.measurements import Measurement  # noqa: E402

SOURCE = "vllm PR #32628 (PTD; 'Vanilla EAGLE3 Results (HumanEval)' table)"
MODEL, TP = "gpt-oss-120b", 1
# GPUs the source may have run on: the P-EAGLE team's other vLLM runs were on B200 (vLLM PR
# #32887); H100 and H200 are the GPUs of most threads in shared/cases. One GPU holds the model.
GPUS = ("h100-sxm", "h200-sxm", "b200")
HOST_TERMS = ("host_step_us", "host_seq_us", "host_spec_seq_us", "host_token_us", "draft_token_us", "layer_launches",
              "draft_step_launches")  # the engine terms besides the GPU's kernels and the sampler
FIT_TERMS = ["host_step_us", "draft_step_launches", "layer_launches", "host_seq_us", "host_spec_seq_us"]


def acceptance_length(per_position: str) -> float:
    """1 + Σ unconditional per-position acceptance rates, from text like '73%;52%;36%'."""
    return 1.0 + sum(float(x.strip().rstrip("%")) / 100.0 for x in str(per_position).split(";"))


def sweep_rows(path: Path = CASES) -> pd.DataFrame:
    """The sweep's rows: batch, draft_len, acceptance_length, tokens_per_s (CSV line in `line`)."""
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
    from speedplan.cost.ops import load_cost_model
    from speedplan.specs.model import get_model

    setting = Setting(get_model(MODEL), load_cost_model(hardware), TP, f"{MODEL} on {hardware}, TP={TP}")
    return [(Measurement("eagle3", int(r.batch), int(r.draft_len), DEFAULT_CONTEXT, "tokens_per_s",
                         float(r.tokens_per_s), float(r.acceptance_length),
                         f"{CASES.name} line {r.line} ({SOURCE}; GPU assumed {hardware})"), setting)
            for r in rows.itertuples()]


def shapes(rows: pd.DataFrame, tokens_per_s: np.ndarray) -> dict:
    """Ratios that depend less on the GPU than tokens/s: over B = min at each K, over K = min at each B."""
    t = rows.assign(t=tokens_per_s)
    by_b = t.groupby("draft_len", group_keys=False).apply(lambda g: g.t / g.t[g.batch == g.batch.min()].iloc[0])
    by_k = t.groupby("batch", group_keys=False).apply(lambda g: g.t / g.t[g.draft_len == g.draft_len.min()].iloc[0])
    return {"in_b": by_b.sort_index().to_numpy(), "in_k": by_k.sort_index().to_numpy()}


def per_draft_token_ms(rows: pd.DataFrame, tokens_per_s: np.ndarray, batch: int = 1) -> float:
    """Step time each draft token adds at `batch` (ms): slope of B·AL / tokens/s over K."""
    sel = rows.batch.to_numpy() == batch
    step_ms = 1e3 * rows.batch.to_numpy()[sel] * rows.acceptance_length.to_numpy()[sel] / tokens_per_s[sel]
    return float(np.polyfit(rows.draft_len.to_numpy()[sel], step_ms, 1)[0])


def best_k(rows: pd.DataFrame, measured: np.ndarray, predicted: np.ndarray) -> list[tuple[int, int, int, float]]:
    """[(B, measured best K, predicted best K, regret of the predicted K)] per batch size."""
    out = []
    for b in sorted(rows.batch.unique()):
        sel = rows.batch.to_numpy() == b
        k = rows.draft_len.to_numpy()[sel]
        m, p = measured[sel], predicted[sel]
        out.append((int(b), int(k[np.argmax(m)]), int(k[np.argmax(p)]), float(1 - m[np.argmax(p)] / m.max())))
    return out


def _err(pred: np.ndarray, meas: np.ndarray) -> str:
    e = 100 * (pred / meas - 1)
    return f"median |error| {np.median(abs(e)):.1f}%, max {abs(e).max():.1f}% (signed median {np.median(e):+.1f}%)"


def check(rows: pd.DataFrame, hardware: str, engine: str = "vllm") -> str:
    profile = get_engine(engine)
    measured = rows.tokens_per_s.to_numpy()
    priced = price(pairs_for(rows, hardware), profile.spec_max_running)
    predicted = predict(profile.values(), priced)
    gpu_only = predict({**profile.values(), **{t: 0.0 for t in HOST_TERMS}}, priced)
    ms, ps = shapes(rows, measured), shapes(rows, predicted)
    b1 = rows.batch.to_numpy() == 1
    picks = best_k(rows, measured, predicted)
    lines = [f"{engine} profile, GPU assumed {hardware}:",
             f"  tokens/s, 24 rows:            {_err(predicted, measured)}",
             f"  TPOT at B = 1 (1 / tokens/s): {_err(1 / predicted[b1], 1 / measured[b1])}",
             f"  shape in B (over B = 1):      {_err(ps['in_b'], ms['in_b'])}",
             f"  shape in K (over K = 3):      {_err(ps['in_k'], ms['in_k'])}",
             "  best K per B (measured/predicted, regret): "
             + ", ".join(f"B={b} {m}/{p} {100 * r:.1f}%" for b, m, p, r in picks)
             + f"  [{sum(m == p for _, m, p, _ in picks)} of {len(picks)} right]",
             "  GPU work alone (host and launch terms 0), tokens/s over measured, median per B: "
             + ", ".join(f"B={b} {np.median(gpu_only[rows.batch.to_numpy() == b] / measured[rows.batch.to_numpy() == b]):.2f}"
                         for b in sorted(rows.batch.unique())),
             f"  step time per draft token at B = 1: measured {per_draft_token_ms(rows, measured):.2f} ms, "
             f"predicted {per_draft_token_ms(rows, predicted):.2f} ms ({per_draft_token_ms(rows, gpu_only):.2f} ms of it "
             "GPU work)"]
    table = rows.assign(predicted=predicted.round(0), error=[f"{100 * (p / m - 1):+.1f}%" for p, m in zip(predicted, measured)])
    lines.append("  " + table[["batch", "draft_len", "acceptance_length", "tokens_per_s", "predicted", "error"]]
                 .round({"acceptance_length": 2}).to_string(index=False).replace("\n", "\n  "))
    return "\n".join(lines)


def refit(rows: pd.DataFrame, hardware: str) -> str:
    """The vllm profile refitted with this sweep under `hardware`, and the shape that follows."""
    from bench_engine_shape import BATCHES
    from fit_engine_profiles import base_profile

    from speedplan.plan.acceptance import Acceptance
    from speedplan.plan.sweep import sweep

    cases, _ = load_cases()
    usual = as_pairs([c for c in cases if c.engine == "vllm"])
    result = calibrate(base_profile("vllm"), usual + pairs_for(rows, hardware), FIT_TERMS, name="vllm-refit",
                       described=f"{CASES.name}: the shipped fit's rows and {SOURCE} (GPU assumed {hardware})")
    r = np.abs(result.residual)
    values = result.profile.values()
    acc = Acceptance.positional([0.8, 0.75, 0.7], "bench_engine_shape: per-position acceptance 0.8, 0.75, 0.7")
    frame = sweep("llama-3.1-8b", "h100-sxm", ["eagle3"], BATCHES, [0, 3], contexts=[1024], acceptance=acc,
                  engine=result.profile).frame
    sp = frame[frame.mechanism != "none"].set_index("batch").speedup
    return (f"  refitted under {hardware}: |residual| median {100 * np.median(r):.1f}%, max {100 * r.max():.1f}%, "
            f"leave-one-out median {100 * np.median(result.loo_error):.1f}%; "
            + ", ".join(f"{t} {values[t] if abs(values[t]) > 1e-6 else 0:.4g}" for t in result.fitted)
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
