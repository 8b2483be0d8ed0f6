"""How far a fit of the engine terms can reach, row by row: the fastest a row can run (its
kernels alone, whatever the terms) and the slowest any fit of the terms can price it. A row
beyond either was measured on another setting, or in another unit: `speedplan calibrate`
refuses or flags it (`calibration_checks`)."""

from __future__ import annotations

import numpy as np

from speedplan.engine.calibrate import FIT_ORDER
from speedplan.engine.priced import Priced, _timed
from speedplan.engine.profile import TERMS, EngineProfile
from speedplan.engine.step import step_cost


KERNEL_MARGIN = 0.10  # kernels alone slower than a measured step by more than this: the row cannot have run there


def kernels_alone(values: dict, priced: Priced) -> np.ndarray:
    """Each row's quantity if its step took only its kernels and sampler (no host work, no
    launches): the fastest the op cost model's hardware can run it whatever the engine's terms."""
    cost = step_cost(values, priced.step)
    return _timed(cost.ops_s + cost.sample_s, priced)


def too_fast(values: dict, priced: Priced, margin: float = KERNEL_MARGIN) -> np.ndarray:
    """Rows measured faster than their kernels alone can run on the setting's hardware (by more
    than `margin`): another GPU, another TP or a miscounted quantity. No host or launch term
    (each ≥ 0) can fit them; only kernel_scale < 1. Boolean per row; ratios and parts (speedup, verify_ms, draft_ms,
    overhead_ms) are never flagged."""
    bound = kernels_alone(values, priced)  # NaN (never flagged) for ratios and parts
    measured, q = priced.measured, priced.quantity
    return np.where(q == "tokens_per_s", measured > (1 + margin) * bound, bound > (1 + margin) * measured)


def fastest_timed(values: dict, priced: Priced) -> np.ndarray:
    """Each row's time quantity with its kernels alone at the lowest `kernel_scale` a fit may
    reach (kernels 4x faster than the profile measured) and no host work or launches: the
    fastest step any fit of the terms can price; NaN for ratios and parts."""
    return kernels_alone({**values, "kernel_scale": TERMS["kernel_scale"].low}, priced)


def beyond_fastest(measured: np.ndarray, quantity: np.ndarray, bound: np.ndarray,
                   margin: float = KERNEL_MARGIN) -> np.ndarray:
    """Rows measured faster than `bound` (`fastest_timed`) by more than `margin`: no fit of any
    term reaches them (seconds given as ms, a per-user rate given as the batch's; another model
    or GPU). Rows of a NaN bound are never flagged."""
    return np.where(quantity == "tokens_per_s", measured > (1 + margin) * bound, measured * (1 + margin) < bound)


def slowest(values: dict, terms) -> dict:
    """`values` with each of `terms` where it makes a step slowest: an overlap at 0 (host work
    exposed), any other term at its upper bound."""
    return {**values, **{t: TERMS[t].low if t.startswith("overlap") else TERMS[t].high for t in terms}}


def slow_terms(base: EngineProfile, candidates) -> list[str]:
    """The terms `slowest_timed` moves: those a fit of `base` tries by default and `candidates`
    (--fit), so that naming fewer terms does not make a row unreachable."""
    return list(dict.fromkeys([*(base.fit_order or FIT_ORDER), *FIT_ORDER, *candidates]))


def slowest_timed(values: dict, priced: Priced, terms) -> np.ndarray:
    """Each row's time quantity (step_ms, tpot_ms, tokens_per_s) with every term of `terms` at its
    slowest (`slowest`): the slowest step a fit of those terms can price; NaN for ratios and parts."""
    return _timed(step_cost(slowest(values, terms), priced.step).total_s, priced)


def beyond_slowest(measured: np.ndarray, quantity: np.ndarray, bound: np.ndarray,
                   margin: float = KERNEL_MARGIN) -> np.ndarray:
    """Rows measured slower than `bound` (`slowest_timed`) by more than `margin`: no fit of the
    terms reaches them (a unit slip, µs or seconds for ms; another model or GPU). Rows of a NaN
    bound (ratios, parts of a step) are never flagged."""
    return np.where(quantity == "tokens_per_s", measured * (1 + margin) < bound, measured > (1 + margin) * bound)
