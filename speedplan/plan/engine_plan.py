"""One plan per serving engine, within what that engine can express.

An engine serves one mechanism per launch and sets the draft length across batch sizes in
the ways its `serving.<engine>.support()` lists (`Mode.shape`):

- "any": any D per batch range, D = 0 allowed (vLLM's num_speculative_tokens_per_batch_size,
  SGLang's adaptive buckets for EAGLE/EAGLE3 chains, which route on the running batch min(B, cap):
  batches one bucket serves, every B at or above the cap among them, get one D, `_candidates`);
- "first-max": any D per range, none above the smallest batch's D, which must be >= 1
  (TensorRT-LLM's draft_len_schedule);
- "fixed": one setting (D, or a tree's depth and nodes) at every batch size.

The plan maximises throughput over a batch-size distribution w (the share of serving time at each
batch size; uniform over the swept batches that fit in memory with plain decoding unless
`--batch-weights` says otherwise), each batch size's tokens/s/GPU counted against the best that
engine reaches there, so that a batch size counts by its weight and not by its raw tokens/s (B = 64
makes 10-20x the tokens of B = 1):

    J = Σ_(B, L) w(B, L) · tokens/s/GPU(B, L, D_B) / best tokens/s/GPU of this engine at (B, L)

J = 1 means the engine's best at every batch size. "Off" (plain decoding everywhere) is one of the
candidates. A plan that loads a drafter keeps its weights and cache at every batch size, D = 0
included: where the drafter does not fit beside the KV cache of B sequences, the engine runs as many
as fit and the rest wait, so such a plan gets there what it gets with that many sequences
(`capacity.Capacity`, `plan_table.PlanTable.with_drafter`; `runs_at_batch` in its rows). A schedule
("any", "first-max") maximises J less a cost for each rise (a longer draft at the next batch size;
falls are free; `pick.few_rises`): settings within 1% of a batch's best count as its best, so
near-ties fall with B as the best-D figure draws them, and each rise costs RISE_GAIN (3%) of one
batch's share, so the profile's tile-grid steps of 1-3% at single batch sizes do not make the
schedule zigzag (smaller gains over several batch sizes can still add up to a rise). Batch sizes
count by their weights. Among settings within 1% of each other the one with fewer verified tokens
wins (as in `best_per_batch`); among whole plans within 0.5% of the best J, the simplest (off, then
fixed, then a schedule).

Each plan's rows give, per (batch, context), its D, speedup and `loss_vs_best`: 1 − its
tokens/s/GPU over the best any setting of that engine reaches at that batch and context (a
per-B optimum: any mechanism it runs, any D, or off). `loss_vs_any` is against the best row
of the whole sweep, whatever engine could run it, under the same engine profile.

Each engine's plan is priced through its own engine profile (`engine_pricing`): the sweep's
`--engine` prices the engine it describes, and the others are the same kernels repriced through
their shipped profiles (`plan.sweep.reprice`), so the SGLang plan pays SGLang's host work, and holds
what SGLang's memory rule lets it hold (`engine.memory_rule`): where a cell the sweep serves holds
fewer sequences under an engine's rule, that engine runs the most that fit there.

Worked example of "first-max" (batches 1, 8, 64; D ≤ 8): for D_1 = 6, B = 8 takes its best of
D ∈ {0..6} and B = 64 its best of D ∈ {0..6}; J(D_1 = 6) = S[6, 1] + best_8 + best_64; the plan is
the D_1 with the largest J.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from speedplan.engine.profile import running_requests
from speedplan.errors import SpeedplanInputError
from speedplan.plan.api_checks import sweep_key, sweep_result
from speedplan.plan.batch_weights import UNWEIGHTED, batch_weights_arg, serving_weights
from speedplan.plan.pick import TIE_TOLERANCE, falling_schedule
from speedplan.plan.capacity import Capacity
from speedplan.plan.plan_table import OFF_KEY, PlanTable
from speedplan.plan.zero_draft import ZeroDraft
# which engine profile prices each engine's plan; importable from here, where they were first written
from speedplan.plan.engine_pricing import _own_meta, _profile_text, engine_pricing, engine_profile_for  # noqa: F401
# what a plan becomes in the output files; importable from here, where they were first written
from speedplan.plan.engine_outputs import (NOT_RUN, engine_profile_name, engine_records, latency_text,  # noqa: F401
                                           read_from_file, schedule_frame, serving_plans, unsupported)

PLAN_TIE = 0.005  # whole plans within this fraction of the best J count as ties (simplest wins)
_SIMPLE = {"off": 0, "fixed": 1}


@dataclass(frozen=True, eq=False)  # holds a DataFrame: compared and hashed by identity
class EnginePlan:
    engine: str
    mechanism: str  # frame label ("eagle3", "draft-model:llama-3.2-1b") or "none"
    mode: str  # "off", or the engine Mode's name ("fixed", "schedule", "adaptive")
    how: str  # the option that expresses it
    objective: float  # J: weighted mean fraction of this engine's best tokens/s/GPU (1 = best everywhere)
    tokens_per_s_per_gpu: float  # the plan's time-weighted mean tokens/s/GPU over the planned cells
    rows: pd.DataFrame  # per (batch, context): weight, draft_len, verify_tokens, speedup, loss_vs_best, ...
    engine_profile: str = ""  # the engine profile that priced this plan (name: how its terms were set)
    sweep_key: str = ""  # the sweep it was planned on (`api_checks.sweep_key`): model, hardware, TP, when
    spec_max_running: float = 0.0  # the pricing profile's cap on a speculative step's requests (0: none)
    drafter_kept_warm: bool = False  # at D = 0 the loaded drafter still runs a forward (zero_draft.py)
    profile_name: str = ""  # that profile's name, with its file unless shipped (engine_outputs.engine_profile_name)
    not_run: str = ""  # why the engine does not run on the sweep's hardware (serving.not_run_reason); "" where it does

    @property
    def running(self) -> np.ndarray:
        """Requests a step runs at once at each of `rows`: the sequences the launch holds
        (runs_at_batch), at most the engine's speculative cap where it loads a drafter."""
        if "runs_at_batch" not in self.rows:  # no planned batch (plain decoding fits nowhere): no rows, no columns
            return np.zeros(0, int)
        held = self.rows["runs_at_batch"].to_numpy()  # a launch that loads a drafter is capped at every D, 0 included
        return running_requests(held, self.mechanism != "none", self.spec_max_running).astype(int)

    @property
    def tree_nodes(self) -> int | None:
        """The drafted nodes a tree plan verifies (one size at every batch size), else None."""
        if "verify_tokens" not in self.rows:
            return None
        tree = self.rows[self.rows["verify_tokens"] > self.rows["draft_len"] + 1]["verify_tokens"].unique()
        return int(tree[0]) - 1 if len(tree) == 1 else None

    @property
    def cap_note(self) -> str:
        """Where the engine's cap on a speculative step leaves this plan slower than plain decoding at some
        batch size, the sentence that says so and what to do (`serving.sglang.cap_loss_note`); "" elsewhere."""
        from speedplan.serving import engine_module

        if self.mechanism == "none" or self.spec_max_running <= 0 or self.not_run or not len(self.rows):
            return ""
        module, cap = engine_module(self.engine), int(self.spec_max_running)
        worst = self.rows.sort_values("speedup").drop_duplicates("batch")  # each batch's slowest context
        note = module.cap_loss_note(zip(worst["batch"], worst["speedup"], worst["runs_at_batch"]), cap,
                                    cap == getattr(module, "SPEC_MAX_RUNNING", None)) if hasattr(module, "cap_loss_note") else None
        return note or ""

    @property
    def schedule(self) -> list[tuple[int, int, int]]:
        """Inclusive [first_batch, last_batch, D] ranges over the planned batches, equal D merged."""
        if self.rows.empty:  # nothing fits in memory: no batch to schedule
            return []
        per_b = self.rows.drop_duplicates("batch").sort_values("batch")
        out: list[list[int]] = []
        for b, d in zip(per_b["batch"], per_b["draft_len"]):
            if out and out[-1][2] == d:
                out[-1][1] = int(b)
            else:
                out.append([int(b), int(b), int(d)])
        for i in range(len(out) - 1):
            out[i][1] = out[i + 1][0] - 1
        return [tuple(x) for x in out]


