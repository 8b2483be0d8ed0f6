"""Acceptance fitted with the engine terms, for runs that measured none (`speedplan calibrate
--fit-acceptance`).

A load generator that reports throughput or TPOT but no acceptance length (an older `vllm bench
serve`, a generic HTTP benchmark, a table of tokens/s by batch and draft length) leaves AL unknown,
and with it the tokens each step emits: tokens/s = R·AL / t_step, TPOT = t_step / AL, speedup = AL ×
plain step / speculative step. The step's time does not depend on AL, the draft length does, so
rows at two or more draft lengths of one mechanism tell its acceptance from its drafting cost:
AL grows ever more slowly with D while drafting costs grow linearly.

Each chain mechanism whose rows state no acceptance length gets a per-position acceptance
p_k = p_1 · r^(k−1) (the chance the k-th draft is accepted given the ones before it were), so
AL(D) = 1 + Σ_{k≤D} p_1^k · r^(k(k−1)/2): with rows at two draft lengths one rate (r = 1, i.i.d.,
as `speedplan sweep --acceptance MECH:alpha=A` reads it); at three or more also its decay r (a
head trained to predict one token ahead drifts further from the target at each position: EAGLE's
per-position rates fall with depth, and MTP's shipped shape decays by 0.886 a reuse,
`plan.defaults.mtp_shape`). The parameters are fitted jointly with the engine terms by bounded
least squares on log(predicted / measured) (`fit_rates`); the terms the fit may move are chosen
at each trial acceptance as `calibrate` chooses them, and the rows then go through `calibrate`
with the fitted acceptance lengths. The acceptance is the workload's, not the engine's: it is
printed with the sweep command that uses it, and recorded in the profile's fit record, not in its
terms.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from speedplan.engine.calibrate import _identifiable, _select, candidate_terms, most_terms
from speedplan.engine.priced import Priced, Setting, predict, price
from speedplan.engine.profile import TERMS, EngineProfile
from speedplan.engine.readers.measurements import Measurement
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.plan.mechanisms import TREE_MECHANISMS

RATE_BOUNDS = (0.02, 0.98)  # p_1 a fit may reach: AL from 1.02 to nearly 1 + D
DECAY_BOUNDS = (0.5, 1.0)  # r: each position's rate at least half the one before; 1: i.i.d.
STARTS = ((0.35, 1.0), (0.75, 1.0), (0.9, 0.8))  # starting (p_1, r): the fit keeps the best (AL trades against drafting cost)
DECAY_LENGTHS = 3  # draft lengths a mechanism's rows need before its decay is fitted too
AL_QUANTITIES = ("tpot_ms", "tokens_per_s", "speedup")  # the measurements acceptance moves


class Unmeasured:
    """The acceptance a reader gives a speculative row that states none: 1 + D for now (every
    check of a row against its acceptance then passes), and the row's place in `taken_by`."""

    def __init__(self) -> None:
        self.taken_by: list[str] = []

    def __call__(self, mechanism: str, draft_len: int) -> float:
        return 1.0 + float(draft_len)


def chain_al(p1: float, decay: float, draft_len) -> np.ndarray:
    """A chain's acceptance length when the k-th draft is accepted (the ones before it were) with
    chance p1 · decay^(k−1), bonus token included: the sweep's own `Acceptance.chain_al` of those
    positions (`--acceptance MECH:positions=...`), so calibrate and sweep price one AL."""
    d = np.asarray(draft_len, dtype=int)
    return Acceptance.positional(positions(p1, decay, max(int(d.max(initial=0)), 1)), "fitted").chain_al(d)


def positions(p1: float, decay: float, depth: int) -> list[float]:
    """p_1..p_depth of the shape, as `--acceptance MECH:positions=...` takes them."""
    return [p1 * decay ** k for k in range(depth)]


