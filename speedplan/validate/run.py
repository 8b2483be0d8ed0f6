"""`speedplan validate`: the planner's predictions against the reference runtime, measured on
the same machine (DESIGN.md, "Validation protocol").

1. Latencies come from the device's profile: the shipped one measured on this CPU
   (`device_profile.profile_for_this_cpu`), else, on a full run, one `speedplan bench --device
   cpu --grid quick` measures first into the output folder (`device_profile.measure_this_cpu`,
   the CLI's --measure-cpu), or the preset's roofline when there is none.
2. Calibration split of the prompts (the drafters were trained on a third, the training
   split): acceptance is fitted per drafter from its own runs (per-position for chains, as runs
   of copied text for n-gram lookup: `plan.acceptance.fit_runs`; per-rank for trees), and the `speedplan-runtime` engine profile is fitted to the step times
   of plain decoding and every drafter at three batch sizes, and to the parts of those steps
   the runtime times (the target's forward, the drafting, the rest), by `speedplan.engine.calibrate` (the
   code `speedplan calibrate` runs).
3. The planner predicts t_step, AL and speedup for every (mechanism, B, D) of the grid, priced
   through that engine profile, each batch size at the context its own waves of prompts make
   the runtime's attention read (each wave's longest prompt: `attended_context`).
4. Evaluation split: the runtime measures the same. This VM slows by up to 1.8x for seconds to
   minutes at a time (other tenants), and slowing is all it does: so every point is timed in
   `rounds` rounds, the second in an order rotated by half the plan (a point's two timings are
   minutes apart), and the faster round is kept (`round_spread` says how far apart they were;
   `meas_t_step_first` is the first round alone). Plain decoding is also timed as the pair of
   every speculative point (below): its step time is the fastest of as many timings as it took,
   as read on average over its own rounds and all those pairs (`plain_step_s`;
   `meas_t_step_own` is its own rounds' fastest). A point whose two fastest rounds differ by
   more than `settle_tolerance` is timed in more rounds, up to `max_timings` (`settle_rounds`).
   A point's prompts are spread evenly through the split (`spread`), not its first few. Greedy
   decoding makes the rounds' tokens identical, so AL comes from the first. A measured speedup
   divides by plain decoding timed right before the point at the same batch and on the same
   prompts, in each round (`paired_plain`), so drift cannot put the two in different spells; the
   round whose pair ran fastest gives the ratio (`paired_ratio`).
   The calibration runs are timed in the same rounds, spread evenly through the evaluation
   runs (`interleave`), and the fit and the predictions come after all timing: the fit sees
   calibration prompts only, but the machine at the same pace as the evaluation (until
   2026-12-02 calibration ran first, and a 14% slower spell there became host terms).
   The target's prefill of each wave is computed once and copied (`PrefillCache`): it is not
   timed, and it was most of a B = 16 run's wall time.
5. Before regret is read, each batch's pick and the point with the highest measured speedup
   are timed in two more paired rounds, until the best is a point timed again (at most
   `confirm_passes` passes: `points_to_confirm`, the winner's curse).
6. Errors |pred − meas| / meas (median, p90) and the planner's regret per batch size (from
   measured speedups, each against its paired plain run).

Times are seconds. This module imports torch (through the runtime) only inside functions.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from speedplan.cost.ops import load_cost_model
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms import TREE_MECHANISMS
from speedplan.plan.pick import best_per_batch
from speedplan.runtime.options import IMPLAUSIBLE
from speedplan.specs.model import get_model
from speedplan.engine.calibrate import Setting
from speedplan.validate.timing import (measured_ratio, merge_timed, plain_step_s, points_to_confirm, settle_rounds,
                                      settle_spread, timed_rounds)
from speedplan.validate.device_profile import machine_check, profile_for_this_cpu
from speedplan.validate.calibration import (_full_batch_mean, attended_context, attended_measured, calibration_plan,
                                            calibration_runs, drafter_shapes, fit_runtime, interleave,
                                            predicted_grid, predicted_parts, spread, timed_steps)

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
    confirm_passes: int = 3  # passes re-timing each batch's pick and measured best (`points_to_confirm`); 0 = none
    settle_tolerance: float = 0.05  # time a point again while its two fastest rounds differ by more (`settle_rounds`)
    max_timings: int = 3  # ... up to this many timings a point (rounds included); <= rounds: never

    def tree_nodes(self, depth: int) -> int:
        """Nodes verified by the runtime's tree at this depth (root excluded)."""
        return min(self.tree_topk * depth, self.tree_max_nodes)


