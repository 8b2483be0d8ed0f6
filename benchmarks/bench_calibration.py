"""What calibration buys, on ../shared/cases/engine_measurements.csv.

    python benchmarks/bench_calibration.py

1. Held-out batch sizes. For each engine sweep of the cases with at least five batch sizes
   (one source, model, GPU, TP and draft shape, only B varying), the engine terms are fitted on
   three batch sizes (smallest, middle, largest) and the others are predicted. The fit starts
   from the documented, unfitted profile (benchmarks/fit_engine_profiles.py BASES), so the
   held-out rows are never seen.
   The same on the cases' B x D throughput grid (SGLang PR #22246, below): each draft length's
   seven batch sizes are one sweep of tokens/s, fitted on B = 1, 8, 64 and predicted at 2, 4,
   16, 32. Its rows give no acceptance length; the mechanism's published acceptance is assumed
   (one value per draft length, the same at every batch size, as acceptance does not depend on B).
2. Schedule regret. On the cases' B × D throughput grid (SGLang PR #22246, Qwen3-235B-A22B
   EAGLE-3 chains, steps 1..6, B 1..64), the per-batch draft length speedplan picks from 0
   measurements (documented profile, published acceptance) and from 3 measurements (calibrated
   on (B, D) = (1, 2), (8, 4), (64, 6), with the published acceptance as the rows give none), against vLLM's
   dynamic-speculative-decoding config generator (vllm/v1/spec_decode/dynamic/generate_config.py,
   a PR branch of vLLM #32374: it measures B ∈ {1, 4, 16, 64, 256} × K ∈ {1, 3, 5} and keeps the
   best measured K per batch size; unmeasured batch sizes take the nearest measured one's).
   Twice more with the acceptance fitted with the engine terms (`speedplan calibrate
   --fit-acceptance`, engine/calibration_acceptance.py) instead of assumed: from the same three
   measurements, and from the twelve of the generator's grid.
   Regret at B = 1 − measured throughput of the pick / best measured throughput at B. The
   source states no GPU or TP: H100 with TP 8 is assumed (the model's bf16 weights need 8;
   `--grid-hardware h200-sxm` assumes another GPU, for 1b and 2).
3. Speed: `speedplan calibrate` on 20 rows (B 1, 4, 16, 64, 128 × D 0, 2, 4, 6 of Llama-3.1-8B
   on h100-sxm), fit and leave-one-out refits included, median of 5 runs in this process; and
   the whole process as a user runs it (imports, reading the CSV, the fit, the printout and the
   profile written), median of 3, on 20 TPOT rows an engine with other terms than the vllm
   profile's would measure (host work 600 µs a step and 120 µs a sequence, 40 launches a draft
   forward), with a fixed ±3% noise: rows the fit must work for, unlike the first timing's.
Prints the figures; benchmarks/README.md quotes a run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_cases import CASES, as_pairs, load_cases  # noqa: E402
from fit_engine_profiles import base_profile  # noqa: E402

from speedplan.engine.calibrate import Setting, calibrate, predict, price  # noqa: E402
from speedplan.engine.readers.measurements import Measurement  # noqa: E402

GRID_SOURCE = "sglang PR #22246 (AutoSpec; static-config baselines)"
GRID_MODEL, GRID_HW, GRID_TP = "qwen3-235b-a22b", "h100-sxm", 8
GENERATOR_B, GENERATOR_K = (1, 4, 16, 64, 256), (1, 3, 5)


def held_out_batches() -> list[dict]:
    cases, _ = load_cases()
    out = []
    by_sweep: dict[str, list] = {}
    for c in cases:
        by_sweep.setdefault(f"{c.sweep} D={c.draft_len} N={c.tree_nodes}", []).append(c)
    for name, rows in by_sweep.items():
        batches = sorted({c.batch for c in rows})
        if len(batches) < 5:
            continue
        train_b = {batches[0], batches[len(batches) // 2], batches[-1]}
        train = [c for c in rows if c.batch in train_b]
        test = [c for c in rows if c.batch not in train_b]
        base = base_profile(rows[0].engine)
        fitted = calibrate(base, as_pairs(train), name="held-out").profile
        test_pairs = as_pairs(test)
        meas = np.array([c.value for c in test])
        for label, profile in (("documented profile", base), ("fitted on 3 batch sizes", fitted)):
            priced = price(test_pairs, profile.spec_max_running)
            err = np.abs(predict(profile.values(), priced) / meas - 1)
            out.append({"sweep": name, "profile": label, "train B": sorted(train_b), "test B": [c.batch for c in test],
                        "median error": float(np.median(err)), "max error": float(err.max())})
    return out


def _grid_setting() -> tuple[str, object, Setting]:
    """The grid's mechanism label, its published acceptance and the setting (H100, TP 8 assumed)."""
    from speedplan.cost.ops import load_cost_model
    from speedplan.plan.mechanisms import REGISTRY, parse_mechanism
    from speedplan.specs.model import get_model

    target = get_model(GRID_MODEL)
    label = "eagle3" if "eagle3" in REGISTRY else "eagle:vocab=32000"
    return label, parse_mechanism(label, target).acceptance, Setting(target, load_cost_model(GRID_HW), GRID_TP, "grid")


