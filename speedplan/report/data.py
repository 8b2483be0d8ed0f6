"""What each report figure shows, taken out of the sweep's DataFrames as plain arrays.

This is the pandas half of the report figures: `figure_set` filters, sorts and groups the
sweep once and returns a `report.figures.FigureSet` of numpy arrays and lists, which the
drawing half (`report.figures`, matplotlib only) turns into PNGs. The split lets a forked
process import matplotlib and draw without ever importing pandas (see `speedplan.entry`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from speedplan.plan.pick import TIE_TOLERANCE
from speedplan.report.figures import BREAKDOWN, MAX_SCATTER_POINTS, FigureSet

if TYPE_CHECKING:
    from speedplan.plan.sweep import SweepResult


# the columns `speedup_grid`, `starred_rows` and `_best_d` read (the last two through pick.best_per_batch and
# pick.best_draft_len): their filters and sorts copy these, not the sweep's 38 (figure_set on the default sweep,
# in-process, 2026-12-07: 35.8 ms where the whole frame took 47.1 ms, benchmarks/README.md)
PICK_COLUMNS = ["mechanism", "batch", "context", "draft_len", "verify_tokens", "feasible", "speedup",
                "tokens_per_s_per_gpu"]


def _cols(frame: pd.DataFrame, *names: str) -> dict[str, np.ndarray]:
    """The named columns as numpy arrays."""
    return {n: frame[n].to_numpy() for n in names}


def speedup_grid(rows: pd.DataFrame) -> tuple[list, list, np.ndarray]:
    """(batches, draft lengths, speedup[D, B]) of one mechanism: NaN where infeasible, and a
    tree's best node count at each depth."""
    batches = sorted(rows["batch"].unique().tolist())
    drafts = sorted(rows["draft_len"].unique().tolist())
    ok = rows[rows["feasible"]]
    values = np.full((len(drafts), len(batches)), np.nan)
    np.fmax.at(values, (np.searchsorted(drafts, ok["draft_len"]), np.searchsorted(batches, ok["batch"])),
               ok["speedup"].to_numpy(dtype=float))
    return batches, drafts, values


def starred_rows(frame: pd.DataFrame, mechanism: str, batches: list, drafts: list) -> list[int]:
    """Per batch: the row (index into `drafts`) of the D that `pick.best_per_batch` picks over
    `mechanism`'s rows and plain decoding's in `frame` (one context): within TIE_TOLERANCE of the
    fastest, the fewest verified tokens (a tree: a longer D with fewer nodes can win), or -1
    where plain decoding is picked or nothing fits."""
    from speedplan.plan.pick import best_per_batch

    pick = best_per_batch(frame[frame["mechanism"].isin([mechanism, "none"])]).set_index("batch")
    return [drafts.index(int(pick.at[b, "draft_len"])) if b in pick.index and pick.at[b, "mechanism"] == mechanism
            else -1 for b in batches]


def _pareto(result: "SweepResult") -> dict:
    feasible = result.frame[result.frame["feasible"]]
    clouds = []
    for mech, group in feasible.groupby("mechanism", sort=False):
        if len(group) > MAX_SCATTER_POINTS:
            group = group.sample(MAX_SCATTER_POINTS, random_state=0)
        clouds.append((str(mech), group["tokens_per_s_per_user"].to_numpy(float),
                       group["tokens_per_s_per_gpu"].to_numpy(float)))
    user, gpu = feasible["tokens_per_s_per_user"], feasible["tokens_per_s_per_gpu"]
    span = (np.array([user.min(), user.max()], dtype=float), np.array([gpu.min(), gpu.max()], dtype=float))
    front = result.pareto.sort_values("tokens_per_s_per_user")
    return dict(clouds=clouds, span=span,
                front=_cols(front, "tokens_per_s_per_user", "tokens_per_s_per_gpu", "mechanism", "batch", "draft_len"))


def _best_d(result: "SweepResult", context: int) -> dict:
    from speedplan.plan.pick import best_draft_len

    frame = result.frame
    at = frame.loc[(frame["context"] == context) & frame["feasible"], PICK_COLUMNS]
    pick = result.best[result.best["context"] == context].sort_values("batch")
    mechanisms = [m for m in dict.fromkeys(at["mechanism"]) if m != "none"]
    schedules = {str(m): _cols(best_draft_len(at, m, context), "batch", "draft_len", "pointwise_draft_len")
                 for m in mechanisms}
    return dict(schedules=schedules, pick=_cols(pick, "batch", "draft_len", "mechanism"),
                batches=sorted(at["batch"].unique().tolist()), top=int(at["draft_len"].max()) if len(at) else 0)


def _breakdown(result: "SweepResult", context: int) -> dict:
    pick = result.best[result.best["context"] == context].sort_values("batch")
    components = {label: sum(pick[c].to_numpy(dtype=float) for c in columns) for label, columns, _ in BREAKDOWN}
    return dict(pick=_cols(pick, "batch", "mechanism", "draft_len", "t_plain_s"), components=components)


def _roofline(result: "SweepResult", context: int) -> dict:
    frame, meta = result.frame, result.meta
    peak = float(meta.get("peak_flops_per_s") or 0)
    bandwidth = float(meta.get("bytes_per_s") or 0)
    plain = frame[(frame["context"] == context) & (frame["mechanism"] == "none") & frame["feasible"]]
    pick = result.best[result.best["context"] == context]
    return dict(plain=_cols(plain, "gemm_flops_per_byte", "gemm_flops_per_s", "batch"),
                pick=_cols(pick, "gemm_flops_per_byte", "gemm_flops_per_s", "mechanism", "batch", "running",
                           "verify_tokens"),
                peak=peak, bandwidth=bandwidth,
                ridge=float(meta.get("ridge_flops_per_byte") or (peak / bandwidth if bandwidth else 0)))


def figure_set(result: "SweepResult", context: int) -> FigureSet:
    """Everything the five figures draw, for one context length (tokens)."""
    meta = result.meta
    frame = result.frame
    head = f"{(meta.get('model') or {}).get('model', '')} on {meta.get('hardware', '')}, TP={meta.get('tp', 1)}"
    at = f"context {context} tokens"
    at_context = frame.loc[frame["context"] == context, PICK_COLUMNS]
    heat_rows = at_context[at_context["mechanism"] != "none"]
    grids = {str(m): speedup_grid(heat_rows[heat_rows["mechanism"] == m]) for m in dict.fromkeys(heat_rows["mechanism"])}
    return FigureSet(
        pareto=_pareto(result), heatmap=dict(grids=grids, stars={m: starred_rows(at_context, m, g[0], g[1])
                                                                  for m, g in grids.items()},
                                             tolerance=TIE_TOLERANCE), best_d=_best_d(result, context),
        breakdown=_breakdown(result, context), roofline=_roofline(result, context),
        titles={"pareto": f"Pareto frontier: {head}" + (" (all contexts)" if frame["context"].nunique() > 1 else f", {at}"),
                "heatmap": f"Speedup over plain decoding, {head}, {at}",
                "best_d": f"Best draft length per batch, {head}, {at}",
                "breakdown": f"Step time of the picked configuration, {head}, {at}",
                "roofline": f"Verify GEMMs on the roofline, {head}, {at}"},
    )
