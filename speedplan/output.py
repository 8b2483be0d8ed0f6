"""Writing a sweep's report folder, all or nothing.

Everything goes into a temporary sibling folder that replaces `out_dir` only once every file
is written, so a failure never leaves a half-written report behind.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from .errors import SpeedplanInputError
from .planner import SweepResult, best_draft_len, recommendations


def choose_serving_mechanism(result: SweepResult) -> str | None:
    """The mechanism to configure an engine with: the SLO pick's, else the one picked at the
    most batch sizes (ties: the one picked at the smallest batch). None if plain decoding
    wins everywhere."""
    if result.slo_pick is not None and result.slo_pick["mechanism"] != "none":
        return str(result.slo_pick["mechanism"])
    picks = [m for m in result.best["mechanism"] if m != "none"]
    if not picks:
        return None
    counts = Counter(picks)
    top = max(counts.values())
    return next(m for m in picks if counts[m] == top)


def serving_plan(result: SweepResult):
    """The ServingPlan (speedplan.serving) for the chosen mechanism and its D(B) schedule."""
    from .serving import ServingPlan

    label = choose_serving_mechanism(result)
    if label is None:
        return None
    schedule = best_draft_len(result.frame, label)
    name, _, draft = label.partition(":")
    ref_batch = int(result.slo_pick["batch"]) if result.slo_pick is not None else int(schedule["batch"].iloc[0])
    ref = schedule[schedule["batch"] == ref_batch]
    ref = ref if not ref.empty else schedule.iloc[:1]
    draft_len = max(int(ref["draft_len"].iloc[0]), 1)
    tree = None
    if name in ("eagle-tree", "medusa"):
        rows = result.frame[(result.frame["mechanism"] == label) & (result.frame["draft_len"] == draft_len)]
        row = rows.loc[rows["speedup"].idxmax()]
        tree = {"topk": int(result.meta.get("topk", {}).get(label, 8)), "depth": draft_len, "nodes": int(row["nodes"]) - 1}
    return ServingPlan(
        model=result.meta["model"]["model"],
        mechanism=name,
        draft_len=draft_len,
        schedule=tuple((int(b), int(d)) for b, d in zip(schedule["batch"], schedule["draft_len"])),
        tp=int(result.meta["tp"]),
        draft_model=draft or None,
        tree=tree,
        hardware=result.meta["hardware"],
    )


def write_outputs(result: SweepResult, out_dir: Path, worker=None) -> list[Path]:
    """Write sweep.csv, pareto.csv, recommendations.json, schedule.csv, the serving configs,
    report.html and its figures into `out_dir` (replacing it). A started
    `figure_worker.FigureWorker` draws the figures if given. Returns the final paths."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise SpeedplanInputError(f"--out {out_dir}: exists and is not a folder")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        from .report import send_figures, write_report

        figures = send_figures(result, tmp, worker)  # first, so the worker draws while we write
        files = []
        result.frame.to_csv(tmp / "sweep.csv", index=False, float_format="%.6g")
        result.pareto.to_csv(tmp / "pareto.csv", index=False, float_format="%.6g")
        (tmp / "recommendations.json").write_text(json.dumps(recommendations(result), indent=1) + "\n")
        files += ["sweep.csv", "pareto.csv", "recommendations.json"]
        plan = serving_plan(result)
        if plan is not None:
            from .serving import write_serving_configs

            best_draft_len(result.frame, plan.mechanism if not plan.draft_model else f"{plan.mechanism}:{plan.draft_model}").to_csv(
                tmp / "schedule.csv", index=False, float_format="%.6g")
            files.append("schedule.csv")
            files += [p.name for p in write_serving_configs(plan, tmp)]
        (tmp / "meta.json").write_text(json.dumps(result.meta, indent=1, default=str) + "\n")
        files.append("meta.json")
        write_report(result, tmp, files, worker=worker, figures=figures)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        if worker is not None:
            worker.cancel()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sorted(out_dir.iterdir())
