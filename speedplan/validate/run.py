"""`speedplan validate`: the planner's predictions against the reference runtime, measured on
the same machine (DESIGN.md, "Validation protocol").

1. Latencies come from the device's profile (speedplan/data/profiles/cpu-local, measured by
   `speedplan bench --device cpu`), or the preset's roofline when there is none.
2. Calibration split of the prompts (the drafters were trained on a third, the training
   split): acceptance is fitted per drafter from its own runs (per-position for chains,
   per-rank for trees), and the `speedplan-runtime` engine profile is fitted to the step times
   of plain decoding and every drafter at three batch sizes, by `speedplan.engine.calibrate`
   (the code `speedplan calibrate` runs).
3. The planner predicts t_step, AL and speedup for every (mechanism, B, D) of the grid, priced
   through that engine profile, each batch size at the mean context of its own prompts.
4. Evaluation split: the runtime measures the same. This VM slows by up to 1.8x for seconds to
   minutes at a time (other tenants), and slowing is all it does: so every point is timed in
   `rounds` rounds, the second in an order rotated by half the plan (a point's two timings are
   minutes apart), and the faster round is kept (`round_spread` says how far apart they were;
   `meas_t_step_first` is the first round alone). A point's prompts are spread evenly through
   the split (`spread`), not its first few. Greedy decoding makes the rounds' tokens
   identical, so AL comes from the first. Calibration runs are timed the same way. A measured
   speedup divides by plain decoding timed right before the point at the same batch and on
   the same prompts, in each round (`paired_plain`), so drift cannot put the two in different
   spells; before 2026-12-01 20:00 it divided by the batch's one plain point.
5. Errors |pred − meas| / meas (median, p90) and the planner's regret per batch size (from
   measured speedups, each against its paired plain run).

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
from speedplan.engine.calibrate import Setting, calibrate
from speedplan.engine.profile import get_engine
from speedplan.engine.readers.measurements import Measurement
from speedplan.plan.mechanisms import REGISTRY, TREE_MECHANISMS, Mechanism
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
    min_prompts: int = 4  # prompts per point at least (several waves at small B)
    calibration_prompts: int = 24  # acceptance is fitted on all of them (at the smallest calibration B)
    calibration_draft_len: int = 7
    calibration_batches: tuple[int, ...] = (1, 4, 16)  # plain decoding and every drafter run at these (the grid's ends and middle)
    tree_topk: int = 4
    tree_max_nodes: int = 16
    rounds: int = 2  # timings per point; the fastest is kept (the VM only ever slows down)
    paired_plain: bool = True  # time plain decoding at the same batch right before every speculative point

    def tree_nodes(self, depth: int) -> int:
        """Nodes verified by the runtime's tree at this depth (root excluded)."""
        return min(self.tree_topk * depth, self.tree_max_nodes)


FULL = ValidationGrid()
QUICK = ValidationGrid(mechanisms=("ngram", "eagle"), batches=(1, 2), draft_lens=(0, 1, 3), max_new_tokens=16,
                       min_prompts=2, calibration_prompts=2, calibration_draft_len=3, calibration_batches=(1, 2),
                       rounds=1)
ENGINE = "speedplan-runtime"  # the engine profile validation calibrates


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
        records = [{"accepted": s.accepted, "accepted_ranks": s.accepted_ranks, "offered_ranks": s.offered_ranks}
                   for s in steps]
        ranks = fit_ranks(records, draft_len, topk)
        if ranks.sum() >= 1.0:
            ranks = ranks * 0.999 / ranks.sum()
        return Acceptance.per_rank(np.maximum(ranks, 1e-6), source)
    return Acceptance.positional(np.maximum(fit_positions(np.bincount(counts), draft_len), 1e-6), source)