def _settings(table: PlanTable, label: str, mode, is_tree: bool) -> list[tuple]:
    keys = [k for k in table.rows if k[0] == label and k[1] >= 1]
    if is_tree and not mode.trees:
        return []
    if mode.max_draft_len is not None:
        keys = [k for k in keys if k[1] <= mode.max_draft_len]
    return sorted(keys, key=lambda k: (k[2], k[1]))  # fewer verified tokens first


def _best_of(scores: dict, keys: list) -> tuple:
    """The key with the best score, fewer verified tokens within TIE_TOLERANCE (keys ordered so)."""
    top = max(scores[k] for k in keys)
    return next(k for k in keys if scores[k] >= (1.0 - TIE_TOLERANCE) * top)


def _candidates(table: PlanTable, label: str, mode, is_tree: bool, norm: np.ndarray, groups=None):
    """(J, the key chosen at each planned batch) of the best plan of one mechanism in one mode. `groups`:
    per planned batch, the index of the engine's bucket it reaches (SGLang's adaptive buckets route on the
    running batch: `serving.sglang.plan_groups`); an "any" plan gives each bucket one setting."""
    keys = _settings(table, label, mode, is_tree)
    if not keys:
        return None
    s = {k: table.score(k, norm) for k in keys + [OFF_KEY]}
    nb = len(table.batches)
    total = lambda picks: float(sum(s[k][i] for i, k in enumerate(picks)))
    if mode.shape == "fixed":
        picks = [_best_of({k: s[k].sum() for k in keys}, keys)] * nb
    elif mode.shape == "any":
        allowed = ([OFF_KEY] if mode.off else []) + keys  # ascending verified tokens
        if groups is None:
            picks = falling_schedule(s, allowed, nb)
        else:  # one setting per bucket, chosen on its batches' summed scores
            g = np.asarray(groups)
            per = falling_schedule({k: np.bincount(g, s[k], minlength=g.max() + 1) for k in allowed}, allowed, g.max() + 1)
            picks = [per[i] for i in g]
    else:  # first-max: D at the smallest batch caps every other batch's D
        best = None
        for first in keys:
            allowed = ([OFF_KEY] if mode.off else []) + [k for k in keys if k[1] <= first[1]]
            choice = [first] + (falling_schedule({k: v[1:] for k, v in s.items()}, allowed, nb - 1) if nb > 1 else [])
            if best is None or total(choice) > best[0] * (1 + 1e-12):
                best = (total(choice), choice)
        picks = best[1]
    return total(picks), picks


