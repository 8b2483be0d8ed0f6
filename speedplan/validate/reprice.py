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

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from speedplan.cost.ops import CostModel, load_cost_model
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanisms import TREE_MECHANISMS
from speedplan.cost.forward import forward_cost
from speedplan.specs.files import finite, read_json, read_problem
from speedplan.specs.model import get_model
from speedplan.validate.run import TARGET_PRESET

NEEDED = ("mechanism", "batch", "verify_tokens", "context", "pred_t_verify", "meas_t_verify")
_MOST = {"batch": 1e6, "verify_tokens": 1e6, "context": 1e8, "pred_t_verify": 1e6, "meas_t_verify": 1e6}  # s for times


def load_validation(folder: str | Path) -> tuple[pd.DataFrame, dict]:
    """validation.csv and summary.json of a `speedplan validate` output folder."""
    folder = Path(folder)
    for name in ("validation.csv", "summary.json"):
        if not (folder / name).is_file():
            raise SpeedplanInputError(f"{folder}: not a validation folder (no {name}; `speedplan validate` writes one)")
    try:
        table = pd.read_csv(folder / "validation.csv").rename(columns={"nodes": "verify_tokens"})  # older runs
    except (OSError, ValueError) as exc:  # a decoding error is a ValueError too
        raise SpeedplanInputError(f"{folder / 'validation.csv'}: not a readable CSV ({read_problem(exc)})") from None
    summary = read_json(folder / "summary.json")  # names the file, and a syntax error's line
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise SpeedplanInputError(f"{folder / 'validation.csv'}: missing column {missing[0]!r}")
    if table.empty:
        raise SpeedplanInputError(f"{folder / 'validation.csv'}: no rows")
    text = table["mechanism"].map(lambda v: isinstance(v, str) and bool(v.strip()))
    if not text.all():  # a number there ended in a pandas traceback (a fuzzing run of 2026-12-05)
        row = int(np.flatnonzero(~text.to_numpy())[0])
        raise SpeedplanInputError(f"{folder / 'validation.csv'}: column 'mechanism' line {row + 2}: expected a "
                                  f"mechanism name, got {table['mechanism'].astype(str).iloc[row]!r}")
    for col in NEEDED[1:]:  # whole batches and tokens; finite contexts and times (1e12, inf passed unseen)
        values = pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float)
        whole = col in ("batch", "verify_tokens")
        ok = (values > 0) & (values <= _MOST[col]) & ((values == np.round(values)) if whole else True)
        if not ok.all():
            row = int(np.flatnonzero(~ok)[0])
            raise SpeedplanInputError(f"{folder / 'validation.csv'}: column {col!r} needs positive numbers "
                                      f"({'whole, ' if whole else ''}up to {_MOST[col]:g}); line {row + 2} has "
                                      f"{table[col].astype(str).iloc[row]!r}")
    if not isinstance(summary, dict):
        raise SpeedplanInputError(f"{folder / 'summary.json'}: not a JSON object")
    for key in ("layer_overhead_us_measured", "context", "calibration_verify_s", "calibration_context"):
        if key in summary and not (finite(summary[key]) and 0 <= summary[key] <= 1e9):  # not true, NaN or 1e308
            raise SpeedplanInputError(f"{folder / 'summary.json'}: {key!r} must be a number in 0..1e9, "
                                      f"got {summary[key]!r}")
        if key in ("layer_overhead_us_measured", "context") and key not in summary:
            raise SpeedplanInputError(f"{folder / 'summary.json'}: missing {key!r}")
    _kernel_scale(summary, folder / "summary.json")  # refused here, naming the folder
    return table, summary