def spread(prompts: list, n: int) -> list:
    """`n` prompts evenly spaced through `prompts` (all of them when n >= len). The splits are
    ordered by module: the first 4 evaluation prompts come from two modules, the first 16 from
    six, and those 16 gave n-gram AL 1.30 at D=7 where the whole split gave 1.39 (2026-12-01)."""
    if n >= len(prompts):
        return list(prompts)
    return [prompts[(i * len(prompts)) // n] for i in range(n)]


def _full_batch_mean(steps, batch: int, attr: str) -> float:
    full = [getattr(s, attr) for s in steps if s.batch == batch] or [getattr(s, attr) for s in steps]
    return float(np.mean(full))


def timed_rounds(plan: list, measure, rounds: int, say=lambda msg: None, describe=str) -> list[tuple]:
    """Run `measure(item) -> (result, seconds)` for every item of `plan` in `rounds` rounds, round
    r in the plan's order rotated by r/rounds of its length. Per item: (first round's result,
    fastest round's result, every round's seconds in plan order of rounds)."""
    n = len(plan)
    first: dict[int, object] = {}
    fastest: dict[int, tuple] = {}
    seconds: dict[int, list] = {i: [] for i in range(n)}
    for r in range(rounds):
        shift = (r * n) // rounds
        for k, i in enumerate([*range(shift, n), *range(shift)], 1):
            say(f"[{k + r * n}/{n * rounds}] {describe(plan[i])}" + (f" (round {r + 1} of {rounds})" if rounds > 1 else ""))
            res, t = measure(plan[i], r)
            first.setdefault(i, res)
            seconds[i].append(t)
            if i not in fastest or t < fastest[i][1]:
                fastest[i] = (res, t)
    return [(first[i], fastest[i][0], seconds[i]) for i in range(n)]


def _mechanism(name: str, acc: Acceptance, drafter, target_spec, grid: ValidationGrid, lookup=(0.0, 0.0)) -> Mechanism:
    """The planner's mechanism for one of the runtime's drafters, priced as the drafter is built
    (its own depth and draft vocabulary) with acceptance fitted on the calibration prompts."""
    if name == "ngram":
        return REGISTRY["ngram"](acc, acc.source, lookup_us=lookup[0], lookup_us_per_seq=lookup[1])
    if name == "draft-model":
        vocab = drafter.draft_vocab_size() or target_spec.vocab
        student = replace(target_spec, name="smollm2-student", layers=int(drafter.draft_layers()), vocab=vocab)
        return REGISTRY["draft-model"](acc, acc.source, draft=student)
    if name in ("eagle", "eagle-tree"):
        vocab = drafter.draft_vocab_size()
        tree = {"topk": grid.tree_topk} if REGISTRY[name].is_tree else {}
        return REGISTRY[name](acc, acc.source, draft=head_spec(target_spec, name, vocab), draft_vocab=vocab, **tree)
    raise SpeedplanInputError(f"validate: unknown mechanism {name}")


def _lookup_us(runs) -> tuple[float, float]:
    """The n-gram lookup's host time per step and per sequence (µs), from its mean drafting
    time at the calibration batch sizes (a line through the two points, never negative)."""
    points = sorted((b, float(np.mean([s.t_draft_s for s in res.steps])) * 1e6) for b, res in runs)
    (b1, t1), (b2, t2) = points[0], points[-1]
    per_seq = max((t2 - t1) / (b2 - b1), 0.0) if b2 > b1 else t1 / b1
    return max(t1 - per_seq * b1, 0.0), per_seq


def calibrate_runtime(grid: ValidationGrid, cost, run, calib, target_spec, say
                      ) -> tuple[list[Mechanism], object, list, dict]:
    """Calibration split: acceptance per drafter and the speedplan-runtime engine terms, fitted
    by `speedplan.engine.calibrate` (the code `speedplan calibrate` runs) to the step times of
    plain decoding and of every drafter at the calibration batch sizes (fastest of
    `grid.rounds` timings; acceptance from the first round, which runs every calibration prompt
    at the smallest batch)."""
    drafters = {}
    plan = [(name, b) for name in ("none", *grid.mechanisms) for b in grid.calibration_batches]

    def measure(item, r):
        name, b = item
        d = 0 if name == "none" else grid.calibration_draft_len
        # acceptance comes from all calibration prompts at the smallest batch in the first round;
        # timings need only a few waves
        count = grid.calibration_prompts if b == min(grid.calibration_batches) and r == 0 else 2 * b
        res, drafters[name] = run(name, spread(calib, int(math.ceil(max(b, count) / b) * b)), b, d)
        return res, _full_batch_mean(res.steps, b, "t_step_s")

    timed = timed_rounds(plan, measure, grid.rounds, lambda msg: say(f"calibration {msg}"),
                         lambda item: f"{item[0]} B={item[1]}")
    runs: dict[str, list] = {}
    timing: dict[str, list] = {}
    for (name, b), (first, fast, _) in zip(plan, timed):
        runs.setdefault(name, []).append((b, first))
        timing.setdefault(name, []).append((b, fast))
    mechs = []
    for name in grid.mechanisms:
        steps = [s for _, res in runs[name] for s in res.steps]
        acc = _fit_acceptance(name, steps, grid.calibration_draft_len, grid.tree_topk)
        lookup = _lookup_us(timing[name]) if name == "ngram" else (0.0, 0.0)
        mechs.append(_mechanism(name, acc, drafters[name], target_spec, grid, lookup))
    by_name = {m.name: m for m in mechs}
    measured = []
    for name, rs in timing.items():
        for (b, res), (_, first) in zip(rs, runs[name]):
            d = 0 if name == "none" else grid.calibration_draft_len
            ctx = int(round(np.mean([c for s in res.steps for c in s.context])))
            measured.append(Measurement(by_name[name].label if name != "none" else "none", b, d, ctx, "step_ms",
                                        _full_batch_mean(res.steps, b, "t_step_s") * 1e3,
                                        first.acceptance_length if d else None, f"calibration {name} B={b} D={d}",
                                        grid.tree_nodes(d) if name.endswith("-tree") else None))
    base = get_engine(ENGINE)
    if cost.origin == "measured" and "kernel_floor_us" in cost.hardware.extra.get("measured", {}):
        base = base.with_terms({"launch_us": cost.hardware.kernel_floor_us},
                               f"measured: launch floor in floors.csv of the profile ({cost.hardware.notes})")
    setting = Setting(target_spec, cost, 1, f"{target_spec.name} on {cost.hardware.name}",
                      mechanisms={m.label: m for m in mechs})
    fit = calibrate(base, [(m, setting) for m in measured], name=ENGINE,
                    described=f"speedplan validate calibration split, {len(measured)} runs")
    plain = dict(timing["none"])[1]
    reprice = {"calibration_verify_s": _full_batch_mean(plain.steps, 1, "t_verify_s"),  # for reprice
               "calibration_context": float(np.mean([c for s in plain.steps for c in s.context]))}
    return mechs, fit, measured, reprice


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
    if len(evals) < need or len(calib) < max(grid.calibration_prompts, *grid.calibration_batches):
        raise SpeedplanInputError(f"validation needs {need} evaluation prompts, the prompt set has {len(evals)}")

    def run(mech: str, prompts, batch: int, draft_len: int):
        opts = DrafterOptions(tree_topk=grid.tree_topk, tree_depth=max(draft_len, 1),
                              tree_nodes=grid.tree_nodes(max(draft_len, 1)))
        drafter = make_drafter(mech if draft_len else "none", target.model, opts)
        return generate(target.model, prompts, drafter, draft_len, batch, max_new_tokens=grid.max_new_tokens,
                        eos_ids=eos, seed=0), drafter

    # ---- 2. calibration ------------------------------------------------------------
    target_spec = replace(get_model(TARGET_PRESET), dtype="fp32")
    mechs, fit, calibration_rows, reprice_facts = calibrate_runtime(grid, cost, run, calib, target_spec, say)
    engine = fit.profile

    # ---- 3. predict ----------------------------------------------------------------
    def prompts_for(batch: int) -> list:  # a point's prompts: whole waves, at least min_prompts
        return spread(evals, int(math.ceil(max(batch, grid.min_prompts) / batch) * batch))

    def context_of(prompts) -> int:  # mean context over a generation: prompt + half the new tokens
        return int(round(np.mean([len(p) for p in prompts]) + grid.max_new_tokens / 2))

    context = context_of(spread(evals, need))
    contexts = {b: context_of(prompts_for(b)) for b in grid.batches}  # each batch priced at its own prompts
    nodes = sorted({grid.tree_nodes(d) for d in grid.draft_lens if d >= 1})
    pred = sweep(target_spec, cost, mechs, grid.batches, grid.draft_lens, sorted(set(contexts.values())),
                 tree_nodes=nodes, engine=engine).frame
    pred = pred[pred["context"] == pred["batch"].map(contexts)]
    is_tree = pred["mechanism"].isin(TREE_MECHANISMS)
    wanted_nodes = pred["draft_len"].map(lambda d: grid.tree_nodes(max(int(d), 1)) + 1)
    pred = pred[~is_tree | (pred["verify_tokens"] == wanted_nodes)]
    eager = engine.launch_us * engine.layer_launches * 1e-6  # seconds of un-captured launches per layer

    # ---- 4. measure ----------------------------------------------------------------
    rows = []
    plan = [("none", b, 0) for b in grid.batches] + [
        (m.label, b, d) for m in mechs for b in grid.batches for d in grid.draft_lens if d >= 1]
    by_label = {m.label: m for m in mechs}

    paired: dict[tuple, list] = {}  # speculative point -> plain step time just before it, per round

    def measure(item, r):
        label, batch, d = item
        prompts = prompts_for(batch)
        if label != "none" and grid.paired_plain:
            plain, _ = run("none", prompts, batch, 0)
            paired.setdefault(item, []).append(_full_batch_mean(plain.steps, batch, "t_step_s"))
        res, _ = run(label.split(":")[0], prompts, batch, d)
        return res, _full_batch_mean(res.steps, batch, "t_step_s")

    timed = timed_rounds(plan, measure, grid.rounds, say, lambda item: f"{item[0]} B={item[1]} D={item[2]}")
    base_meas = {b: min(ts) for (label, b, _), (_, _, ts) in zip(plan, timed) if label == "none"}
    for (label, batch, d), (first, res, seconds) in zip(plan, timed):
        # measured speedup: against the plain run timed right before this point in each round (the
        # VM's speed drifts by tens of percent over minutes), the rounds' ratios averaged; without
        # pairing, against the batch's one plain point
        pairs = paired.get((label, batch, d))
        plain_ratio = float(np.mean([tp / ts for tp, ts in zip(pairs, seconds)])) if pairs else base_meas[batch] / min(seconds)
        t_step = min(seconds)
        p = pred[(pred.mechanism == label) & (pred.batch == batch) & (pred.draft_len == d)].iloc[0]
        mech = by_label.get(label)
        forwards = float(mech.draft_forwards(d, p.verify_tokens - 1)) if mech else 0.0
        pred_verify = float(p.t_verify_s) + eager * target_spec.layers  # as the runtime times it: with its launches
        pred_draft = float(p.t_draft_s) + eager * forwards * (mech.draft_layers() if mech else 0) \
            + (float(mech.host_draft_s(batch, d)) if mech else 0.0)
        al = first.acceptance_length
        rows.append({
            "mechanism": label, "batch": batch, "draft_len": d, "verify_tokens": int(p.verify_tokens), "context": contexts[batch],
            "pred_t_step": float(p.t_step_s), "meas_t_step": t_step,
            "pred_t_verify": pred_verify, "meas_t_verify": _full_batch_mean(res.steps, batch, "t_verify_s"),
            "pred_t_draft": pred_draft, "meas_t_draft": _full_batch_mean(res.steps, batch, "t_draft_s"),
            "pred_t_overhead": float(p.t_step_s) - pred_verify - pred_draft,
            "meas_t_overhead": (_full_batch_mean(res.steps, batch, "t_overhead_s")
                                + _full_batch_mean(res.steps, batch, "t_accept_s")),
            "round_spread": max(seconds) / t_step - 1.0, "meas_t_step_first": seconds[0],
            "pred_acceptance_length": float(p.acceptance_length), "meas_acceptance_length": al,
            "pred_speedup": float(p.speedup), "meas_speedup": al * plain_ratio,
            "meas_t_plain_paired": float(np.mean(pairs)) if pairs else float("nan"),
            "pred_tokens_per_s": float(p.tokens_per_s_per_gpu), "meas_tokens_per_s": batch * al / t_step,
            "meas_context": float(np.mean([c for s in first.steps for c in s.context])),
            "steps": len(first.steps), "cost_source": p.cost_source, "acceptance_source": p.acceptance_source,
        })
    table = pd.DataFrame(rows)
    summary = summarize(table)
    summary.update({
        "grid": asdict(grid), "hardware": hardware, "cost_origin": cost.origin,
        "engine": engine.to_json(),
        "calibration": [{**asdict(m), "predicted": float(p)} for m, p in zip(calibration_rows, fit.predicted)],
        "rounds": grid.rounds,
        "round_spread_median": float(table["round_spread"].median()),
        "round_spread_max": float(table["round_spread"].max()),
        "step_time_median_error_first_round": float(np.median(_err(table.pred_t_step, table.meas_t_step_first))),
        "layer_overhead_us_measured": eager * 1e6,  # launches per layer × launch time, for speedplan.reprice
        **reprice_facts,
        "context": context,
        "context_per_batch": contexts,  # the context each batch's points were priced at
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
    # Regret compares measured speedups, not tokens/s: each speculative point's speedup divides
    # by the plain run timed right before it (paired_plain), so the VM's drift between points
    # timed minutes apart cancels. Without pairing the batch's points share one plain run and
    # the two definitions agree.
    regret, regret_tps = {}, {}
    for batch, g in table.groupby("batch"):
        pick = g.loc[g.pred_tokens_per_s.idxmax()]
        regret[int(batch)] = float(1 - pick.meas_speedup / g.meas_speedup.max())
        regret_tps[int(batch)] = float(1 - pick.meas_tokens_per_s / g.meas_tokens_per_s.max())
    q = lambda x, p: float(np.percentile(x, p)) if len(x) else float("nan")
    return {
        "points": int(len(table)),
        "step_time_median_error": q(step, 50), "step_time_p90_error": q(step, 90),
        "al_median_error": q(al, 50), "al_p90_error": q(al, 90),
        "speedup_median_error": q(sp, 50), "speedup_p90_error": q(sp, 90),
        "max_regret": max(regret.values()) if regret else float("nan"),
        "regret_per_batch": regret,
        "regret_per_batch_unpaired": regret_tps,  # the same from measured tokens/s (points timed apart)
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
