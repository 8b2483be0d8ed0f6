"""Fit a stored validation's `speedplan-runtime` terms again from its calibration rows and price
its evaluation points with them: a paired comparison of two ways to calibrate, on one run's
measurements, with no runtime run (the VM's pace moves 10-20% between runs, more than most
changes to the fit). `benchmarks/bench_overhead_rows.py` runs it over stored runs.

A `speedplan validate` folder keeps what this needs: summary.json's calibration rows (each
Measurement with what it measured), its grid, the context each batch was priced at and, since
2026-12-07, the shape of each drafter (`drafters`); validation.csv's measured step times. Runs
from before keep no drafter shapes: they are read from the drafters shipped now, and a run
whose own predictions this does not reproduce (its drafters, or the planner, have changed
since: `reproduction_gap`) is left out by the benchmark, so that a comparison never mixes code.

The overhead_ms rows (the step outside the target's forward and the drafting) are in the
calibration of runs since 2026-12-07; for earlier runs they are derived as step_ms − verify_ms
− draft_ms of the same run (`calibration_rows`), which is what the runtime's acceptance and
bookkeeping add up to (`StepRecord`), to within a microsecond. Times
are seconds unless a name says ms. Imports torch only to read shipped drafters' shapes.
"""

from __future__ import annotations

import pickle
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from speedplan.cost.ops import load_cost_model
from speedplan.engine.readers.measurement import PLAUSIBLE
from speedplan.engine.readers.measurements import Measurement
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import Acceptance
from speedplan.specs.model import get_model
from speedplan.engine.profile import get_engine
from speedplan.validate.calibration import ENGINE, _mechanism, fit_engine, lookup_line, predicted_grid
from speedplan.validate.reprice import load_validation

REPRODUCE_RTOL = 1e-3  # stored predictions rebuilt within this (relative): this code prices the run as it did
PARTS = ("verify_ms", "draft_ms")
COLUMNS = ("pred_t_step", "meas_t_step")  # what a refit compares, beyond `reprice.load_validation`'s


class _Shape:
    """A drafter as the planner prices it (`calibration._mechanism` asks it these two)."""

    def __init__(self, vocab, layers):
        self.vocab, self.layers = vocab, layers

    def draft_vocab_size(self):
        return self.vocab

    def draft_layers(self):
        return self.layers


def shipped_drafter_shapes() -> dict:
    """Draft vocabulary and layers of the drafters this package ships (the runtime's weights)."""
    import torch

    from speedplan.runtime.drafters.draft_model import DRAFT_WEIGHTS
    from speedplan.runtime.drafters.eagle import EAGLE_WEIGHTS

    try:
        head = torch.load(EAGLE_WEIGHTS, map_location="cpu")  # tensors only, as `io.weights.load_trained` reads them
        student = torch.load(DRAFT_WEIGHTS, map_location="cpu")
    except (OSError, RuntimeError, pickle.UnpicklingError) as exc:  # missing, or a Git LFS pointer
        raise SpeedplanInputError(f"the shipped drafters' weights could not be read ({exc})") from None
    eagle = {"draft_vocab": len(head["vocab"]), "draft_layers": None}
    return {"ngram": {"draft_vocab": None, "draft_layers": None},
            "draft-model": {"draft_vocab": len(student["vocab"]), "draft_layers": len(student["layers"])},
            "eagle": eagle, "eagle-tree": eagle}


def calibration_rows(summary: dict, overhead: bool) -> list[Measurement]:
    """The run's calibration Measurements; with `overhead`, an overhead_ms row per run (derived
    from its step and parts where the run has none: step_ms less verify_ms and draft_ms, which
    for plain decoding also holds its drafting stage's bookkeeping, under a microsecond), without,
    none. A derived rest below a plausible measurement (`PLAUSIBLE`, 1 µs) is left out."""
    names = {f.name for f in fields(Measurement)} - {"names"}
    try:
        rows = [Measurement(**{k: v for k, v in r.items() if k in names}) for r in summary["calibration"]]
    except (AttributeError, TypeError) as exc:
        raise SpeedplanInputError(f"summary.json's calibration rows are not Measurements ({exc})") from None
    others = [m for m in rows if m.quantity != "overhead_ms"]
    if not overhead:
        return others
    if len(others) < len(rows):
        return rows
    runs: dict[tuple, dict] = {}
    for m in others:
        runs.setdefault((m.mechanism, m.batch, m.draft_len, m.context), {})[m.quantity] = m
    extra = []
    for parts in runs.values():
        step = parts.get("step_ms")
        rest = step.value - sum(parts[q].value for q in PARTS if q in parts) if step else 0.0
        if rest >= PLAUSIBLE["overhead_ms"][0]:
            where = f"calibration {step.mechanism} B={step.batch} D={step.draft_len} overhead_ms (step less its parts)"
            extra.append(replace(step, quantity="overhead_ms", value=rest, where=where))
    return others + extra