def unmeasured_rows(rows: list[Measurement], taken_by: list[str]) -> dict[str, list[int]]:
    """Row indices by mechanism of the rows whose acceptance the reader had to supply, after
    refusing those a rate cannot describe or the rows cannot fit (exit 2, naming a row)."""
    taken = set(taken_by)
    out: dict[str, list[int]] = {}
    for i, m in enumerate(rows):
        if m.where not in taken:
            continue
        head = m.mechanism.split(":")[0]
        if head in TREE_MECHANISMS or m.tree_nodes:
            raise SpeedplanInputError(f"{m.where}: a tree's acceptance length is not a chain's rate: "
                                      "--fit-acceptance fits chains; give this row its acceptance_length")
        if head == "ngram":
            raise SpeedplanInputError(f"{m.where}: n-gram acceptance follows the text's repeats, not one rate per "
                                      "position: give this row its acceptance_length")
        out.setdefault(m.mechanism, []).append(i)
    for mech, idx in out.items():
        lengths = sorted({rows[i].draft_len for i in idx if rows[i].quantity in AL_QUANTITIES})
        if len(lengths) < 2:
            at = f"one draft length ({lengths[0]})" if lengths else "no row that acceptance moves (step times only)"
            raise SpeedplanInputError(
                f"{rows[idx[0]].where}: --fit-acceptance: the {mech} rows without acceptance_length have {at}: "
                "acceptance and drafting cost cannot be told apart; give rows at two or more draft lengths "
                "(tpot_ms, tokens_per_s or speedup), or their acceptance_length")
    return out


def _shapes(params, decays: list[bool]) -> list[tuple[float, float]]:
    """(p_1, r) per mechanism from the flat parameter list (r = 1 where its decay is not fitted)."""
    out, i = [], 0
    for fitted in decays:
        out.append((params[i], params[i + 1] if fitted else 1.0))
        i += 2 if fitted else 1
    return out


def _with_shapes(priced: Priced, draft: np.ndarray, groups: list[np.ndarray], shapes) -> Priced:
    al = priced.acceptance_length.copy()
    for idx, (p1, r) in zip(groups, shapes):
        al[idx] = chain_al(p1, r, draft[idx])
    return replace(priced, acceptance_length=al)


def _joint_fit(values: dict, terms: list[str], priced: Priced, draft: np.ndarray, groups: list[np.ndarray],
               decays: list[bool], start: list[float], fixed: dict[int, float] | None = None
               ) -> tuple[list[float], float, dict]:
    """Terms and acceptance fitted together from `values` and `start` (the acceptance parameters,
    those at the indices of `fixed` held at its values): (the acceptance parameters, the squared
    log error, the values with the terms fitted)."""
    from scipy.optimize import least_squares

    fixed = fixed or {}
    bounds = [b for fitted in decays for b in ((RATE_BOUNDS, DECAY_BOUNDS) if fitted else (RATE_BOUNDS,))]
    free = [i for i in range(len(bounds)) if i not in fixed]
    lo = np.array([TERMS[t].low for t in terms] + [bounds[i][0] for i in free])
    hi = np.array([TERMS[t].high for t in terms] + [bounds[i][1] for i in free])
    span = hi - lo
    x0 = np.clip((np.array([values[t] for t in terms] + [start[i] for i in free]) - lo) / span, 1e-6, 1 - 1e-6)
    n = len(terms)

    def params_of(v) -> list[float]:
        out = [fixed.get(i, 0.0) for i in range(len(bounds))]
        for i, x in zip(free, v[n:]):
            out[i] = x
        return out

    def residuals(x):
        v = lo + x * span
        at = _with_shapes(priced, draft, groups, _shapes(params_of(v), decays))
        return np.log(predict({**values, **dict(zip(terms, v[:n]))}, at) / priced.measured)

    sol = least_squares(residuals, x0, bounds=(0.0, 1.0), x_scale="jac", method="trf", max_nfev=400)
    v = lo + sol.x * span
    return params_of(v), float(np.sum(sol.fun ** 2)), {**values, **dict(zip(terms, v[:n]))}


@dataclass
class RateFit:
    """What `fit_rates` found: each mechanism's (p_1, r), and the acceptance length at its largest
    measured draft length over every p_1 the rows fit within their scatter (`intervals`: mechanism ->
    (D, low AL, high AL), None where no row is left over to judge the scatter by)."""

    shapes: dict[str, tuple[float, float]]
    intervals: dict[str, tuple[int, float, float] | None]
    parameters: int = 0  # acceptance parameters fitted (1 a mechanism, 2 where its decay was)


PROFILE_STEP = 0.02  # p_1's step outward from the fit, for each mechanism's interval
CHI2_95 = 3.84  # one parameter's 95% bound on the rise of the squared error, in units of its scatter


