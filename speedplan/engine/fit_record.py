"""The optional "fit" object of an engine profile file, as `speedplan calibrate` writes it (what
it fitted, to which rows, and how well), checked when a profile is read: each field the outputs
print or compute with has its type and a finite range, so a hand-edited or damaged file is one
line naming the field, not a traceback or a "-100.0%" in the terminal."""

from __future__ import annotations

from speedplan.errors import SpeedplanInputError
from speedplan.specs.files import finite

FIGURES = ("median_abs_residual", "max_abs_residual", "loo_median_error", "loo_max_error")  # fractions
TEXTS = ("described", "base", "cross_validation", "created")


def fit_record(fit, where: str, terms: tuple[str, ...]) -> dict:
    """`fit` checked (an object; {} where the file has none or null): its figures finite fractions
    >= 0, its texts text, `fitted` a list of term names, `values` finite numbers by term, `rows` a
    list of objects whose `batch` (where given) is a finite number."""
    if not isinstance(fit, dict):
        raise SpeedplanInputError(f"{where}: 'fit' must be an object (what speedplan calibrate fitted)")
    for key in FIGURES:
        value = fit.get(key)
        if value is not None and not (finite(value) and value >= 0):  # calibrate writes any size it measured
            raise SpeedplanInputError(f"{where}: fit.{key} must be a finite number >= 0 (a fraction), got {value!r:.60}")
    for key in TEXTS:
        if key in fit and not isinstance(fit[key], str):
            raise SpeedplanInputError(f"{where}: fit.{key} must be text, got {fit[key]!r:.60}")
    rows = fit.get("rows", [])
    if not isinstance(rows, list) or any(not isinstance(r, dict) for r in rows):
        raise SpeedplanInputError(f"{where}: fit.rows must be a list of objects")
    for i, row in enumerate(rows):
        if "batch" in row and not finite(row["batch"]):
            raise SpeedplanInputError(f"{where}: fit.rows[{i}].batch must be a finite number, got {row['batch']!r:.60}")
    fitted = fit.get("fitted", [])
    if not isinstance(fitted, list) or any(not isinstance(t, str) or t not in terms for t in fitted):
        raise SpeedplanInputError(f"{where}: fit.fitted must be a list of term names ({', '.join(terms)})")
    values = fit.get("values", {})
    if not isinstance(values, dict) or any(not finite(v) or k not in terms for k, v in values.items()):
        raise SpeedplanInputError(f"{where}: fit.values must be an object of {{term: finite number}} (the values the "
                                  "fit gave)")
    kept, kept_values = fit.get("kept", {}), fit.get("kept_values", {})
    if not isinstance(kept, dict) or any(not isinstance(v, str) or k not in terms for k, v in kept.items()):
        raise SpeedplanInputError(f"{where}: fit.kept must be an object of {{term: why it was kept}}")
    if not isinstance(kept_values, dict) or any(not finite(v) or k not in terms for k, v in kept_values.items()):
        raise SpeedplanInputError(f"{where}: fit.kept_values must be an object of {{term: finite number}}")
    shapes = fit.get("acceptance_fitted", {})
    if not isinstance(shapes, dict) or any(not isinstance(a, dict) or not finite(a.get("p_1")) or not 0 < a["p_1"] <= 1
                                           or not finite(a.get("decay")) or not 0 < a["decay"] <= 1
                                           for a in shapes.values()):
        raise SpeedplanInputError(f"{where}: fit.acceptance_fitted must be an object of {{mechanism: {{\"p_1\": P, "
                                  "\"decay\": R}}}} with P and R in (0, 1]")
    return fit
