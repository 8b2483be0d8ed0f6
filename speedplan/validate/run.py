"""`speedplan validate`: the planner's predictions against the reference runtime, measured on
the same machine (DESIGN.md, "Validation protocol").

1. Latencies come from the device's profile (profiles/cpu-local, measured by
   `speedplan bench --device cpu`), or the preset's roofline when there is none.
2. Calibration half of the prompts: acceptance is fitted per drafter from its own run
   (per-position for chains, per-rank for trees), and the runtime's fixed per-step overhead
   (sampling, bookkeeping: everything that is not a forward pass) is measured on plain decoding.
3. The planner predicts t_step, AL and speedup for every (mechanism, B, D) of the grid.
4. Evaluation half: the runtime measures the same.
5. Errors |pred − meas| / meas (median, p90) and the planner's regret per batch size.

Times are seconds. This module imports torch (through the runtime) only inside functions.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from speedplan.plan.acceptance import Acceptance, fit_positions, fit_ranks
from speedplan.cost.ops import load_cost_model
from speedplan.errors import SpeedplanInputError
from speedplan.cost.forward import forward_cost
from speedplan.plan.mechanisms import REGISTRY, Mechanism
from speedplan.plan.mechanisms.heads import head_spec
from speedplan.specs.model import get_model
from speedplan.plan.sweep import sweep

TARGET_PRESET = "smollm2-135m"


@dataclass(frozen=True)
class ValidationGrid:
    mechanisms: tuple[str, ...] = ("ngram", "draft-model", "eagle", "eagle-tree")
    batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    draft_lens: tuple[int, ...] = tuple(range(0, 8))
    max_new_tokens: int = 32
    min_prompts: int = 8  # prompts per point at least (several waves at small B)
    calibration_prompts: int = 8
    calibration_draft_len: int = 7
    tree_topk: int = 4
    tree_max_nodes: int = 16

    def tree_nodes(self, depth: int) -> int:
        """Nodes verified by the runtime's tree at this depth (root excluded)."""
        return min(self.tree_topk * depth, self.tree_max_nodes)


FULL = ValidationGrid()
QUICK = ValidationGrid(mechanisms=("ngram", "eagle"), batches=(1, 2), draft_lens=(0, 1, 3), max_new_tokens=16,
                       min_prompts=2, calibration_prompts=2, calibration_draft_len=3)


@dataclass
class Measured:
    t_step: float  # mean step time over steps where the whole batch was active
    acceptance_length: float
    context: float
    steps: int
    identical: bool | None = None
    extra: dict = field(default_factory=dict)


def _fit_acceptance(mechanism: str, steps, draft_len: int, topk: int) -> Acceptance:
    counts = np.array([a for s in steps for a in s.accepted], dtype=int)
    source = f"fitted on calibration prompts ({len(counts)} sequence-steps, D={draft_len})"
    if mechanism.endswith("-tree"):
        records = [{"accepted": s.accepted, "accepted_ranks": s.accepted_ranks} for s in steps]
        ranks = fit_ranks(records, draft_len, topk)
        if ranks.sum() >= 1.0:
            ranks = ranks * 0.999 / ranks.sum()
        return Acceptance.per_rank(np.maximum(ranks, 1e-6), source)
    return Acceptance.positional(np.maximum(fit_positions(np.bincount(counts), draft_len), 1e-6), source)


def _full_batch_mean(steps, batch: int, attr: str) -> float:
    full = [getattr(s, attr) for s in steps if s.batch == batch] or [getattr(s, attr) for s in steps]
    return float(np.mean(full))