FULL = ValidationGrid()
QUICK = ValidationGrid(mechanisms=("ngram", "eagle"), batches=(1, 2), draft_lens=(0, 1, 3), max_new_tokens=16,
                       min_prompts=2, calibration_prompts=2, calibration_draft_len=3, calibration_batches=(1, 2),
                       rounds=1, confirm_passes=1)


def run_validation(grid: ValidationGrid = FULL, hardware: str = "cpu-local", progress=None) -> tuple[pd.DataFrame, dict]:
    """Measure (calibration runs among the evaluation runs), calibrate, predict, compare; returns
    (per-point table, summary)."""
    import torch

    from speedplan.runtime.api import DrafterOptions, encode_prompts, load_target, make_drafter
    from speedplan.runtime.generate import PrefillCache, generate
    from speedplan.runtime.io.prompts import stdlib_prompts

    t_start = time.perf_counter()
    torch.manual_seed(0)
    say = progress or (lambda msg: None)
    hardware, chosen = profile_for_this_cpu(hardware)
    if chosen:
        say(chosen)
    cost = load_cost_model(hardware)
    if not cost.hardware.is_cpu:  # a GPU preset or profile priced this CPU's runs without a word (2026-12-05)
        raise SpeedplanInputError(f"--hardware {hardware}: describes {cost.hardware.name}, a GPU; validate runs the "
                                  "runtime on this CPU: give a CPU profile or preset (cpu-local)")
    machine = machine_check(cost)
    if machine["warning"]:
        say(machine["warning"])
    target = load_target("smollm2")
    tok = target.tokenizer
    eos = tok.eos_ids if tok is not None else []
    calib = encode_prompts(tok, [p.text for p in stdlib_prompts("calibration")], chat=True)
    evals = encode_prompts(tok, [p.text for p in stdlib_prompts("evaluation")], chat=True)
    need = max(max(grid.batches), grid.min_prompts)
    if len(evals) < need or len(calib) < max(grid.calibration_prompts, *grid.calibration_batches):
        raise SpeedplanInputError(f"validation needs {need} evaluation prompts, the prompt set has {len(evals)}")

    prefills = PrefillCache()  # the target's prefill of each wave, computed once (it is not what is timed)

    def run(mech: str, prompts, batch: int, draft_len: int, new_tokens: int = grid.max_new_tokens, cache=prefills):
        opts = DrafterOptions(tree_topk=grid.tree_topk, tree_depth=max(draft_len, 1),
                              tree_nodes=grid.tree_nodes(max(draft_len, 1)))
        drafter = make_drafter(mech if draft_len else "none", target.model, opts)
        return generate(target.model, prompts, drafter, draft_len, batch, max_new_tokens=new_tokens,
                        eos_ids=eos, seed=0, prefills=cache), drafter

    def prompts_for(batch: int) -> list:  # a point's prompts: whole waves, at least min_prompts
        return spread(evals, int(math.ceil(max(batch, grid.min_prompts) / batch) * batch))

    # ---- 2. measure: calibration runs spread through the evaluation runs ------------
    cal_plan = calibration_plan(grid)
    eval_plan = [("none", b, 0) for b in grid.batches] + [
        (name, b, d) for name in grid.mechanisms for b in grid.batches for d in grid.draft_lens if d >= 1]
    measure_calibration, drafters = calibration_runs(grid, calib, run)
    paired: dict[tuple, list] = {}  # speculative point -> plain step time just before it, per round

    def measure(item, r):
        if item[0] == "calibration":
            return measure_calibration(item[1:], r)
        _, name, batch, d = item
        prompts = prompts_for(batch)
        if name != "none" and grid.paired_plain:
            plain, _ = run("none", prompts, batch, 0)
            paired.setdefault(item[1:], []).append(_full_batch_mean(plain.steps, batch, "t_step_s"))
        res, _ = run(name, prompts, batch, d)
        return res, _full_batch_mean(res.steps, batch, "t_step_s")

    def describe(item):
        return (f"calibration {item[1]} B={item[2]} D={grid.calibration_draft_len if item[1] != 'none' else 0}"
                if item[0] == "calibration" else f"{item[1]} B={item[2]} D={item[3]}")

    plan = interleave([("evaluation", *x) for x in eval_plan], [("calibration", *x) for x in cal_plan])
    for name in ("none", *grid.mechanisms):  # untimed warm-up (api.warm_up): first calls allocate and pick kernels,
        d = 0 if name == "none" else grid.calibration_draft_len  # which the first timed run (plain, B = 1) had paid
        run(name, calib[:1], 1, d, new_tokens=min(4, grid.max_new_tokens), cache=None)
    timed_list = timed_rounds(plan, measure, grid.rounds, say, describe)
    timed_list = settle_rounds(plan, timed_list, measure, grid.settle_tolerance, grid.max_timings, say, describe)
    timed_all = dict(zip(plan, timed_list))
    settled_again = sum(len(ts) > grid.rounds for _, _, ts in timed_list)  # points `settle_rounds` timed again
    cal_timed = [timed_all[("calibration", *x)] for x in cal_plan]

    # ---- 3. calibrate on the calibration runs, then predict -------------------------
    target_spec = replace(get_model(TARGET_PRESET), dtype="fp32")
    mechs, fit, calibration_rows, reprice_facts = fit_runtime(grid, cost, cal_plan, cal_timed, drafters, target_spec)
    engine = fit.profile

    # each batch priced at the context its own waves of prompts make the runtime's attention read
    context = attended_context([len(p) for p in spread(evals, need)], 1, grid.max_new_tokens)
    contexts = {b: attended_context([len(p) for p in prompts_for(b)], b, grid.max_new_tokens) for b in grid.batches}
    pred = predicted_grid(grid, target_spec, cost, mechs, contexts, engine)

    # ---- 4. time each batch's pick and measured best again (points_to_confirm) -------
    label_of = {m.name: m.label for m in mechs}

    def pred_row(label: str, batch: int, d: int):
        return pred[(pred.mechanism == label) & (pred.batch == batch) & (pred.draft_len == d)].iloc[0]

    def measured_speedup(item) -> float:
        if item[0] == "none":
            return 1.0
        first, _, seconds = timed_all[("evaluation", *item)]
        base = min(timed_all[("evaluation", "none", item[1], 0)][2])
        return first.acceptance_length * measured_ratio(paired.get(item), seconds, base)[0]

    def planner_pick(points: list) -> tuple:
        """The point the planner recommends among `points` (one batch size), by its own rule."""
        rows = pd.DataFrame([pred_row(label_of.get(x[0], x[0]), *x[1:]) for x in points])
        return points[picked_row(rows.tokens_per_s_per_gpu, rows.verify_tokens, rows.feasible)]

    picks = {b: planner_pick([x for x in eval_plan if x[1] == b]) for b in grid.batches}
    confirmed: set = set()
    for _ in range(grid.confirm_passes):
        todo = points_to_confirm({x: measured_speedup(x) for x in eval_plan}, picks, confirmed)
        if not todo:
            break
        items = [("evaluation", *x) for x in todo]
        say(f"timing {len(todo)} point{'s' * (len(todo) != 1)} again before regret is read (each batch's pick and "
            f"measured best, two more paired rounds each): {2 * len(todo)} more timings")
        for item, again in zip(items, timed_rounds(items, measure, 2, say, lambda it: "again: " + describe(it))):
            timed_all[item] = merge_timed(timed_all[item], again)
        confirmed |= set(todo)
    timed = [timed_all[("evaluation", *x)] for x in eval_plan]

    # ---- 5. compare ----------------------------------------------------------------
    rows = []
    labelled = [(label_of.get(name, name), b, d) for name, b, d in eval_plan]  # eval_plan by mechanism label
    timed_again = {(label_of.get(name, name), b, d) for name, b, d in confirmed}
    paired = {(label_of.get(name, name), b, d): ts for (name, b, d), ts in paired.items()}
    base_meas = {b: min(ts) for (label, b, _), (_, _, ts) in zip(labelled, timed) if label == "none"}
    setting = Setting(target_spec, cost, 1, mechanisms={m.label: m for m in mechs})
    verify_s, draft_s = predicted_parts(engine, setting, [
        (label, b, d, contexts[b], grid.tree_nodes(d) if label in TREE_MECHANISMS and d else None)
        for label, b, d in labelled])
    for i, ((label, batch, d), (first, res, seconds)) in enumerate(zip(labelled, timed)):
        # measured speedup: against the plain run timed right before this point (the VM's speed
        # drifts by tens of percent over minutes), in the round whose pair ran fastest; without
        # pairing, against the batch's one plain point
        pairs = paired.get((label, batch, d))
        plain_ratio, pair_round = measured_ratio(pairs, seconds, base_meas[batch])
        # plain decoding: its own rounds and the plain runs paired with the batch's speculative points, the same workload
        t_step = plain_step_s(seconds, paired, batch) if label == "none" else min(seconds)
        p = pred_row(label, batch, d)
        pred_verify, pred_draft = float(verify_s[i]), float(draft_s[i])
        al = first.acceptance_length
        rows.append({
            "mechanism": label, "batch": batch, "draft_len": d, "verify_tokens": int(p.verify_tokens), "context": contexts[batch],
            "pred_t_step": float(p.t_step_s), "meas_t_step": t_step,
            "pred_t_verify": pred_verify, "meas_t_verify": _full_batch_mean(res.steps, batch, "t_verify_s"),
            "pred_t_draft": pred_draft, "meas_t_draft": _full_batch_mean(res.steps, batch, "t_draft_s"),
            "pred_t_overhead": float(p.t_step_s) - pred_verify - pred_draft,
            "meas_t_overhead": (_full_batch_mean(res.steps, batch, "t_overhead_s")
                                + _full_batch_mean(res.steps, batch, "t_accept_s")),
            "round_spread": max(seconds[:grid.rounds]) / min(seconds[:grid.rounds]) - 1.0,  # the first rounds
            "settle_spread": settle_spread(seconds), "meas_t_step_first": seconds[0], "meas_t_step_own": min(seconds),
            "pred_acceptance_length": float(p.acceptance_length), "meas_acceptance_length": al,
            "pred_speedup": float(p.speedup), "meas_speedup": al * plain_ratio,
            "meas_t_plain_paired": float(pairs[pair_round]) if pairs else float("nan"),
            "meas_t_step_paired": float(seconds[pair_round]) if pairs else float("nan"),
            "pred_tokens_per_s": float(p.tokens_per_s_per_gpu), "meas_tokens_per_s": batch * al / t_step,
            "meas_context": attended_measured(first.steps, batch),  # the longest row's KV length, mean over the timed steps
            "meas_context_mean_row": float(np.mean([c for s in timed_steps(first.steps, batch) for c in s.context])),
            "steps": len(first.steps), "cost_source": p.cost_source, "acceptance_source": p.acceptance_source,
            "timed_again": (label, batch, d) in timed_again, "timings": len(seconds),
        })
    table = pd.DataFrame(rows)
    summary = summarize(table)
    summary.update({
        "grid": asdict(grid), "hardware": hardware, "cost_origin": cost.origin,
        "cpu": machine["cpu"], "profile_cpu": machine["profile_cpu"],
        "engine": engine.to_json(),
        "calibration": [{**asdict(m), "predicted": float(p)} for m, p in zip(calibration_rows, fit.predicted)],
        "rounds": grid.rounds,
        "timed_again": sorted([list(k) for k in timed_again]),  # points_to_confirm: two more rounds each
        "round_spread_median": float(table["round_spread"].median()),
        "round_spread_max": float(table["round_spread"].max()),
        "settled_again": int(settled_again),  # timed again by settle_rounds (of every point and calibration run)
        # every timing of every point (seconds per step, in the order taken) and the plain runs paired with them
        "timings": [{"point": [label, b, d], "step_s": [round(t, 6) for t in ts],
                     "plain_s": [round(t, 6) for t in paired.get((label, b, d), [])]}
                    for (label, b, d), (_, _, ts) in zip(labelled, timed)],
        "settle_spread_median": float(table["settle_spread"].median()),
        "step_time_median_error_first_round": float(np.median(_err(table.pred_t_step, table.meas_t_step_first))),
        "layer_overhead_us_measured": engine.launch_us * engine.layer_launches,  # µs per layer, for speedplan.reprice
        **reprice_facts,
        "context": context,
        "context_per_batch": contexts,  # the context each batch's points were priced at
        "drafters": drafter_shapes(drafters),  # what each was priced as (`validate.refit` reads it)
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": round(time.perf_counter() - t_start, 1),
        "torch_threads": torch.get_num_threads(),
    })
    return table, summary