def _grid_rows(grid: pd.DataFrame, label: str, acc, setting: Setting) -> list[tuple[Measurement, Setting]]:
    """The grid's rows as tokens/s measurements, each with the published AL of its draft length."""
    return [(Measurement(label, int(b), int(d), 1024, "tokens_per_s", float(t), float(acc.chain_al(int(d))),
                         f"grid B={b} D={d}"), setting)
            for b, d, t in zip(grid.batch, grid.draft_len, grid.tokens_per_s)]


def held_out_grid() -> list[dict]:
    """Held-out batch sizes on the throughput grid: one sweep per draft length (see the docstring)."""
    grid = _grid()
    label, acc, setting = _grid_setting()
    base = base_profile("sglang")
    out = []
    for d, g in grid.groupby("draft_len"):
        batches = sorted(g.batch)
        train_b = {batches[0], batches[len(batches) // 2], batches[-1]}
        pairs = _grid_rows(g.sort_values("batch"), label, acc, setting)
        train = [p for p in pairs if p[0].batch in train_b]
        test = [p for p in pairs if p[0].batch not in train_b]
        fitted = calibrate(base, train, name="held-out").profile
        meas = np.array([m.value for m, _ in test])
        for name, profile in (("documented profile", base), ("fitted on 3 batch sizes", fitted)):
            err = np.abs(predict(profile.values(), price(test, profile.spec_max_running)) / meas - 1)
            out.append({"sweep": f"{GRID_SOURCE} D={d} (AL {acc.chain_al(int(d)):.2f} assumed)", "profile": name,
                        "train B": sorted(train_b), "test B": [m.batch for m, _ in test], "errors": err,
                        "median error": float(np.median(err)), "max error": float(err.max())})
    return out


def _grid() -> pd.DataFrame:
    frame = pd.read_csv(CASES)
    g = frame[(frame.source == GRID_SOURCE) & (frame.target_model == "Qwen3-235B-A22B")]
    return g[["batch_or_concurrency", "draft_len", "tokens_per_s"]].rename(
        columns={"batch_or_concurrency": "batch"}).astype({"batch": int, "draft_len": int})


def _predicted_tokens(profile, rows: list[tuple[Measurement, Setting]]) -> np.ndarray:
    return predict(profile.values(), price(rows, profile.spec_max_running))


def _with_fitted_acceptance(base, grid: pd.DataFrame, points: set, label: str, acc, setting: Setting):
    """Calibrated on the grid's `points` (B, D) with the acceptance fitted, not assumed (as
    `speedplan calibrate --fit-acceptance`): the predicted tokens/s of every grid row, and the rate."""
    from speedplan.engine.calibration_acceptance import chain_al, fit_rates, with_fitted

    cal = _grid_rows(grid[[(b, d) in points for b, d in zip(grid.batch, grid.draft_len)]], label, acc, setting)
    unmeasured = {label: list(range(len(cal)))}
    fit = fit_rates(base, cal, unmeasured, None)
    shapes, span = fit.shapes, fit.intervals[label]
    rows = with_fitted([m for m, _ in cal], unmeasured, shapes)
    fitted = calibrate(base, [(m, setting) for m in rows], name="acceptance-fitted", spent=fit.parameters).profile
    every = [(Measurement(m.mechanism, m.batch, m.draft_len, m.context, m.quantity, m.value,
                          float(chain_al(*shapes[label], m.draft_len)), m.where), s)
             for m, s in _grid_rows(grid, label, acc, setting)]
    return _predicted_tokens(fitted, every), shapes[label], span


def schedule_regret() -> pd.DataFrame:
    grid = _grid()
    label, acc, setting = _grid_setting()
    base = base_profile("sglang")
    points = {(1, 2), (8, 4), (64, 6)}
    cal_points = grid[[(b, d) in points for b, d in zip(grid.batch, grid.draft_len)]]
    fitted = calibrate(base, _grid_rows(cal_points, label, acc, setting), name="three-points").profile
    rows = _grid_rows(grid, label, acc, setting)
    generator = {(b, k) for b in GENERATOR_B for k in GENERATOR_K}
    pred3a, alpha3, span3 = _with_fitted_acceptance(base, grid, points, label, acc, setting)
    pred12a, alpha12, span12 = _with_fitted_acceptance(base, grid, generator, label, acc, setting)
    from speedplan.engine.calibration_acceptance import chain_al, shape_text

    ds = np.arange(1, 7)
    print(f"  acceptance: published (assumed where the rows give none), AL at D = 1..6: "
          f"{' '.join(f'{float(a):.2f}' for a in acc.chain_al(ds))}")
    for n, shape, span in (("3 measurements", alpha3, span3), ("the generator's 12", alpha12, span12)):
        within = (f"; the rows fit within their scatter for AL {span[1]:.2f}-{span[2]:.2f} at D = {span[0]}" if span
                  else "; no row left over to judge how far they pin it")
        print(f"  acceptance fitted from {n}: {shape_text(*shape)}, AL at D = 1..6: "
              f"{' '.join(f'{float(a):.2f}' for a in chain_al(*shape, ds))}{within}")
    grid = grid.assign(pred0=_predicted_tokens(base, rows), pred3=_predicted_tokens(fitted, rows), pred3a=pred3a,
                       pred12a=pred12a)
    best = grid.groupby("batch").tokens_per_s.max()
    rows = []
    measured_b = [b for b in GENERATOR_B if b in set(grid.batch)]
    gen_pick = {b: grid[(grid.batch == b) & grid.draft_len.isin(GENERATOR_K)].sort_values("tokens_per_s").draft_len.iloc[-1]
                for b in measured_b}
    for b, g in grid.groupby("batch"):
        nearest = min(measured_b, key=lambda m: abs(np.log(m) - np.log(b)))
        picks = {"speedplan, 0 measurements": g.loc[g.pred0.idxmax(), "draft_len"],
                 "speedplan, 3 measurements": g.loc[g.pred3.idxmax(), "draft_len"],
                 "speedplan, 3, acceptance fitted": g.loc[g.pred3a.idxmax(), "draft_len"],
                 "speedplan, the generator's 12, acceptance fitted": g.loc[g.pred12a.idxmax(), "draft_len"],
                 "vLLM generator, 12 measurements": gen_pick[nearest]}
        row = {"batch": b, "best D (measured)": int(g.loc[g.tokens_per_s.idxmax(), "draft_len"])}
        for name, d in picks.items():
            row[f"{name}: D"] = int(d)
            row[f"{name}: regret"] = 1 - float(g[g.draft_len == d].tokens_per_s.iloc[0]) / best[b]
        rows.append(row)
    return pd.DataFrame(rows)


def calibrate_20_rows_s(repeats: int = 5) -> float:
    import statistics
    import time

    from speedplan.cost.ops import load_cost_model
    from speedplan.specs.model import get_model

    setting = Setting(get_model("llama-3.1-8b"), load_cost_model("h100-sxm"), 1, "llama-3.1-8b on h100-sxm")
    rows = [Measurement("none" if d == 0 else "eagle", b, d, 2048, "tpot_ms", 5.0 + 0.01 * b + 0.4 * d,
                        None if d == 0 else 1 + 0.7 * d, f"row B={b} D={d}")
            for b in (1, 4, 16, 64, 128) for d in (0, 2, 4, 6)]
    base = base_profile("vllm")
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        calibrate(base, [(m, setting) for m in rows])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def calibrate_cli_s(repeats: int = 3) -> float:
    """Wall seconds of `speedplan calibrate` as a whole process on 20 rows (module docstring, 3)."""
    import statistics
    import subprocess
    import tempfile
    import time

    from speedplan.cost.ops import load_cost_model
    from speedplan.specs.model import get_model

    setting = Setting(get_model("llama-3.1-8b"), load_cost_model("h100-sxm"), 1, "llama-3.1-8b on h100-sxm")
    rows = [Measurement("none" if d == 0 else "eagle3", b, d, 1024, "tpot_ms", 1.0,
                        None if d == 0 else round(1 + 0.75 * d * 0.9 ** d, 3), f"row B={b} D={d}")
            for b in (1, 4, 16, 64, 128) for d in (0, 2, 4, 6)]
    truth = {**base_profile("vllm").values(), "host_step_us": 600.0, "host_seq_us": 120.0, "draft_step_launches": 40.0}
    tpot = predict(truth, price([(m, setting) for m in rows])) * (1 + 0.03 * np.sin(np.arange(len(rows)) * 2.1))
    script = Path(sys.executable).parent / "speedplan"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "speedplan.entry"]
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "runs.csv"
        csv.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\n" + "".join(
            f"{m.mechanism},{m.batch},{m.draft_len},{m.context},{t:.4f},{m.acceptance_length or ''}\n"
            for m, t in zip(rows, tpot)))
        for i in range(repeats):
            t0 = time.perf_counter()
            subprocess.run([*command, "calibrate", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                            "--measurements", str(csv), "--out", str(Path(tmp) / f"fit{i}.json")],
                           check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> None:
    import argparse

    global GRID_HW
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid-hardware", default=GRID_HW,
                    help=f"the GPU assumed for {GRID_SOURCE}'s rows, which state none (default {GRID_HW})")
    GRID_HW = ap.parse_args(argv).grid_hardware
    pd.set_option("display.width", 200)
    print("1. held-out batch sizes (engine sweeps with >= 5 batch sizes)")
    for r in held_out_batches():
        print(f"  {r['sweep']}\n    {r['profile']:<24} train B {r['train B']}, test B {r['test B']}: "
              f"median {r['median error']:.1%}, max {r['max error']:.1%}")
    print(f"\n1b. held-out batch sizes on the throughput grid of {GRID_SOURCE} ({GRID_HW} TP{GRID_TP} assumed)")
    grid_rows = held_out_grid()
    for r in grid_rows:
        print(f"  {r['sweep']}\n    {r['profile']:<24} train B {r['train B']}, test B {r['test B']}: "
              f"median {r['median error']:.1%}, max {r['max error']:.1%}")
    for label in ("documented profile", "fitted on 3 batch sizes"):
        err = np.concatenate([r["errors"] for r in grid_rows if r["profile"] == label])
        print(f"  all draft lengths, {label}: {len(err)} held-out rows, median {np.median(err):.1%}, max {err.max():.1%}")
    print(f"\n2. schedule regret on {GRID_SOURCE} (Qwen3-235B-A22B, {GRID_HW} TP{GRID_TP} assumed)")
    regret = schedule_regret()
    print(regret.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    for col in [c for c in regret.columns if c.endswith("regret")]:
        print(f"  {col}: mean {regret[col].mean():.1%}, max {regret[col].max():.1%}")
    print(f"\n3. calibrate on 20 rows (fit + leave-one-out): {calibrate_20_rows_s():.2f} s (median of 5)")
    print(f"   speedplan calibrate on 20 noisy rows, whole process: {calibrate_cli_s():.2f} s (median of 3)")


if __name__ == "__main__":
    main()