def run_validation(grid: ValidationGrid = FULL, hardware: str = "cpu-local", progress=None) -> tuple[pd.DataFrame, dict]:
    """Calibrate, predict, measure; returns (per-point table, summary)."""
    import torch

    from speedplan.runtime.api import DrafterOptions, encode_prompts, load_target, make_drafter
    from speedplan.runtime.generate import generate
    from speedplan.runtime.io.prompts import stdlib_prompts

    t_start = time.perf_counter()
    torch.manual_seed(0)
    say = progress or (lambda msg: None)
    cost = load_cost_model(hardware)
    target = load_target("smollm2")
    tok = target.tokenizer
    eos = tok.eos_ids if tok is not None else []
    calib = encode_prompts(tok, [p.text for p in stdlib_prompts("calibration")], chat=True)
    evals = encode_prompts(tok, [p.text for p in stdlib_prompts("evaluation")], chat=True)
    need = max(max(grid.batches), grid.min_prompts)
    if len(evals) < need or len(calib) < grid.calibration_prompts:
        raise SpeedplanInputError(f"validation needs {need} evaluation prompts, the prompt set has {len(evals)}")

    def run(mech: str, prompts, batch: int, draft_len: int):
        opts = DrafterOptions(tree_topk=grid.tree_topk, tree_depth=max(draft_len, 1),
                              tree_nodes=grid.tree_nodes(max(draft_len, 1)))
        drafter = make_drafter(mech if draft_len else "none", target.model, opts)
        return generate(target.model, prompts, drafter, draft_len, batch, max_new_tokens=grid.max_new_tokens,
                        eos_ids=eos, seed=0), drafter

    # ---- 2. calibration ------------------------------------------------------------
    say("calibration: plain decoding")
    plain_cal, _ = run("none", calib[: grid.calibration_prompts], 1, 0)
    overhead_s = float(np.mean([s.t_accept_s + s.t_overhead_s for s in plain_cal.steps]))
    target_spec = replace(get_model(TARGET_PRESET), dtype="fp32")
    # Host time per decoder layer: what a plain decode forward takes beyond its priced ops
    cal_context = float(np.mean([c for s in plain_cal.steps for c in s.context]))
    priced_s = float(forward_cost(cost, target_spec, 1, 1, cal_context).total_s)
    verify_s = _full_batch_mean(plain_cal.steps, 1, "t_verify_s")  # the statistic step 4 measures
    layer_overhead_us = max(verify_s - priced_s, 0.0) / target_spec.layers * 1e6
    hw = cost.hardware.with_overrides(step_overhead_us=overhead_s * 1e6, layer_overhead_us=layer_overhead_us)
    cost = replace(cost, hardware=hw)
    mechs: list[Mechanism] = []
    for name in grid.mechanisms:
        say(f"calibration: {name}")
        res, drafter = run(name, calib[: grid.calibration_prompts], 1, grid.calibration_draft_len)
        acc = _fit_acceptance(name, res.steps, grid.calibration_draft_len, grid.tree_topk)
        if name == "ngram":
            # calibrated at B=1; the runtime's lookup loops over sequences, so it is per sequence
            lookup_us = float(np.mean([s.t_draft_s for s in res.steps])) * 1e6
            mechs.append(REGISTRY["ngram"](acc, acc.source, lookup_us=0.0, lookup_us_per_seq=lookup_us))
        elif name == "draft-model":
            layers = drafter.draft_layers()
            vocab = drafter.draft_vocab_size() or target_spec.vocab
            student = replace(target_spec, name="smollm2-student", layers=int(layers), vocab=vocab)
            mechs.append(REGISTRY["draft-model"](acc, acc.source, draft=student))
        elif name in ("eagle", "eagle-tree"):
            vocab = drafter.draft_vocab_size()
            tree = {"topk": grid.tree_topk} if REGISTRY[name].is_tree else {}
            mechs.append(REGISTRY[name](acc, acc.source, draft=head_spec(target_spec, name, vocab),
                                        draft_vocab=vocab, **tree))
        else:
            raise SpeedplanInputError(f"validate: unknown mechanism {name}")

    # ---- 3. predict ----------------------------------------------------------------
    n_eval = [len(p) for p in evals[:need]]
    context = int(round(np.mean(n_eval) + grid.max_new_tokens / 2))
    nodes = sorted({grid.tree_nodes(d) for d in grid.draft_lens if d >= 1})
    pred = sweep(target_spec, cost, mechs, grid.batches, grid.draft_lens, [context], tree_nodes=nodes).frame
    is_tree = pred["mechanism"].isin(["eagle-tree", "medusa"])
    wanted_nodes = pred["draft_len"].map(lambda d: grid.tree_nodes(max(int(d), 1)) + 1)
    pred = pred[~is_tree | (pred["verify_tokens"] == wanted_nodes)]

    # ---- 4. measure ----------------------------------------------------------------
    rows = []
    plan = [("none", b, 0) for b in grid.batches] + [
        (m.label, b, d) for m in mechs for b in grid.batches for d in grid.draft_lens if d >= 1]
    base_meas: dict[int, float] = {}
    for i, (label, batch, d) in enumerate(plan, 1):
        n = max(batch, grid.min_prompts)
        n = int(math.ceil(n / batch) * batch)
        say(f"[{i}/{len(plan)}] {label} B={batch} D={d}")
        res, _ = run(label.split(":")[0], evals[:n], batch, d)
        t_step = _full_batch_mean(res.steps, batch, "t_step_s")
        if label == "none":
            base_meas[batch] = t_step
        p = pred[(pred.mechanism == label) & (pred.batch == batch) & (pred.draft_len == d)].iloc[0]
        al = res.acceptance_length
        rows.append({
            "mechanism": label, "batch": batch, "draft_len": d, "verify_tokens": int(p.verify_tokens), "context": context,
            "pred_t_step": float(p.t_step_s), "meas_t_step": t_step,
            "pred_t_verify": float(p.t_verify_s), "meas_t_verify": _full_batch_mean(res.steps, batch, "t_verify_s"),
            "pred_t_draft": float(p.t_draft_s), "meas_t_draft": _full_batch_mean(res.steps, batch, "t_draft_s"),
            "pred_t_overhead": float(p.t_overhead_s),
            "meas_t_overhead": _full_batch_mean(res.steps, batch, "t_overhead_s") + _full_batch_mean(res.steps, batch, "t_accept_s"),
            "pred_acceptance_length": float(p.acceptance_length), "meas_acceptance_length": al,
            "pred_speedup": float(p.speedup), "meas_speedup": al * base_meas[batch] / t_step,
            "pred_tokens_per_s": float(p.tokens_per_s_per_gpu), "meas_tokens_per_s": batch * al / t_step,
            "meas_context": float(np.mean([c for s in res.steps for c in s.context])),
            "steps": len(res.steps), "cost_source": p.cost_source, "acceptance_source": p.acceptance_source,
        })
    table = pd.DataFrame(rows)
    summary = summarize(table)
    summary.update({
        "grid": asdict(grid), "hardware": hardware, "cost_origin": cost.origin,
        "step_overhead_us_measured": overhead_s * 1e6, "layer_overhead_us_measured": layer_overhead_us,
        "calibration_verify_s": verify_s, "calibration_context": cal_context,  # for speedplan.reprice
        "context": context,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": round(time.perf_counter() - t_start, 1),
        "torch_threads": torch.get_num_threads(),
    })
    return table, summary


