"""The calibration half of `speedplan validate`: which runs calibrate (plain decoding and every
drafter at the calibration batch sizes), where they sit in the timed plan (spread through the
evaluation runs), and the fit of acceptance and of the `speedplan-runtime` engine terms to
them with `speedplan.engine.calibrate`, the code `speedplan calibrate` runs. Times are seconds
unless a name says ms. Imports no torch."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from speedplan.engine.calibrate import Setting, calibrate, price
from speedplan.engine.profile import get_engine
from speedplan.engine.readers.measurements import Measurement
from speedplan.engine.step import step_cost
from speedplan.plan.acceptance import Acceptance, fit_positions, fit_ranks, fit_runs
from speedplan.plan.mechanisms import REGISTRY, TREE_MECHANISMS, Mechanism
from speedplan.plan.mechanisms.heads import head_spec
from speedplan.errors import SpeedplanInputError

ENGINE = "speedplan-runtime"  # the engine profile validation calibrates


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
    if mechanism == "ngram":  # copies of earlier text: agreement comes in runs (`fit_runs`)
        return Acceptance.positional(np.maximum(fit_runs(np.bincount(counts), draft_len), 1e-6), source + ", as runs")
    return Acceptance.positional(np.maximum(fit_positions(np.bincount(counts), draft_len), 1e-6), source)


def spread(prompts: list, n: int) -> list:
    """`n` prompts evenly spaced through `prompts` (all of them when n >= len). The splits are
    ordered by module: the first 4 evaluation prompts come from two modules, the first 16 from
    six, and those 16 gave n-gram AL 1.30 at D=7 where the whole split gave 1.39 (2026-12-01)."""
    if n >= len(prompts):
        return list(prompts)
    return [prompts[(i * len(prompts)) // n] for i in range(n)]


def attended_context(prompt_lengths: list[int], batch: int, new_tokens: int) -> int:
    """The context the runtime's attention reads per row over a generation (tokens): every row
    of a wave attends over the slots of the wave's longest row (`Transformer._step_inputs`:
    span = the longest row + 1; padded slots are masked but read), so a wave costs what its
    longest prompt costs, plus half the new tokens. Averaged over the waves of `batch` prompts.
    The evaluation's waves at B = 16 have their longest prompt 224 tokens above their mean
    (2026-12-02); an engine with paged attention reads each row's own length instead."""
    waves = [prompt_lengths[i:i + batch] for i in range(0, len(prompt_lengths), batch)]
    return int(round(np.mean([max(w) for w in waves]) + new_tokens / 2))


def timed_steps(steps, batch: int | None = None) -> list:
    """The steps whose times a point's measurement averages: those that ran the whole batch
    (`batch` rows; rows that finished leave a wave smaller), or every step when none did or no
    batch is given."""
    return [s for s in steps if batch is None or s.batch == batch] or list(steps)


def attended_measured(steps, batch: int | None = None) -> float:
    """The same from a run's step records: the mean over the `timed_steps` of the longest row's
    KV length before the step (tokens), so a step time and its context describe the same steps.

    Over every step it misstated calibration: a run of two waves times the whole-batch steps,
    most of them in the wave of longer prompts (its rows finish together; the shorter wave's
    rows end at EOS apart), while the mean over all steps counted the shorter wave's tail of
    small batches too. On 2026-12-05 (AMD EPYC) plain decoding at B = 16 on the calibration
    prompts was timed over steps attending 507 tokens and fitted as 450; EAGLE at D = 7 over 506,
    fitted as 432. The fit made up the difference in its terms, and the evaluation at B = 16,
    one wave of 16 whose timed steps attend about what its prompts say, came out 12% high."""
    return float(np.mean([max(s.context) for s in timed_steps(steps, batch)]))


def _full_batch_mean(steps, batch: int, attr: str) -> float:
    return float(np.mean([getattr(s, attr) for s in timed_steps(steps, batch)]))


