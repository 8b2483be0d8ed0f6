"""A list of measurements priced once for fitting (`speedplan.engine.calibrate`): each row's
verify, draft and plain forward passes through the op cost model (`price`), then, for any values
of the engine terms, each row's measured quantity as the engine step model predicts it
(`predict`). A fit calls `predict` thousands of times and `price` once."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields, replace

import numpy as np

from speedplan.cost.forward import forward_cost
from speedplan.engine.readers.measurements import Measurement
from speedplan.engine.row_checks import check_nodes, check_runnable
from speedplan.engine.step import StepParts, plain_parts, speculative_parts, step_cost
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanisms import parse_mechanism
from speedplan.specs.model import ModelSpec


@dataclass(frozen=True)
class Setting:
    """What a measurement ran on: the target, the op cost model, its tensor parallelism."""

    target: ModelSpec
    cost: object  # speedplan.cost.ops.CostModel
    tp: int = 1
    label: str = ""
    mechanisms: dict = field(default_factory=dict)  # label -> Mechanism built by the caller (else parsed)


@dataclass
class Priced:
    """Engine-independent prices of a list of measurements: each row's step and the same
    engine's plain step at its batch, as `StepParts` of one entry per row."""

    rows: list
    settings: list
    step: StepParts
    plain: StepParts
    batch: np.ndarray
    acceptance_length: np.ndarray
    quantity: np.ndarray
    measured: np.ndarray
    running: np.ndarray  # requests each row's step runs (its batch, or the engine's speculative cap)
    plain_running: np.ndarray  # requests the same engine's plain step runs at the row's batch

    @functools.cached_property
    def _by_quantity(self) -> dict[str, np.ndarray]:
        return {q: np.flatnonzero(self.quantity == q) for q in np.unique(self.quantity)}

    def rows_of(self, quantity: str) -> np.ndarray:
        """Indices of the rows that measured `quantity`, found once (a fit predicts thousands of
        times: np.select over masks rebuilt each time was a third of its cost)."""
        return self._by_quantity.get(quantity, np.zeros(0, dtype=int))


def _stack(groups: list[tuple[list[int], StepParts]], n: int) -> StepParts:
    """One StepParts of n rows from parts priced in groups (`groups`: each group's row indices
    and its parts, arrays over those rows)."""
    if not groups:
        return StepParts(*(np.zeros(0) for _ in fields(StepParts)))
    order = np.argsort(np.concatenate([np.asarray(idx, dtype=int) for idx, _ in groups]), kind="stable")
    return StepParts(*(np.concatenate([np.broadcast_to(np.atleast_1d(getattr(p, f.name)), (len(idx),))
                                       for idx, p in groups])[order] for f in fields(StepParts)))