def _runnable(engine, labels: list[str], meta: dict) -> dict:
    """label -> Support for the swept labels this engine runs (draft models at a draft TP it runs)."""
    out, mtp_layers = {}, int((meta.get("model") or {}).get("mtp_layers") or 0)
    for label in labels:
        name = label.split(":")[0]
        support = engine.support(name, mtp_layers)
        draft = (meta.get("draft_models") or {}).get(label)
        if support is None or (draft and draft["tp"] not in engine.draft_tp_options(name, int(meta.get("tp", 1)))):
            continue
        out[label] = support
    return out


def plan_engines(result, batch_weights: dict[int, float] | str | None = None, engines=None) -> dict[str, EnginePlan]:
    """The plan of every serving engine (or of the `engines` named: a list or "vllm,sglang") for
    this sweep, each priced through its own engine profile (`engine_pricing`). `batch_weights`:
    the share of serving time at each batch size ({batch: weight}, "1=4,8=2", or a .json/.csv
    file of batch,weight); None weighs the swept batch sizes that fit alike."""
    key = sweep_key(sweep_result(result, "plan_engines"))
    return {name: replace(plan, sweep_key=key) for name, plan in _plans(result, batch_weights, engines).items()}


def _plans(result, batch_weights, engines) -> dict[str, EnginePlan]:
    from speedplan.serving import ENGINES, engine_module, not_run_reason, runs_on

    batch_weights = batch_weights_arg(batch_weights)
    if isinstance(engines, Iterable) and not isinstance(engines, (str, bytes, dict)):
        engines = list(engines)  # a tuple, a set, a numpy array of names
    if not (engines is None or isinstance(engines, str)
            or (isinstance(engines, list) and all(isinstance(e, str) for e in engines))):
        raise SpeedplanInputError(f"engines: expected names like 'vllm' (a list, or text like 'vllm,sglang'), got "
                                  f"{engines!r}; name one or more of {', '.join(ENGINES)}")
    names = [str(e).strip().lower() for e in (engines.split(",") if isinstance(engines, str) else engines or [])]
    if engines is not None and (not names or "" in names):  # "vllm,,sglang" has a name missing
        raise SpeedplanInputError(f"engines {engines if isinstance(engines, str) else list(engines)!r}: an empty name; "
                                  f"name one or more of {', '.join(ENGINES)}")
    names = names if engines is not None else list(ENGINES)
    if not names:
        raise SpeedplanInputError(f"engines: name one or more of {', '.join(ENGINES)}")
    modules = {n: engine_module(n) for n in names}  # unknown names fail before any work
    if result.pricing is None or result.engine is None:
        raise SpeedplanInputError("plan_engines: this SweepResult carries no pricing (it was not made by "
                                  "speedplan.sweep in this process), which each engine's plan is priced from: "
                                  "run speedplan.sweep(...) again")
    frame = result.frame
    plain = (frame["mechanism"] == "none") | (frame["draft_len"] == 0)
    servable = frame[plain & frame["feasible"]][["batch", "context"]]
    servable = servable.drop_duplicates().sort_values(["batch", "context"]).reset_index(drop=True)
    if servable.empty:
        if batch_weights:
            serving_weights(frame[plain][["batch", "context"]].drop_duplicates(), batch_weights)
        own = {n: _own_meta(result, n) for n in names}
        return {n: EnginePlan(n, "none", "off", "nothing fits in memory", 0.0, 0.0, pd.DataFrame(), _profile_text(own[n]),
                              profile_name=engine_profile_name(own[n])) for n in names}
    # the cells the sweep's own profile serves; an engine whose memory rule holds fewer sequences there runs
    # the most that fit (_plain_held, capacity.Capacity)
    weights = serving_weights(servable, batch_weights)
    kernels: dict = {}  # forwards of D = 0 steps, shared by the engines (zero_draft.ZeroDraft)
    plans = {}
    hw = result.pricing[1]
    cannot = {name: why for name in modules if (why := not_run_reason(name, hw))}
    if engines is not None and cannot:  # named: an engine that cannot run here is an error, not a silent "not planned"
        name = next(iter(cannot))
        raise SpeedplanInputError(f"engines (--plan-for) {name}: {cannot[name]}; plan for "
                                  f"{', '.join(n for n in ENGINES if runs_on(n, hw.platform))}")
    for name, engine in modules.items():
        if why := cannot.get(name):
            plans[name] = EnginePlan(name, "none", "off", f"{NOT_RUN}: {why}", 0.0, 0.0, pd.DataFrame(),
                                     _profile_text(own := _own_meta(result, name)), profile_name=engine_profile_name(own),
                                     not_run=why)
            continue
        priced = engine_pricing(result, name)
        capacity = Capacity(priced, kernels)  # how many sequences a launch holds where it holds fewer than offered
        held = _held_weights(priced, weights, capacity)  # the cells this engine's memory rule holds a sequence at
        plans[name] = (_plan_one(name, engine, priced, held, capacity, kernels) if len(held) else
                       EnginePlan(name, "none", "off", "nothing fits in memory under this engine's memory rule", 0.0,
                                  0.0, pd.DataFrame(), _profile_text(priced.meta),
                                  profile_name=engine_profile_name(priced.meta)))
    return plans


