"""Writing a sweep's report folder, all or nothing.

Everything goes into a temporary sibling folder that replaces `out_dir` only once every file
is written, so a failure never leaves a half-written report behind; a folder at `out_dir` is
replaced only if it is empty or a previous report (`speedplan.outputs`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from speedplan.errors import SpeedplanInputError
from speedplan.outputs import MANIFEST, REPORT, check_replaceable, discard, move_into_place, staging_folder
from speedplan.plan.api_checks import engine_plans, plain_fits, sweep_result
from speedplan.plan.engine_outputs import schedule_frame, serving_plans
from speedplan.plan.engine_plan import plan_engines
from speedplan.plan.pick import recommendations, sensitivity
from speedplan.plan.sweep import SweepResult


def write_outputs(result: SweepResult, out_dir: Path, worker=None, plans=None, batch_weights=None) -> list[Path]:
    """Write sweep.csv, pareto.csv, recommendations.json, schedule.csv (each engine's plan per
    batch), sensitivity.csv, the serving configs (one plan per engine), report.html and its
    figures into `out_dir` (replacing a previous report there). `plans` are `plan_engines(result, batch_weights)`
    unless given, either as the dict or as a function of no arguments that returns it (called
    once the figures are sent, so that planning overlaps drawing). A started
    `speedplan.entry.FigureWorker` draws the figures if given. Returns the final paths."""
    plain_fits(sweep_result(result, "write_outputs"), "write_outputs")
    if not isinstance(out_dir, (str, os.PathLike)) or not str(out_dir).strip():
        raise SpeedplanInputError(f"write_outputs: out_dir must be a folder path, got {out_dir!r}")
    if plans is not None and batch_weights is not None:
        raise SpeedplanInputError("write_outputs: give batch_weights or plans, not both (plans were weighted when "
                                  "planned: plan_engines(result, batch_weights))")
    if plans is not None and not callable(plans):
        _checked_plans(plans, result)
    if worker is not None and not all(callable(getattr(worker, m, None)) for m in ("submit", "wait", "cancel")):
        raise SpeedplanInputError(f"write_outputs: worker must be a started speedplan.entry.FigureWorker (or None: "
                                  f"the figures are drawn here), got {type(worker).__name__}")
    out_dir = Path(out_dir).expanduser()
    check_replaceable(out_dir, REPORT)
    tmp = staging_folder(out_dir)
    try:
        from speedplan.report.html import send_figures, write_report

        figures = send_figures(result, tmp, worker)  # first, so the worker draws while we plan and write
        if plans is None:
            plans = plan_engines(result, batch_weights)  # bad weights fail here: the temporary folder goes
        elif callable(plans):
            plans = _checked_plans(plans(), result)
        files = []
        result.frame.to_csv(tmp / "sweep.csv", index=False, float_format="%.6g")
        result.pareto.to_csv(tmp / "pareto.csv", index=False, float_format="%.6g")
        (tmp / "recommendations.json").write_text(json.dumps(recommendations(result, plans), indent=1) + "\n")
        schedule_frame(plans).to_csv(tmp / "schedule.csv", index=False, float_format="%.6g")
        published = result.meta.get("published_acceptance") or []
        al_sensitivity = sensitivity(result.frame, published)
        al_sensitivity.to_csv(tmp / "sensitivity.csv", index=False, float_format="%.6g")
        files += ["sweep.csv", "pareto.csv", "recommendations.json", "schedule.csv", "sensitivity.csv"]
        from speedplan.serving import write_serving_configs

        files += [p.name for p in write_serving_configs(serving_plans(result, plans), tmp)]
        (tmp / "meta.json").write_text(json.dumps(result.meta, indent=1, default=str) + "\n")
        files.append("meta.json")
        write_report(result, tmp, files, worker=worker, figures=figures, plans=plans,
                     sensitivity_table=al_sensitivity)
        move_into_place(tmp, out_dir)
    except BaseException:
        try:
            if worker is not None:
                worker.cancel()
        finally:
            discard(tmp)  # even where cancelling failed: no half-written folder left beside out_dir
        raise
    return sorted(p for p in out_dir.iterdir() if p.name != MANIFEST)


def _checked_plans(plans, result) -> dict:
    """`plans` when they are plan_engines(result)'s, with at least one engine (the report has its serving files)."""
    engine_plans(plans, result, "write_outputs")
    if not plans:
        raise SpeedplanInputError("write_outputs: plans is an empty dict; give plan_engines(result) (or leave plans "
                                  "out: it is planned here)")
    return plans