def price(pairs: list[tuple[Measurement, Setting]], spec_max_running: float = 0.0) -> Priced:
    """Price each measurement's verify, draft and plain forward passes with its setting's cost
    model. A step runs min(batch, cap) requests: the cap a row states (`max_running`, the
    server's --max-running-requests) for plain and speculative steps, else the engine's
    speculative cap (`spec_max_running`, 0 = none) for speculative steps only. Each row's step,
    and its plain step, is sampled at its temperature. Rows of one setting (and mechanism) are
    priced together, as arrays: one row alone costs about 10 ms."""
    rows = [m for m, _ in pairs]
    for m, s in pairs:
        check_runnable(m, s, spec_max_running)
    plain_running = np.array([float(m.running(speculative=False)) for m in rows])
    running = np.array([float(m.running(spec_max_running)) for m in rows])
    ctx = np.array([float(m.context) for m in rows])
    temp = np.array([float(m.temperature) for m in rows])  # the sampler's extra passes above 0
    by_setting: dict[int, list[int]] = {}
    by_mechanism: dict[tuple[int, str], list[int]] = {}
    for i, (m, s) in enumerate(pairs):
        by_setting.setdefault(id(s), []).append(i)
        if m.mechanism != "none":
            by_mechanism.setdefault((id(s), m.mechanism), []).append(i)
    plains, steps = [], []
    for idx in by_setting.values():
        s, b = pairs[idx[0]][1], plain_running[idx]
        part = plain_parts(s.cost, s.target, b, forward_cost(s.cost, s.target, b, 1, ctx[idx], s.tp), temp[idx])
        plains.append((idx, part))
        none = np.array([rows[i].mechanism == "none" for i in idx])
        if none.any():  # a plain row's step is its plain step (plain steps take no speculative cap)
            steps.append(([i for i, k in zip(idx, none) if k], StepParts(
                *(np.broadcast_to(np.atleast_1d(getattr(part, f.name)), none.shape)[none] for f in fields(StepParts)))))
    for (_, label), idx in by_mechanism.items():
        first, s = pairs[idx[0]]
        try:
            mech = s.mechanisms.get(label) or parse_mechanism(label, s.target, Acceptance.iid(0.5, "measured"))
        except SpeedplanInputError as e:
            raise SpeedplanInputError(f"{first.where}: field 'mechanism': {e}") from None
        if getattr(mech, "draft", None) is not None:  # at the dtype the hardware prices, as the sweep does
            mech = replace(mech, draft=mech.draft.priced_on(s.cost.hardware))
        for i in idx:
            check_nodes(rows[i], mech)
        b, c = running[idx], ctx[idx]
        d = np.array([float(rows[i].draft_len) for i in idx])
        nodes = np.array([float(rows[i].tree_nodes or rows[i].draft_len) for i in idx])
        q = mech.verify_tokens(d, nodes)
        verify = forward_cost(s.cost, s.target, b, q, c, s.tp, mask="tree" if mech.is_tree else "causal")
        draft = mech.draft_cost(s.cost, s.target, b, d, c, nodes, s.tp)
        steps.append((idx, speculative_parts(s.cost, s.target, mech, b, d, nodes, q, verify, draft, temp[idx])))
    al = np.array([1.0 if m.mechanism == "none" else float(m.acceptance_length) for m in rows])
    return Priced(rows, [s for _, s in pairs], _stack(steps, len(rows)), _stack(plains, len(rows)),
                  np.array([float(m.batch) for m in rows]), al, np.array([m.quantity for m in rows]),
                  np.array([m.value for m in rows]), running, plain_running)


def _timed(step_s: np.ndarray, priced: Priced) -> np.ndarray:
    """Each row's time quantity (step_ms, tpot_ms, tokens_per_s) for steps of `step_s` seconds;
    NaN for the other quantities."""
    al, run = priced.acceptance_length, priced.running
    out = np.full(len(priced.quantity), np.nan)
    i = priced.rows_of("step_ms")
    out[i] = step_s[i] * 1e3
    i = priced.rows_of("tpot_ms")
    out[i] = step_s[i] / al[i] * 1e3
    i = priced.rows_of("tokens_per_s")
    out[i] = run[i] * al[i] / step_s[i]
    return out


def predict(values: dict, priced: Priced) -> np.ndarray:
    """Each row's measured quantity as the engine model (`speedplan.engine.step`) predicts it."""
    cost = step_cost(values, priced.step)
    step = cost.total_s
    out = _timed(step, priced)
    al, run = priced.acceptance_length, priced.running
    i = priced.rows_of("speedup")
    if len(i):
        plain = step_cost(values, priced.plain).total_s
        out[i] = (run[i] * al[i] / step[i]) / (priced.plain_running[i] / plain[i])
    i = priced.rows_of("verify_ms")
    out[i] = cost.verify_s[i] * 1e3
    i = priced.rows_of("draft_ms")
    out[i] = cost.draft_s[i] * 1e3
    i = priced.rows_of("overhead_ms")
    out[i] = cost.overhead_s[i] * 1e3
    return out