def _held_weights(result, weights: pd.Series, capacity: Capacity) -> pd.Series:
    """`weights` over the cells where the engine that priced `result` holds at least one sequence of
    plain decoding under its own memory rule (renormalised); the sweep's profile, with a roomier rule,
    may serve cells it holds none at, which this engine's plan leaves out."""
    frame = result.frame
    plain = frame[(frame["mechanism"] == "none") & frame["feasible"]]
    fits = set(zip(plain["batch"], plain["context"]))
    short = np.array([i for i, cell in enumerate(weights.index) if cell not in fits], dtype=int)
    if not len(short):
        return weights
    batch = weights.index.get_level_values(0).to_numpy(dtype=float)[short]
    context = weights.index.get_level_values(1).to_numpy(dtype=float)[short]
    none = short[capacity.most_sequences("none", 0, 1, batch, context) < 1]
    kept = weights.drop(weights.index[none])
    return kept / kept.sum() if len(kept) else kept


def _plan_one(name: str, engine, result, weights: pd.Series, capacity: Capacity,
              kernels: dict | None = None) -> EnginePlan:
    """One engine's plan on the sweep as that engine's profile priced it, over the cells of `weights`
    (each holding at least one sequence under its memory rule: `_held_weights`)."""
    from speedplan.plan.mechanisms import TREE_MECHANISMS

    frame, meta = result.frame, result.meta
    table = _plain_held(PlanTable(frame, weights), capacity)
    labels = [m for m in dict.fromkeys(frame["mechanism"]) if m != "none"]
    runnable = _runnable(engine, labels, meta)
    zero = ZeroDraft(result, table.cells, kernels)  # D = 0 in a launch that loads a drafter (zero_draft.py)
    views = {label: table.with_drafter(label, zero.throughput(label, support.drafter_runs_at_zero), capacity,
                                       support.drafter_runs_at_zero)
             for label, support in runnable.items()}
    reach = {OFF_KEY: table.plain} | {k: views[label].rows[k] for label, support in runnable.items()
                                      for mode in support.modes
                                      for k in _settings(table, label, mode, label.split(":")[0] in TREE_MECHANISMS)}
    norm = np.nanmax(np.vstack(list(reach.values())), axis=0)  # the engine's best per cell
    cands = [(float(table.score(OFF_KEY, norm).sum()), "off", "none", [OFF_KEY] * len(table.batches),
              "no speculative options", table)]
    cap = float(meta.get("engine_spec_max_running") or 0)
    groups = engine.plan_groups(table.batches, cap) if hasattr(engine, "plan_groups") else None
    for label, support in runnable.items():
        loaded = views[label]
        is_tree = label.split(":")[0] in TREE_MECHANISMS
        fixed = next((m for m in support.modes if m.shape == "fixed"), None)
        for mode in support.modes:
            c = _candidates(loaded, label, mode, is_tree, norm, groups)
            if c is None:
                continue
            called, how = mode.name, mode.how
            if fixed is not None and len(set(c[1])) == 1 and c[1][0] in _settings(loaded, label, fixed, is_tree):
                called, how = fixed.name, fixed.how  # one setting at every batch size is the fixed launch, whatever found it
            elif len(set(c[1])) == 1 and c[1][0] != OFF_KEY:  # vLLM's files write a flat schedule as one K
                called, how = "fixed", "one setting at every batch size, written as the engine's fixed draft length"
            cands.append((c[0], called, label, c[1], how, loaded))
    top = max(c[0] for c in cands)
    near = [c for c in cands if c[0] >= (1.0 - PLAN_TIE) * top]
    j, mode, label, picks, how, seen = min(near, key=lambda c: (_SIMPLE.get(c[1], 2), -c[0]))
    rows = _rows(seen, frame, picks, reach, table.plain)
    thr = float((rows["tokens_per_s_per_gpu"] * rows["weight"]).sum())
    return EnginePlan(name, label, mode, how, j, thr, rows, _profile_text(meta), spec_max_running=cap,
                      drafter_kept_warm=zero.kept_warm.get(label, False), profile_name=engine_profile_name(meta))


