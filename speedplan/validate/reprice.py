"""Price a stored validation's measured verify steps with another profile, no runtime run.

The runtime's speed on the 2-core VM drifts by 10-15% between runs minutes apart, so two
`speedplan validate` runs with two profiles compare the drift as much as the profiles. Pricing
one run's measurements with both profiles compares the profiles alone (a paired comparison).

Only the verify step is re-priced: it depends on the target model's forward pass alone, which
is what a profile describes. The time a verify step takes beyond its priced ops is one constant
per run, anchored at the measurement: what plain decoding's measured verify step at calibration
(B = 1, seconds) took beyond the new profile's priced ops, these at the run's fitted
kernel_scale. (`speedplan validate` itself fits that
constant, as the speedplan-runtime engine profile's un-captured launches per layer, by least
squares over every calibration run; priced again with the profile a run used, its predictions
therefore move by one constant, the same for every row.)
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from speedplan.cost.ops import CostModel, load_cost_model
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms import TREE_MECHANISMS
from speedplan.cost.forward import forward_cost
from speedplan.specs.model import get_model
from speedplan.validate.run import TARGET_PRESET

NEEDED = ("mechanism", "batch", "verify_tokens", "context", "pred_t_verify", "meas_t_verify")


def load_validation(folder: str | Path) -> tuple[pd.DataFrame, dict]:
    """validation.csv and summary.json of a `speedplan validate` output folder."""
    folder = Path(folder)
    try:
        table = pd.read_csv(folder / "validation.csv").rename(columns={"nodes": "verify_tokens"})  # older runs
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise SpeedplanInputError(f"{folder}: not a validation folder ({exc})") from None
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise SpeedplanInputError(f"{folder / 'validation.csv'}: missing column {missing[0]!r}")
    if table.empty:
        raise SpeedplanInputError(f"{folder / 'validation.csv'}: no rows")
    for col in NEEDED[1:]:
        values = pd.to_numeric(table[col], errors="coerce")
        if not (values > 0).all():
            raise SpeedplanInputError(f"{folder / 'validation.csv'}: column {col!r} needs positive numbers")
    if not isinstance(summary, dict):
        raise SpeedplanInputError(f"{folder / 'summary.json'}: not a JSON object")
    for key in ("layer_overhead_us_measured", "context", "calibration_verify_s", "calibration_context"):
        if key in summary and not (isinstance(summary[key], (int, float)) and summary[key] >= 0):
            raise SpeedplanInputError(f"{folder / 'summary.json'}: {key!r} must be a number >= 0")
        if key in ("layer_overhead_us_measured", "context") and key not in summary:
            raise SpeedplanInputError(f"{folder / 'summary.json'}: missing {key!r}")
    return table, summary


def _priced_verify_s(cost: CostModel, table: pd.DataFrame) -> np.ndarray:
    """Seconds of priced ops (no host overhead) of each row's verify forward pass."""
    target = replace(get_model(TARGET_PRESET), dtype="fp32")
    out = np.empty(len(table))
    tree = table["mechanism"].str.split(":").str[0].isin(TREE_MECHANISMS).to_numpy()
    for is_tree in (False, True):
        rows = tree == is_tree
        if rows.any():
            out[rows] = forward_cost(cost, target, table["batch"].to_numpy()[rows], table["verify_tokens"].to_numpy()[rows],
                                     table["context"].to_numpy()[rows], mask="tree" if is_tree else "causal").total_s
    return out


def _kernel_scale(summary: dict) -> float:
    """The run's fitted kernel_scale (this machine's kernels over its profile's; 1 for runs
    before the term existed). Repricing keeps it: the new profile's kernels at the run's pace."""
    term = (summary.get("engine") or {}).get("terms", {}).get("kernel_scale", {})
    value = term.get("value", 1.0) if isinstance(term, dict) else 1.0
    return float(value) if isinstance(value, (int, float)) and value > 0 else 1.0


def reprice_verify(table: pd.DataFrame, summary: dict, hardware: str | Path,
                   ran_with: str | Path | None = None) -> pd.DataFrame:
    """`table` with pred_t_verify priced by `hardware` (a profile folder or preset) instead of
    the profile the validation ran with. Validation runs store the calibration's measured verify
    time; for older runs, `ran_with` (the profile they priced with, as it was then) gives it
    back from the stored overhead, exactly while that overhead was positive."""
    layers = get_model(TARGET_PRESET).layers
    cal = pd.DataFrame({"mechanism": ["none"], "batch": [1], "verify_tokens": [1],
                        "context": [summary.get("calibration_context", summary["context"])]})
    if "calibration_verify_s" in summary:
        verify_cal = float(summary["calibration_verify_s"])
    elif ran_with is not None:
        verify_cal = float(_priced_verify_s(load_cost_model(ran_with), cal)[0]) \
            + summary["layer_overhead_us_measured"] * 1e-6 * layers
    else:
        raise SpeedplanInputError("summary.json has no 'calibration_verify_s' (validation runs store it since "
                                  "speedplan.reprice exists): rerun `speedplan validate`")
    cost = load_cost_model(hardware)
    scale = _kernel_scale(summary)
    overhead_s = max(verify_cal - scale * float(_priced_verify_s(cost, cal)[0]), 0.0)
    out = table.copy()
    out["pred_t_verify"] = scale * _priced_verify_s(cost, table) + overhead_s
    out.attrs["layer_overhead_us"] = overhead_s / layers * 1e6
    return out


def verify_errors(table: pd.DataFrame) -> dict:
    """Median / p90 of |pred − meas| / meas of the verify step and the median signed ratio."""
    ratio = table["pred_t_verify"].to_numpy() / table["meas_t_verify"].to_numpy()
    err = np.abs(ratio - 1.0)
    return {"points": int(len(table)), "verify_median_error": float(np.median(err)),
            "verify_p90_error": float(np.percentile(err, 90)), "verify_median_ratio": float(np.median(ratio))}
