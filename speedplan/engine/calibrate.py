"""Fitting an engine profile's terms to measurements (`speedplan calibrate`, and the fits of the
shipped profiles to ../shared/cases): bounded least squares on log(predicted / measured).

The op cost model prices every measured configuration's forward passes once (`priced.price`);
the engine terms only recombine those prices (`priced.predict`), so a fit with leave-one-out refits runs
in well under a second. A term the rows cannot move (its whole range changes no prediction by
0.1%), or one beyond the number of rows, keeps the base profile's value and is listed with the
reason.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from speedplan.engine.calibration_temperature import default_terms
# the rows priced once, predicted per fit: in their own module, re-exported here (`calibrate.price`, ...)
from speedplan.engine.priced import Priced, Setting, predict, price  # noqa: F401
from speedplan.engine.profile import SETTINGS, TERMS, EngineProfile, source_kind
from speedplan.engine.readers.measurements import Measurement
from speedplan.errors import SpeedplanInputError

# Terms a fit tries when the base profile names none ("fit_order"). With n rows at most
# ceil(n / 2) of them are fitted, so that leave-one-out can test the fit (terms named explicitly:
# up to n); when more are identifiable, forward selection keeps the ones that explain the rows
# best (`_select`), and the rest keep the base profile's values; sample_passes_random joins them
# where some row sampled at a temperature above 0 (`calibration_temperature.default_terms`).
FIT_ORDER = ("host_step_us", "draft_step_launches", "host_seq_us", "host_spec_seq_us", "overlap_spec", "overlap_plain",
             "host_token_us")
IDENTIFIABLE = 1e-3  # smallest relative change of some prediction over a term's whole range
# Leave-one-out refits once per row; above LOO_ROWS rows each row is predicted by a fit without
# its fold of FOLDS (row i in fold i mod FOLDS), so that 10,000 rows refit 10 times, not 10,000.
LOO_ROWS = 100
FOLDS = 10


def _fitted_values(base: EngineProfile, now: dict[str, float]) -> dict[str, float]:
    """What every fitted term of a calibrated profile was fitted to: this fit's values, and for the
    base's terms fitted earlier the values their fit recorded (an edit of the base, or of the
    file this profile is written to, then shows against them: `EngineProfile.edited`)."""
    recorded = (base.fit or {}).get("values") or {}
    earlier = {t: float(recorded.get(t, base.terms[t].value)) for t in TERMS
               if t not in now and source_kind(base.terms[t].source) == "fitted"}
    return {**earlier, **now}


@dataclass(eq=False)  # holds arrays: compared by identity
class Calibration:
    """A fitted profile and the evidence: per-row residuals, leave-one-out errors, kept terms."""

    profile: EngineProfile
    fitted: list[str]
    kept: dict[str, str]  # term -> why it kept the base value
    predicted: np.ndarray
    measured: np.ndarray
    loo_error: np.ndarray  # |pred / meas − 1| of each row predicted by a fit without it (or without its fold)
    rows: list = field(default_factory=list)
    not_tried: dict[str, str] = field(default_factory=dict)  # term -> where its (base) value comes from
    too_fast: np.ndarray | None = None  # rows measured faster than their kernels alone (`too_fast`)
    held_out: str = "leave-one-out"  # how loo_error was taken: leave-one-out, or k-fold above LOO_ROWS rows
    notes: list[str] = field(default_factory=list)  # lines the caller adds to the printout (the files' model)
    slowest: np.ndarray | None = None  # each time row as priced with the terms a fit may move at their slowest
    fastest: np.ndarray | None = None  # ... and with its kernels alone at the lowest kernel_scale (`fastest_timed`)
    acceptance_shapes: dict[str, tuple] = field(default_factory=dict)  # mechanism -> (p_1, decay), --fit-acceptance

    @property
    def residual(self) -> np.ndarray:
        return self.predicted / self.measured - 1.0


def _fit_values(base: dict, free: list[str], priced: Priced, keep: np.ndarray | None = None) -> dict:
    from scipy.optimize import least_squares

    meas = priced.measured
    rows = np.ones(len(meas), dtype=bool) if keep is None else keep
    lo = np.array([TERMS[t].low for t in free])
    hi = np.array([TERMS[t].high for t in free])
    span = hi - lo
    x0 = np.clip((np.array([base[t] for t in free]) - lo) / span, 1e-6, 1 - 1e-6)

    def residuals(x):
        values = {**base, **dict(zip(free, lo + x * span))}
        return np.log(predict(values, priced)[rows] / meas[rows])

    sol = least_squares(residuals, x0, bounds=(0.0, 1.0), x_scale="jac", method="trf", max_nfev=400)
    return {**base, **dict(zip(free, lo + sol.x * span))}


def _identifiable(base: dict, candidates: list[str], priced: Priced) -> tuple[list[str], dict]:
    """The terms, in order, that move some prediction by IDENTIFIABLE over their range and
    that the rows can tell apart from the terms taken before them: a term whose effect on the
    rows is (within 1%) a combination of earlier terms' effects is confounded with them (its
    `kept` entry is the tuple of those terms; `_confounded` words it). Terms that move the rows
    where the base stands are taken first; a term with no effect there (host work hidden behind
    the GPU's at overlap 1) is judged after them by its effect over its whole range (a zero column
    would pass as a combination of any): taken first, it claimed the one row of a single plain
    TPOT, which the fit, starting where it has no slope, could not move (vLLM PR #16035's rows
    predicted from PR #17202's one row: 8.0% median, 19.4% max, where layer_launches gives 3.4%, 3.6%)."""
    ref = predict(base, priced)
    moving, hidden, kept = [], [], {}
    for term in candidates:
        spec = TERMS[term]
        low, high = (predict({**base, term: v}, priced) / ref - 1.0 for v in (spec.low, spec.high))
        if max(np.max(np.abs(low)), np.max(np.abs(high))) < IDENTIFIABLE:
            kept[term] = "the rows do not depend on it"
            continue
        col = _local_slope(base, term, priced, ref)
        if np.any(np.abs(col) > 1e-9):
            moving.append((term, col))
        else:
            hidden.append((term, high - low))
    ok, columns = [], []
    for term, col in moving + hidden:
        if columns:
            basis = np.stack(columns, axis=1)
            coef, *_ = np.linalg.lstsq(basis, col, rcond=None)
            if np.linalg.norm(col - basis @ coef) <= 0.01 * np.linalg.norm(col):
                kept[term] = tuple(ok)  # confounded with these: named once the fitted terms are known
                continue
        ok.append(term)
        columns.append(col)
    return sorted(ok, key=candidates.index), {t: kept[t] for t in candidates if t in kept}


def _local_slope(values: dict, term: str, priced: Priced, ref: np.ndarray) -> np.ndarray:
    """Relative change of each row's prediction as `term` moves 1% of its range either side of its value."""
    spec, step = TERMS[term], 0.01 * (TERMS[term].high - TERMS[term].low)
    a, b = max(spec.low, values[term] - step), min(spec.high, values[term] + step)
    return (predict({**values, term: b}, priced) - predict({**values, term: a}, priced)) / ref


def _unmoved(start: dict, fitted: dict, ok: list[str], priced: Priced) -> list[str]:
    """Fitted terms the fit left at their start while no row moves with them there: host work
    hidden behind the GPU's, say, which the rows bound but do not fix. Named as fitted they read
    as measured; they are kept, with why."""
    ref = predict(fitted, priced)
    return [t for t in ok if np.isclose(fitted[t], start[t], rtol=1e-6, atol=1e-9)
            and np.max(np.abs(_local_slope(fitted, t, priced, ref))) < 1e-9]


def _confounded(kept: dict, fitted: list[str]) -> dict[str, str]:
    """`kept` with each confounded term's tuple worded: the fitted terms among those it cannot
    be told from, or, where forward selection dropped them all, every one of them."""
    out = {}
    for term, why in kept.items():
        if isinstance(why, tuple):
            named = [t for t in why if t in fitted]
            why = (f"the rows cannot tell it from {', '.join(named)}" if named else
                   f"the rows cannot tell it from {', '.join(why)}, none of them fitted")
        out[term] = why
    return out


def _loss(values: dict, priced: Priced) -> float:
    """Sum of squared log errors of the rows' predictions."""
    return float(np.sum(np.log(predict(values, priced) / priced.measured) ** 2))


def _select(base: dict, ok: list[str], most: int, priced: Priced) -> tuple[list[str], dict[str, str]]:
    """Forward selection: add, one at a time, the identifiable term whose fit (with the terms
    already chosen) leaves the smallest squared log error, until `most` are chosen. A
    sweep over B with one D needs a term that grows with B (host_seq_us), a sweep over D one that
    grows with the draft forwards (draft_step_launches); a fixed order would pick the same terms
    for both. Ties go to the earlier term of `ok`."""
    chosen: list[str] = []
    while len(chosen) < most:
        fits = [(i, t, _fit_values(base, chosen + [t], priced)) for i, t in enumerate(ok) if t not in chosen]
        losses = [(_loss(f, priced), i, t) for i, t, f in fits if not _unmoved(base, f, [t], priced)]
        if not losses:  # what is left does not move the rows where it stands
            break
        chosen.append(min(losses)[2])
    chosen.sort(key=ok.index)
    n = len(priced.measured)
    why = (f"{n} row{'s' * (n != 1)} fit{'s' * (n == 1)} at most {most} term{'s' * (most != 1)}; {', '.join(chosen)} "
           "explain them better")
    return chosen, {t: why for t in ok if t not in chosen}


def bound_side(term: str, value: float, tol: float = 1e-6) -> int | None:
    """0 where a fitted `value` sits at its term's lower bound, 1 at its upper one (within `tol` of
    the term's range), None between."""
    spec = TERMS[term]
    tol = tol * (spec.high - spec.low)
    return 0 if value - spec.low <= tol else 1 if spec.high - value <= tol else None


def _at_bound(term: str, value: float) -> float:
    """A fitted `value`, or the term's bound where `bound_side` puts it there (within 1e-6 of the
    term's range), as the printout says "at 0, its physical limit": a fit at its lower bound of
    0 µs left 2.016e-23, and overlap_spec 9.9e-07 was printed at its limit but written as fitted."""
    side = bound_side(term, value)
    return value if side is None else (TERMS[term].low, TERMS[term].high)[side]


def _origin(source: str) -> str:
    """The kind of a term's source, in a word or two: document, assumption, fitted before, ..."""
    kind = source_kind(source)
    return "fitted before" if kind == "fitted" else kind or "set by hand"


def check_candidates(candidates: list[str]) -> None:
    """Refuse terms to fit that are no term, named twice, or an engine setting."""
    unknown = [t for t in candidates if t not in TERMS]
    if unknown:
        raise SpeedplanInputError(f"calibrate: unknown term {unknown[0]!r}; terms: {', '.join(TERMS)}")
    twice = [t for i, t in enumerate(candidates) if t in candidates[:i]]
    if twice:
        raise SpeedplanInputError(f"calibrate: term {twice[0]!r} named twice in the terms to fit")
    settings = [t for t in candidates if t in SETTINGS]
    if settings:
        how = ("state the server's cap as a max_running_requests column of the measurements"
               if settings[0] == "spec_max_running" else "it says how the engine's code runs (see docs/engine.md)")
        raise SpeedplanInputError(f"calibrate: {settings[0]} is an engine setting, not fitted: {how}")


def candidate_terms(base: EngineProfile, rows: list, free: list[str] | None) -> list[str]:
    """The terms a fit may try: `free`, or the base's fit order (FIT_ORDER) with what `rows` need; checked."""
    candidates = list(free) if free is not None else default_terms(base.fit_order or FIT_ORDER, rows)
    check_candidates(candidates)
    return candidates


def most_terms(n: int, free: list[str] | None, spent: int = 0) -> int:
    """How many terms n rows may fit: n where the terms were named, else ceil(n / 2) (leave-one-out
    then tests the fit), less `spent`, the parameters fitted from the same rows besides the terms
    (a fitted acceptance)."""
    return max((n if free is not None else max(1, (n + 1) // 2)) - spent, 0)


def calibrate(base: EngineProfile, pairs: list[tuple[Measurement, Setting]], free: list[str] | None = None,
              name: str | None = None, described: str = "", spent: int = 0) -> Calibration:
    """Fit `free` terms (default: FIT_ORDER) of `base` to measurements with their settings. The
    profile is named `name` (default: the base's name + "-calibrated") and read from no file.
    `spent`: parameters already fitted from these rows (`most_terms`)."""
    if not pairs:
        raise SpeedplanInputError("calibrate: no measurements")
    if name is not None and (not isinstance(name, str) or not name.strip()):  # "" fell back to the default in silence
        raise SpeedplanInputError(f"calibrate: name must be printable text (None: the base's name + '-calibrated'), "
                                  f"got {name!r}")
    priced = price(pairs, base.terms["spec_max_running"].value)
    values = {t: base.terms[t].value for t in TERMS}
    if free is not None and not isinstance(free, (str, Iterable)):
        raise SpeedplanInputError(f"calibrate: free must list the terms to fit (None: the default ones), got {free!r}")
    if free is not None and not isinstance(free, str):
        free = list(free)  # once: a generator is used up by reading it
    if free is not None and (isinstance(free, str) or not free):
        raise SpeedplanInputError(f"calibrate: free must list the terms to fit (None: the default ones), got {free!r}")
    candidates = candidate_terms(base, priced.rows, free)
    ok, kept = _identifiable(values, candidates, priced)
    not_tried = {t: _origin(base.terms[t].source) if t not in SETTINGS else "an engine setting, never fitted"
                 for t in TERMS if t not in candidates}
    n = len(pairs)
    most = most_terms(n, free, spent)
    if len(ok) > most:
        ok, dropped = _select(values, ok, most, priced)
        kept.update(dropped)
    kept = _confounded(kept, ok)
    snap = lambda fit: {t: _at_bound(t, v) if t in ok else v for t, v in fit.items()}  # as written, bounds exact
    fitted = snap(_fit_values(values, ok, priced) if ok else values)
    for t in _unmoved(values, fitted, ok, priced):
        ok.remove(t)
        kept[t] = "the rows do not move with it near its value (any value near it fits them as well)"
    pred = predict(fitted, priced)
    meas = priced.measured
    loo = np.full(n, np.nan)
    folds = np.arange(n) if n <= LOO_ROWS else np.arange(n) % FOLDS  # row i is held out in fold folds[i]
    held_out = "leave-one-out" if n <= LOO_ROWS else f"{FOLDS}-fold cross-validation"
    if ok and n > len(ok):
        for k in np.unique(folds):
            out = folds == k
            # each refit starts where the full fit started (the base values), not from the full fit,
            # which has seen the held-out rows: with noisy rows the fit has several minima, and that start flatters it
            loo[out] = np.abs(predict(snap(_fit_values(values, ok, priced, ~out)), priced)[out] / meas[out] - 1.0)
    resid = np.abs(pred / meas - 1.0)
    source = (f"fitted by speedplan calibrate to {n} row{'s' * (n != 1)} ({described or 'measurements'}); "
              f"median |residual| {np.median(resid):.1%}, max {resid.max():.1%}"
              + (f", {held_out} median {np.nanmedian(loo):.1%}" if np.isfinite(loo).any() else ""))
    rows = [{"where": m.where, "mechanism": m.mechanism, "batch": m.batch, "draft_len": m.draft_len,
             "context": m.context, "acceptance_length": m.acceptance_length if m.mechanism != "none" else 1.0,
             "quantity": m.quantity, "field": dict(m.names).get(m.quantity, m.quantity), "measured": float(v),
             "predicted": float(p), "residual": float(p / v - 1.0), "loo_error": None if not np.isfinite(e) else float(e),
             "setting": s.label, **({"temperature": m.temperature} if m.temperature else {}),
             **({"tree_nodes": m.tree_nodes} if m.tree_nodes else {})}
            for m, s, v, p, e in zip(priced.rows, priced.settings, meas, pred, loo)]
    from speedplan.engine.calibration_bounds import fastest_timed, slow_terms, slowest_timed, too_fast

    fast = too_fast(fitted, priced)
    default_name = base.name if base.name.endswith("-calibrated") else f"{base.name}-calibrated"
    profile = base.with_terms({t: fitted[t] for t in ok}, source, name=name or default_name,
                              fit={"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                                   "base": base.name, "described": described, "fitted": ok,
                                   "values": _fitted_values(base, {t: float(fitted[t]) for t in ok}),
                                   "kept": kept,
                                   "kept_values": {t: float(values[t]) for t in kept},  # as kept: an edit shows
                                   "not_tried": not_tried,
                                   "median_abs_residual": float(np.median(resid)), "max_abs_residual": float(resid.max()),
                                   "loo_median_error": float(np.nanmedian(loo)) if np.isfinite(loo).any() else None,
                                   "loo_max_error": float(np.nanmax(loo)) if np.isfinite(loo).any() else None,
                                   "cross_validation": held_out,
                                   "rows": rows,
                                   **({"faster_than_kernels": [r["where"] for r, f in zip(rows, fast) if f]}
                                      if fast.any() else {})})
    return Calibration(profile, ok, kept, pred, meas, loo, rows, not_tried, fast, held_out,
                       slowest=slowest_timed(values, priced, slow_terms(base, candidates)),
                       fastest=fastest_timed(values, priced))