def _err(pred, meas) -> np.ndarray:
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return np.abs(pred - meas) / meas


def summarize(table: pd.DataFrame) -> dict:
    """Median / p90 relative errors and the planner's regret per batch size (fractions)."""
    spec = table[table.draft_len > 0]
    step = _err(table.pred_t_step, table.meas_t_step)
    al = _err(spec.pred_acceptance_length, spec.meas_acceptance_length)
    sp = _err(spec.pred_speedup, spec.meas_speedup)
    regret = {}
    for batch, g in table.groupby("batch"):
        pick = g.loc[g.pred_tokens_per_s.idxmax()]
        regret[int(batch)] = float(1 - pick.meas_tokens_per_s / g.meas_tokens_per_s.max())
    q = lambda x, p: float(np.percentile(x, p)) if len(x) else float("nan")
    return {
        "points": int(len(table)),
        "step_time_median_error": q(step, 50), "step_time_p90_error": q(step, 90),
        "al_median_error": q(al, 50), "al_p90_error": q(al, 90),
        "speedup_median_error": q(sp, 50), "speedup_p90_error": q(sp, 90),
        "max_regret": max(regret.values()) if regret else float("nan"),
        "regret_per_batch": regret,
    }


def write_validation(table: pd.DataFrame, summary: dict, out_dir: Path) -> list[Path]:
    """validation.csv, summary.json and report.html (with parity plots) into out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "validation.csv", index=False, float_format="%.6g")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    from speedplan.validate.report import write_validation_report

    write_validation_report(table, summary, out_dir)
    return sorted(out_dir.iterdir())