def _plain_held(table: PlanTable, capacity: Capacity) -> PlanTable:
    """The table with plain decoding (no drafter) at the cells where this engine's memory rule holds
    fewer sequences than offered (cells planned because the sweep's own profile, with a roomier rule,
    serves them): the most that fit, priced at that many, as the engine's scheduler runs them (the
    rest wait). Cells holding none are not planned for the engine (`_held_weights`)."""
    short = np.flatnonzero(~np.isfinite(table.plain))
    if not len(short):
        return table
    batch = table.cells.get_level_values(0).to_numpy(dtype=float)
    context = table.cells.get_level_values(1).to_numpy(dtype=float)
    held = capacity.most_sequences("none", 0, 1, batch[short], context[short])
    at, held = short[held >= 1], held[held >= 1]
    plain, runs = table.plain.copy(), np.where(np.isfinite(table.plain), batch, np.nan)
    if len(at):
        plain[at], runs[at] = capacity.plain_alone(held, context[at]), held
    out = copy.copy(table)
    out.rows, out.plain, out.runs_at_key = {**table.rows, OFF_KEY: plain}, plain, {**table.runs_at_key, OFF_KEY: runs}
    return out


def _rows(table: PlanTable, frame: pd.DataFrame, picks: list, reach: dict, plain: np.ndarray) -> pd.DataFrame:
    """Per planned (batch, context): the plan's setting (as `table`, the plan's view, prices it)
    and its loss against the engine's best (`reach`: key -> tokens/s/GPU per cell as a launch
    of that key sees it; plain decoding without a drafter included)."""
    cell_key = [picks[i] for i in table.cell_batch]
    thr = np.array([table.rows[k][c] for c, k in enumerate(cell_key)], dtype=float)
    keys, reach_thr = list(reach), np.vstack(list(reach.values()))
    best_i = np.nanargmax(np.nan_to_num(reach_thr, nan=-1.0), axis=0)
    best = reach_thr[best_i, np.arange(len(plain))]
    feasible = frame[frame["feasible"]]
    any_best = feasible.groupby(["batch", "context"])["tokens_per_s_per_gpu"].max().reindex(table.cells).to_numpy()
    any_best = np.fmax(any_best, best)  # a launch running fewer sequences than offered is no frame row
    got = np.nan_to_num(thr)
    shown = np.where(table.w <= 10 * UNWEIGHTED * table.w.max(), 0.0, table.w)  # left out: counts for nothing
    return pd.DataFrame({
        "batch": table.cells.get_level_values(0), "context": table.cells.get_level_values(1),
        "weight": shown / shown.sum(),
        "mechanism": [k[0] for k in cell_key], "draft_len": [int(k[1]) for k in cell_key],
        "verify_tokens": [int(k[2]) for k in cell_key], "feasible": ~np.isnan(thr),
        "runs_at_batch": np.nan_to_num([table.runs_at_of(k)[c] for c, k in enumerate(cell_key)]).astype(int),
        "speedup": got / plain, "tokens_per_s_per_gpu": got,
        "best_mechanism": [keys[i][0] for i in best_i], "best_draft_len": [int(keys[i][1]) for i in best_i],
        "best_verify_tokens": [int(keys[i][2]) for i in best_i],
        "best_speedup": best / plain, "loss_vs_best": 1.0 - got / best, "loss_vs_any": 1.0 - got / any_best,
    })