def refit(folder: str | Path, overhead: bool = True, loaded: tuple[pd.DataFrame, dict] | None = None,
          extra_terms: tuple[str, ...] = (), without_terms: tuple[str, ...] = ()) -> tuple[pd.DataFrame, dict]:
    """Refit the stored run in `folder` with or without overhead_ms rows; returns its evaluation
    points with `refit_t_step` (seconds) beside the stored `pred_t_step`, and the fitted profile's
    term values (`values`) and the number of calibration rows fitted (`rows`). `loaded`: the
    folder's `reprice.load_validation(folder)`, where the caller has read it already. The fit
    frees the terms the run's own calibration could (its stored `fit_order`; a run that kept none:
    today's), then `extra_terms`: a term added since, tried on the run's own measurements; less
    `without_terms` (held at the base profile's value): what a term the run freed bought it."""
    from speedplan.validate.run import TARGET_PRESET

    table, summary = loaded if loaded is not None else load_validation(folder)
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise SpeedplanInputError(f"{Path(folder) / 'validation.csv'}: missing column {missing[0]!r}")
    if not summary.get("calibration") or not summary.get("context_per_batch"):
        raise SpeedplanInputError(f"{folder}: summary.json keeps no calibration rows or contexts (a run before 2026-12-05)")
    grid, shapes = _grid_and_shapes(folder, summary)
    measured_here = Path(folder) / str(summary["hardware"])  # a profile validate measured first, kept in the folder
    cost = load_cost_model(str(measured_here) if measured_here.is_dir() else summary["hardware"])
    target = replace(get_model(TARGET_PRESET), dtype="fp32")
    cal = calibration_rows(summary, False)  # the n-gram lookup's line, as validate drew it from these runs
    drafted = [(m.batch, m.value * 1e3) for m in cal if m.mechanism == "ngram" and m.quantity == "draft_ms"]
    lookup = lookup_line(drafted) if drafted else (0.0, 0.0)
    placeholder = Acceptance.positional(np.full(grid.calibration_draft_len, 0.5), "not read: step times only")
    mechs = [_mechanism(name, placeholder, _Shape(shapes[name]["draft_vocab"], shapes[name]["draft_layers"]), target,
                        grid, lookup if name == "ngram" else (0.0, 0.0)) for name in grid.mechanisms]
    rows = calibration_rows(summary, overhead)
    stored = (summary.get("engine") or {}).get("fit_order")
    base = get_engine(ENGINE)
    own = tuple(stored) if stored is not None else base.fit_order
    unknown = [t for t in (*extra_terms, *without_terms) if t not in base.values()]
    if unknown:
        raise SpeedplanInputError(f"refit of {Path(folder).name}: {unknown[0]!r} is not a term of the {ENGINE} profile")
    order = tuple(t for t in dict.fromkeys(own + tuple(extra_terms)) if t not in without_terms)
    fit = fit_engine(cost, target, mechs, rows, f"refit of {Path(folder).name}", order)
    contexts = {int(b): int(c) for b, c in summary["context_per_batch"].items()}
    pred = predicted_grid(grid, target, cost, mechs, contexts, fit.profile)
    merged = table.merge(pred[["mechanism", "batch", "draft_len", "t_step_s"]].rename(columns={"t_step_s": "refit_t_step"}),
                         on=["mechanism", "batch", "draft_len"], how="left")
    if merged["refit_t_step"].isna().any() or len(merged) != len(table):
        raise SpeedplanInputError(f"{folder}: its points are not the grid's ({summary['grid']}): not refitted")
    return merged, {"values": fit.profile.values(), "rows": len(rows)}


def _grid_and_shapes(folder, summary: dict) -> tuple:
    """The run's ValidationGrid and each of its drafters' shapes (summary.json's, else the shipped
    drafters'); a field missing or not this code's is a SpeedplanInputError naming it."""
    from speedplan.validate.run import ValidationGrid

    absent = [k for k in ("grid", "hardware") if k not in summary]
    if absent:
        raise SpeedplanInputError(f"{folder}: summary.json has no {absent[0]!r}")
    try:
        grid = ValidationGrid(**{k: tuple(v) if isinstance(v, list) else v for k, v in summary["grid"].items()})
    except (AttributeError, TypeError, ValueError) as exc:
        raise SpeedplanInputError(f"{folder}: summary.json's grid is not one this code runs ({exc})") from None
    shapes = summary.get("drafters") or shipped_drafter_shapes()
    for name in grid.mechanisms:
        if not isinstance(shapes.get(name), dict) or not {"draft_vocab", "draft_layers"} <= set(shapes[name]):
            raise SpeedplanInputError(f"{folder}: no draft_vocab and draft_layers for {name!r} in summary.json's drafters")
    return grid, shapes


def has_overhead_rows(summary: dict) -> bool:
    """Whether the run's own calibration measured overhead_ms (runs since 2026-12-07)."""
    return any(r.get("quantity") == "overhead_ms" for r in summary.get("calibration") or [])


def reproduction_gap(merged: pd.DataFrame) -> float:
    """Largest relative difference between a refit's predictions and the stored ones: within
    REPRODUCE_RTOL for a refit with the run's own rows, this code prices the run as it did."""
    return float((merged.refit_t_step / merged.pred_t_step - 1.0).abs().max())


def step_errors(merged: pd.DataFrame, column: str) -> dict:
    """Median and p90 of |pred / meas − 1| of the step time, and the signed median (fractions)."""
    e = merged[column] / merged["meas_t_step"] - 1.0
    return {"median": float(e.abs().median()), "p90": float(e.abs().quantile(0.9)), "signed": float(e.median())}