def fit_rates(base: EngineProfile, pairs: list[tuple[Measurement, Setting]], unmeasured: dict[str, list[int]],
              free: list[str] | None = None) -> RateFit:
    """Each mechanism of `unmeasured` (row indices of `pairs`): its acceptance (p_1, r), r fitted
    where its rows span DECAY_LENGTHS draft lengths or more (else 1), fitted with the engine terms
    `calibrate(base, pairs, free)` would fit (chosen again at each trial acceptance, until it
    settles). From each of STARTS; the fit with the smallest error is kept. Then, for the interval,
    p_1 held at values PROFILE_STEP apart outward from the fit (everything else refitted, each from
    the one before), as long as the squared log error rises less than CHI2_95 x the scatter per
    spare row (the error over rows less parameters); the first step either side is kept whatever its
    error, so that a range is never narrower than one step."""
    priced = price(pairs, base.spec_max_running)
    values = {t: base.terms[t].value for t in TERMS}
    candidates = candidate_terms(base, priced.rows, free)
    draft = np.array([float(m.draft_len) for m, _ in pairs])
    groups = [np.asarray(idx) for idx in unmeasured.values()]
    decays = [len({int(draft[i]) for i in idx if pairs[i][0].quantity in AL_QUANTITIES}) >= DECAY_LENGTHS
              for idx in groups]
    n, k = len(pairs), len(groups) + sum(decays)
    most = most_terms(n, free, k)
    if n < k + 1:  # a row more than the acceptance parameters, or nothing is left to judge them by
        raise SpeedplanInputError(f"--fit-acceptance: {n} row{'s' * (n != 1)} cannot fit {k} acceptance "
                                  "parameters and leave a row to judge them by; give more rows")
    best: tuple[float, list[float], list[str], dict] | None = None
    for p1, r in STARTS:
        params = [x for fitted in decays for x in ((p1, r) if fitted else (p1,))]
        for _ in range(4):
            at = _with_shapes(priced, draft, groups, _shapes(params, decays))
            terms = _identifiable(values, candidates, at)[0] if most > 0 else []
            if len(terms) > most:
                terms = _select(values, terms, most, at)[0]
            new, loss, fitted = _joint_fit(values, terms, priced, draft, groups, decays, params)
            settled = max(abs(a - b) for a, b in zip(new, params)) < 1e-4
            params = new
            if settled:
                break
        if best is None or loss < best[0] - 1e-12:
            best = (loss, params, terms, fitted)
    loss, params, terms, fitted = best
    shapes = {mech: (float(p1), float(r)) for mech, (p1, r) in zip(unmeasured, _shapes(params, decays))}
    spare = n - len(terms) - k
    intervals: dict[str, tuple[int, float, float] | None] = {}
    first = np.cumsum([0] + [2 if d else 1 for d in decays])  # each mechanism's p_1 in the parameter list
    for g, (mech, idx) in enumerate(unmeasured.items()):
        if spare <= 0:
            intervals[mech] = None
            continue
        d_ref = int(max(draft[idx]))
        limit = loss + CHI2_95 * max(loss, 1e-12) / spare
        fits = [float(chain_al(*shapes[mech], d_ref))]
        for step in (-PROFILE_STEP, PROFILE_STEP):  # outward from the fit, each point started from the last
            at, start, start_values = params[first[g]] + step, params, fitted
            steps = 0
            while RATE_BOUNDS[0] - 1e-9 <= at <= RATE_BOUNDS[1] + 1e-9:
                held, held_loss, start_values = _joint_fit(start_values, terms, priced, draft, groups, decays, start,
                                                           {int(first[g]): float(at)})
                if held_loss > limit and steps:
                    break
                # the first step is kept even past the limit: the range is then "within one step", not a point
                fits.append(float(chain_al(*_shapes(held, decays)[g], d_ref)))
                start, at, steps = held, at + step, steps + 1
                if held_loss > limit:
                    break
        intervals[mech] = (d_ref, min(fits), max(fits))
    return RateFit(shapes, intervals, k)


def with_fitted(rows: list[Measurement], unmeasured: dict[str, list[int]],
                shapes: dict[str, tuple[float, float]]) -> list[Measurement]:
    """The rows with each unmeasured one's acceptance length at its mechanism's fitted shape."""
    out = list(rows)
    for mech, idx in unmeasured.items():
        for i in idx:
            out[i] = replace(rows[i], acceptance_length=float(chain_al(*shapes[mech], rows[i].draft_len)))
    return out


def shape_text(p1: float, decay: float) -> str:
    """"alpha 0.812 (i.i.d.)" or "p_1 0.980, each next position x 0.702"."""
    return f"alpha {p1:.3f} (i.i.d.)" if decay >= 1.0 - 1e-9 else f"p_1 {p1:.3f}, each next position x {decay:.3f}"