def _mechanism(name: str, acc: Acceptance, drafter, target_spec, grid, lookup=(0.0, 0.0)) -> Mechanism:
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
    time at the calibration batch sizes over the steps that ran the whole batch (`timed_steps`,
    as its draft_ms rows and the evaluation's measure it), a line through the smallest and
    largest, never negative. Until 2026-12-05 the means took every step, the tail of a wave
    whose rows had ended too: at B = 16 the line then priced 2.10 ms of drafting at D = 7 where
    the whole-batch steps took 2.77 ms, in two runs on the Zen 3 EPYC (the fit's largest
    residual, 24%)."""
    return lookup_line([(b, _full_batch_mean(res.steps, b, "t_draft_s") * 1e6) for b, res in runs])


def lookup_line(points) -> tuple[float, float]:
    """(µs per step, µs per sequence) of a line through the (batch, drafting µs) points of the
    smallest and largest batch, neither negative (`_lookup_us`)."""
    points = sorted(points)
    (b1, t1), (b2, t2) = points[0], points[-1]
    per_seq = max((t2 - t1) / (b2 - b1), 0.0) if b2 > b1 else t1 / b1
    return max(t1 - per_seq * b1, 0.0), per_seq


def drafter_shapes(drafters: dict) -> dict:
    """What each drafter the calibration built was priced as: its draft vocabulary and its
    decoder layers (None where it has none: n-gram lookup, a head's layers come from its spec)."""
    return {name: {"draft_vocab": d.draft_vocab_size(), "draft_layers": d.draft_layers()}
            for name, d in drafters.items() if d is not None}


def predicted_grid(grid, target_spec, cost, mechs, contexts: dict, engine):
    """The planner's row for every (mechanism, B, D) of the grid, priced on `engine`, each batch
    size at its own context (`contexts`: batch -> tokens) and each tree at the runtime's node
    count for its depth (`grid.tree_nodes`): a pandas frame of `speedplan.plan.sweep`'s columns."""
    from speedplan.plan.sweep import sweep

    nodes = sorted({grid.tree_nodes(d) for d in grid.draft_lens if d >= 1})
    pred = sweep(target_spec, cost, mechs, grid.batches, grid.draft_lens, sorted(set(contexts.values())),
                 tree_nodes=nodes, engine=engine).frame
    pred = pred[pred["context"] == pred["batch"].map(contexts)]
    is_tree = pred["mechanism"].isin(TREE_MECHANISMS)
    wanted_nodes = pred["draft_len"].map(lambda d: grid.tree_nodes(max(int(d), 1)) + 1)
    return pred[~is_tree | (pred["verify_tokens"] == wanted_nodes)]


def calibration_plan(grid) -> list[tuple[str, int]]:
    """(drafter, batch) of every calibration run: plain decoding and each drafter at the
    calibration batch sizes, D = grid.calibration_draft_len."""
    return [(name, b) for name in ("none", *grid.mechanisms) for b in grid.calibration_batches]


def interleave(main: list, extra: list) -> list:
    """`main` with the items of `extra` spread evenly through it, in order: calibration runs
    among the evaluation runs, so both are timed across the same spells of this VM's speed
    (timed in a phase of their own, calibration once caught a spell 14% slower than the
    evaluation that followed, and the fit put the difference into host terms: 2026-12-02)."""
    out, k = [], 0
    for i, item in enumerate(main):
        while k < len(extra) and k * len(main) <= i * len(extra):
            out.append(extra[k])
            k += 1
        out.append(item)
    return out + extra[k:]


def calibration_runs(grid, calib, run):
    """`measure(item, round)` for the timed plan: a calibration run of (drafter, batch) on the
    calibration prompts, and the drafters it built (for their specs). Acceptance comes from all
    calibration prompts at the smallest batch in the first round; timings need a few waves."""
    drafters = {}

    def measure(item, r):
        name, b = item
        d = 0 if name == "none" else grid.calibration_draft_len
        count = grid.calibration_prompts if b == min(grid.calibration_batches) and r == 0 else 2 * b
        res, drafters[name] = run(name, spread(calib, int(math.ceil(max(b, count) / b) * b)), b, d)
        return res, _full_batch_mean(res.steps, b, "t_step_s")

    return measure, drafters


def runtime_base(cost):
    """The speedplan-runtime profile calibration starts from: its launch cost per un-captured
    kernel is the launch floor the pricing profile measured (floors.csv), when `speedplan bench`
    measured it on this kind of machine (an imported GPU table's floor is another machine's)."""
    base = get_engine(ENGINE)
    profile = cost.profile
    bench = profile is not None and profile.origin == "measured" and not profile.meta.get("origin_label")
    if bench and "kernel_floor_us" in cost.hardware.extra.get("measured", {}):
        base = base.with_terms({"launch_us": cost.hardware.kernel_floor_us},
                               f"measured: launch floor in floors.csv of the profile ({cost.hardware.notes})")
    return base


def run_measurements(label: str, name: str, batch: int, draft_len: int, res, acceptance_length: float | None,
                     tree_nodes: int | None) -> list[Measurement]:
    """One calibration run as calibrate's rows: its step, and the parts of it the runtime times
    (the target's forward, verify_ms; the drafting, draft_ms, when it drafts; the rest,
    overhead_ms: acceptance and the step's bookkeeping, `StepRecord.t_accept_s` + `t_overhead_s`),
    in ms, each at the context its timed steps attended (`timed_steps`, `attended_measured`).

    Without overhead_ms the fit took the host terms from what was left of the step once the
    forwards were fitted, a percent or two of it and less than the steps' noise: in four runs on
    the Zen 3 EPYC (2026-12-06 and -07) host_step_us came out 0, 3030, 245 and 1315 µs, and in
    three of them the predicted rest of a step, median by batch size, was 1.4-7.7% of it where the
    runtime measured 1.0-1.2%. Refitted on the same runs' measurements with overhead_ms rows, host_step_us came
    out 473-582 µs with 0-29 µs a sequence, and the step-time median error went from 5.9%, 5.5%,
    11.7% and 5.3% to 6.0%, 5.5%, 8.7% and 4.7% (`benchmarks/bench_overhead_rows.py`,
    docs/validation.md)."""
    ctx = int(round(attended_measured(res.steps, batch)))
    rows = []
    for quantity, attrs in (("step_ms", ("t_step_s",)), ("verify_ms", ("t_verify_s",)), ("draft_ms", ("t_draft_s",)),
                            ("overhead_ms", ("t_accept_s", "t_overhead_s"))):
        if quantity == "draft_ms" and not draft_len:
            continue
        value = sum(_full_batch_mean(res.steps, batch, a) for a in attrs) * 1e3
        rows.append(Measurement(label, batch, draft_len, ctx, quantity, value, acceptance_length,
                                f"calibration {name} B={batch} D={draft_len} {quantity}", tree_nodes))
    return rows


def fit_runtime(grid, cost, plan, timed, drafters, target_spec
                ) -> tuple[list[Mechanism], object, list, dict]:
    """Calibration split, measured: acceptance per drafter and the speedplan-runtime engine
    terms, fitted by `speedplan.engine.calibrate` (the code `speedplan calibrate` runs) to the
    step times of plain decoding and of every drafter at the calibration batch sizes (fastest of
    `grid.rounds` timings; acceptance from the first round), and to the parts of each step
    the runtime times: the target's forward (verify_ms), the drafting (draft_ms) and the rest
    (overhead_ms). With the step alone the fit cannot tell slow kernels from host work: one such
    fit put 20 ms per step into host_step_us where the runtime measured under 2 ms outside its
    forwards (2026-12-02)."""
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
            measured += run_measurements(by_name[name].label if name != "none" else "none", name, b, d, res,
                                         first.acceptance_length if d else None,
                                         grid.tree_nodes(d) if name.endswith("-tree") else None)
    fit = fit_engine(cost, target_spec, mechs, measured, f"speedplan validate calibration split, {len(plan)} runs")
    plain = dict(timing["none"])[1]
    reprice = {"calibration_verify_s": _full_batch_mean(plain.steps, 1, "t_verify_s"),  # for reprice
               "calibration_context": attended_measured(plain.steps, 1)}
    return mechs, fit, measured, reprice


def fit_engine(cost, target_spec, mechs, measured: list[Measurement], described: str,
               fit_order: tuple[str, ...] | None = None):
    """The speedplan-runtime terms fitted by `speedplan.engine.calibrate` to calibration rows
    priced on `cost` with the runtime's drafters as `mechs` (validate, and `validate.refit`).
    `fit_order`: the terms calibration may free, in order (default: the shipped profile's; a
    refit passes a stored run's own where it kept one, so that a term added since does not change
    what it rebuilds)."""
    setting = Setting(target_spec, cost, 1, f"{target_spec.name} on {cost.hardware.name}",
                      mechanisms={m.label: m for m in mechs})
    base = runtime_base(cost) if fit_order is None else replace(runtime_base(cost), fit_order=tuple(fit_order))
    return calibrate(base, [(m, setting) for m in measured], name=ENGINE, described=described)


def predicted_parts(engine, setting: Setting, points: list[tuple[str, int, int, int, int | None]]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The engine model's target forward and drafting (`StepCost.verify_s`, `draft_s`, seconds)
    of each (mechanism label, batch, draft_len, context, tree nodes): the parts of a step the
    runtime times, priced by the code calibration fits them with. The rows' values are
    placeholders: `price` needs a measurement, and only its configuration is read here."""
    rows = [Measurement(label, b, d, ctx, "step_ms", 1.0, 1.0 if d else None, f"{label} B={b} D={d}", nodes)
            for label, b, d, ctx, nodes in points]
    parts = step_cost(engine.values(), price([(m, setting) for m in rows], engine.spec_max_running).step)
    return parts.verify_s, parts.draft_s