def picked_row(tokens_per_s, verify_tokens, feasible=True) -> int:
    """Which of one batch size's points the planner picks from their predicted tokens/s: its own rule,
    `plan.pick.best_per_batch` (among the feasible, within TIE_TOLERANCE of the most, the fewest verified
    tokens, then the fastest), as `speedplan sweep` and its report pick among the same points (the
    validated grid: one tree size per depth, the runtime's). Until 2026-12-07 validate took the most
    predicted tokens/s, which is not what the planner recommends where a shorter draft is within 1%."""
    rows = pd.DataFrame({"tokens_per_s_per_gpu": np.asarray(tokens_per_s, float), "verify_tokens": np.asarray(verify_tokens),
                         "batch": 0, "context": 0})  # one batch size: one context
    rows["feasible"] = np.broadcast_to(np.asarray(feasible, dtype=bool), len(rows))
    rows["row"] = np.arange(len(rows))
    return int(best_per_batch(rows).row.iloc[0])


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
        pick = g.iloc[picked_row(g.pred_tokens_per_s, g.verify_tokens)]
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
        # speedups above the AL by more than runtime.api.IMPLAUSIBLE: no speculative step here is faster than a
        # plain one, so the machine's speed moved between the paired timings ([mechanism, B, D, speedup, AL])
        "implausible_points": [[str(r.mechanism), int(r.batch), int(r.draft_len), round(float(r.meas_speedup), 3),
                                round(float(r.meas_acceptance_length), 3)] for r in spec.itertuples()
                               if r.meas_speedup > IMPLAUSIBLE * r.meas_acceptance_length],
    }


def write_validation(table: pd.DataFrame, summary: dict, out_dir: Path) -> list[Path]:
    """validation.csv, summary.json and report.html (with parity plots) into out_dir."""
    out_dir = Path(out_dir).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "validation.csv", index=False, float_format="%.6g")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    from speedplan.validate.report import write_validation_report

    write_validation_report(table, summary, out_dir)
    return sorted(out_dir.iterdir())