LOOSE = 0.15  # an interval wider than this share of the fitted AL either side: the rows do not pin it


def rate_note(rows: list[Measurement], unmeasured: dict[str, list[int]], fit: RateFit) -> str:
    """One line: each fitted acceptance, the acceptance lengths it gives at the rows' draft lengths,
    how far the rows pin it, and what the leave-one-out figures do not test."""
    parts = []
    for mech, idx in unmeasured.items():
        (p1, r), lengths = fit.shapes[mech], sorted({rows[i].draft_len for i in idx})
        edges = [name for name, v, b in (("p_1", p1, RATE_BOUNDS), ("its decay", r, (DECAY_BOUNDS[0],)))
                 if min(abs(v - x) for x in b) < 1e-3]
        edge = f" ({' and '.join(edges)} at the bound of the range)" if edges else ""
        text = (f"{mech} {shape_text(p1, r)}{edge} from {len(idx)} row{'s' * (len(idx) != 1)} (AL "
                + ", ".join(f"{float(chain_al(p1, r, d)):.2f} at D = {d}" for d in lengths) + ")")
        span = fit.intervals.get(mech)
        if span is None:
            text += "; no row is left over to judge how far the rows pin it"
        else:
            d, low, high = span
            al = float(chain_al(p1, r, d))
            loose = high > al * (1 + LOOSE) or low < al * (1 - LOOSE)
            text += (f"; the rows fit within their scatter for AL {low:.2f}-{high:.2f} at D = {d}"
                     + (": they do not pin it (the engine terms trade against it); give the runs' acceptance "
                        "(an acceptance_length column or a /metrics scrape) or rows at more draft lengths"
                        if loose else ""))
        parts.append(text)
    return ("acceptance fitted with the terms (--fit-acceptance): " + "; ".join(parts)
            + "; leave-one-out refits keep it. Fitted together, the acceptance and the terms price the rows' "
            "throughput; the split between them is not a measured acceptance (the range counts the rows' scatter, "
            "not a wrong --hardware or --tp): plan with the two together, as below")


SWEEP_DEPTH = 8  # positions a decaying acceptance is written out to for the sweep (its default D range); later ones repeat the last


def sweep_acceptance(mech: str, shape: tuple[float, float], depth: int = SWEEP_DEPTH) -> str:
    """The --acceptance value that prices `mech` as fitted (`Acceptance.describe`): alpha=A, or
    positions= to `depth`."""
    p1, r = shape
    acc = Acceptance.iid(p1) if r >= 1.0 - 1e-9 else Acceptance.positional(positions(p1, r, depth))
    return f"{mech}:{acc.describe()}"


def fit_acceptance_rates(base: EngineProfile, rows: list[Measurement], setting: Setting, free,
                         taken_by: list[str]) -> tuple[list[Measurement], RateFit, str]:
    """The rows with fitted acceptance where the reader supplied it, the fit (each mechanism's
    (p_1, r)), and the note that says so (an empty fit, and the rows as they are, where every
    speculative row stated its own or none is speculative)."""
    unmeasured = unmeasured_rows(rows, taken_by)
    if not unmeasured:
        why = ("every speculative row states its acceptance length" if any(m.mechanism != "none" for m in rows)
               else "no row is speculative")
        return rows, RateFit({}, {}), f"--fit-acceptance: {why}; none fitted"
    fit = fit_rates(base, [(m, setting) for m in rows], unmeasured, free)
    return with_fitted(rows, unmeasured, fit.shapes), fit, rate_note(rows, unmeasured, fit)


def shape_from_lengths(lengths: dict[int, float]) -> tuple[float, float]:
    """(p_1, decay) of the chain whose acceptance length at each draft length D is `lengths[D]` (measured ALs at two
    or more D, the bonus token counted), least squares over the ALs: what `sweep_arguments` writes where runs
    measured a chain at several draft lengths, so that the sweep prices every D as they measured, not as one D's
    i.i.d. rate extrapolates."""
    from scipy.optimize import least_squares

    ds = np.array(sorted(lengths), dtype=int)
    measured = np.array([lengths[d] for d in ds], dtype=float)
    fit = least_squares(lambda x: chain_al(x[0], x[1], ds) - measured, x0=[0.7, 0.95],
                        bounds=([1e-6, 1e-6], [1.0 - 1e-9, 1.0]))
    return float(fit.x[0]), float(fit.x[1])