def _priced_verify(cost: CostModel, table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of priced ops (no host overhead) of each row's verify forward pass, and each row's
    share priced from outside the profile's measured range."""
    target = replace(get_model(TARGET_PRESET), dtype="fp32")
    out, outside = np.empty(len(table)), np.zeros(len(table))
    tree = table["mechanism"].str.split(":").str[0].isin(TREE_MECHANISMS).to_numpy()
    for is_tree in (False, True):
        rows = tree == is_tree
        if rows.any():
            f = forward_cost(cost, target, table["batch"].to_numpy()[rows], table["verify_tokens"].to_numpy()[rows],
                             table["context"].to_numpy()[rows], mask="tree" if is_tree else "causal")
            out[rows], outside[rows] = f.total_s, f.out_of_range_share
    return out, outside


def _priced_verify_s(cost: CostModel, table: pd.DataFrame) -> np.ndarray:
    """Seconds of priced ops (no host overhead) of each row's verify forward pass."""
    return _priced_verify(cost, table)[0]


def _kernel_scale(summary: dict, where: str | Path = "summary.json") -> float:
    """The run's fitted kernel_scale (this machine's kernels over its profile's; 1 for runs
    before the term existed). Repricing keeps it: the new profile's kernels at the run's pace."""
    engine = summary.get("engine")
    terms = engine.get("terms") if isinstance(engine, dict) else None
    term = terms.get("kernel_scale") if isinstance(terms, dict) else None
    if not isinstance(term, dict) or "value" not in term:
        return 1.0
    value = term["value"]
    if not (finite(value) and 0 < value <= 1e3):  # 1e308 printed "inf%" errors (a fuzzing run of 2026-12-05)
        raise SpeedplanInputError(f"{where}: engine.terms.kernel_scale.value must be a number in (0, 1000], "
                                  f"got {value!r}")
    return float(value)


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
    ran_on = summary.get("device") or ("cpu" if "cpu" in summary else None)  # CPU runs name their CPU
    if ran_on is not None and (ran_on == "cpu") != cost.hardware.is_cpu:
        kind = lambda cpu: "a CPU" if cpu else "a GPU"  # noqa: E731
        raise SpeedplanInputError(f"--hardware {hardware}: prices {kind(cost.hardware.is_cpu)}, and the stored run "
                                  f"was measured on {kind(ran_on == 'cpu')}; reprice it with a profile of what it ran on")
    scale = _kernel_scale(summary)
    unclamped = verify_cal - scale * float(_priced_verify_s(cost, cal)[0])
    overhead_s = max(unclamped, 0.0)
    out = table.copy()
    priced, outside = _priced_verify(cost, table)
    out["pred_t_verify"] = scale * priced + overhead_s
    out.attrs["layer_overhead_us"] = overhead_s / layers * 1e6
    out.attrs["overhead_clamped"] = unclamped < 0  # the profile prices the anchor step above its measured time
    out.attrs["outside_rows"] = int(np.sum(outside > 0.5))  # priced mostly beyond what the profile measured
    # what profile_lines says of the profile: its meta, not the profile (attrs are deep-copied with each derived frame)
    out.attrs["profile_meta"] = dict(cost.profile.meta) if cost.profile is not None else None
    return out


def profile_lines(summary: dict, repriced: pd.DataFrame, hardware: str | Path) -> list[str]:
    """What to know of the profile a run was repriced with: who measured it (and how many of its
    points on a busy CPU), the verify steps it priced mostly from outside its measured range, and
    a warning where it was measured on another CPU than the run's."""
    from microbench.env import describe_cpu, same_described_cpu
    from speedplan.profile.load import origin_label

    meta = repriced.attrs.get("profile_meta")
    lines = []
    if meta is not None:
        lines.append(f"profile {hardware}: {origin_label(meta)}")
        measured_on = describe_cpu(meta) if meta.get("device_name") else None
        ran_on = summary.get("cpu")
        if measured_on and isinstance(ran_on, str) and ran_on and not same_described_cpu(measured_on, ran_on):
            lines.append(f"warning: the stored run ran on {ran_on!r} and the profile was measured on "
                         f"{measured_on!r}: kernel times do not carry from one CPU to another, so the repriced "
                         "error is the CPUs' difference as much as the profile's")
    else:
        lines.append(f"profile {hardware}: no measured profile (the roofline prices every op)")
    n, outside = len(repriced), repriced.attrs.get("outside_rows", 0)
    if outside:
        lines.append(f"warning: {outside} of {n} verify steps priced mostly from outside the profile's measured "
                     "range (extrapolated): a smaller grid than the run's shapes")
    return lines


def verify_errors(table: pd.DataFrame) -> dict:
    """Median / p90 of |pred − meas| / meas of the verify step and the median signed ratio."""
    ratio = table["pred_t_verify"].to_numpy() / table["meas_t_verify"].to_numpy()
    err = np.abs(ratio - 1.0)
    return {"points": int(len(table)), "verify_median_error": float(np.median(err)),
            "verify_p90_error": float(np.percentile(err, 90)), "verify_median_ratio": float(np.median(ratio))}
