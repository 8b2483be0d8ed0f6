"""Reading a sweep: the Pareto frontier, the pick per batch size, the draft-length schedule of
one mechanism over batch size, the pick under a latency SLO, and the plan to serve.

All are pure functions of the sweep's DataFrame (`speedplan.plan.sweep`); throughputs are
tokens per second, times seconds.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from speedplan.errors import SpeedplanInputError

# Picks within this fraction of the best throughput count as ties, broken towards fewer
# verified tokens (see best_per_batch).
TIE_TOLERANCE = 0.01


def pareto(frame: pd.DataFrame, x: str = "tokens_per_s_per_user", y: str = "tokens_per_s_per_gpu") -> pd.DataFrame:
    """Feasible rows not dominated in (x, y); both columns are maximised. Sorted by x."""
    for col in (x, y, "feasible"):
        if col not in frame.columns:
            raise SpeedplanInputError(f"pareto: missing column {col!r}")
    f = frame[frame["feasible"]].sort_values([x, y], ascending=[False, False])
    keep = f[y].to_numpy() > np.maximum.accumulate(np.concatenate([[-np.inf], f[y].to_numpy()[:-1]]))
    return f[keep].sort_values(x).reset_index(drop=True)


def best_per_batch(frame: pd.DataFrame, tolerance: float = TIE_TOLERANCE) -> pd.DataFrame:
    """Per (batch, context) the pick: among feasible rows within `tolerance` of the most
    tokens/s/GPU, the one that verifies the fewest tokens (then the fastest). A longer draft
    that buys under 1% is not worth its memory and its sensitivity to acceptance error."""
    f = frame[frame["feasible"]]
    if f.empty:
        return f.reset_index(drop=True)
    top = f.groupby(["batch", "context"])["tokens_per_s_per_gpu"].transform("max")
    near = f[f["tokens_per_s_per_gpu"] >= (1.0 - tolerance) * top]
    near = near.sort_values(["batch", "context", "verify_tokens", "tokens_per_s_per_gpu"], ascending=[True, True, True, False])
    return near.drop_duplicates(["batch", "context"]).reset_index(drop=True)


def best_draft_len(frame: pd.DataFrame, mechanism: str, context: int | None = None) -> pd.DataFrame:
    """The draft-length schedule of one mechanism over batch size (plain decoding is D = 0).

    Engines apply one D to a range of batch sizes (e.g. TensorRT-LLM's draft_len_schedule),
    so the schedule is the non-increasing D(B) that maximises the summed relative speedup
    over the swept batches (a dynamic program). The pointwise optimum can rise with B where
    B·(1+D) happens to land on a GEMM tile boundary, or at long context where the KV cache
    makes verification relatively cheaper; it is kept as `pointwise_draft_len` with its
    speedup, and `speedup` is what the schedule delivers.
    Columns: batch, context, draft_len, verify_tokens, speedup, pointwise_draft_len, pointwise_speedup.
    """
    rows = frame[frame["feasible"] & frame["mechanism"].isin([mechanism, "none"])]
    if context is None:
        context = int(rows["context"].min()) if not rows.empty else 0
    rows = rows[rows["context"] == context]
    if rows.empty:
        return pd.DataFrame(columns=["batch", "context", "draft_len", "verify_tokens", "speedup",
                                     "pointwise_draft_len", "pointwise_speedup"])
    # best tree size per (batch, D) for trees; one row per (batch, D) for chains
    per_d = rows.sort_values("speedup", ascending=False).drop_duplicates(["batch", "draft_len"])
    table = per_d.pivot(index="batch", columns="draft_len", values="speedup")
    batches = table.index.to_numpy()
    ds = table.columns.to_numpy()
    value = table.to_numpy()
    verify_tokens = per_d.pivot(index="batch", columns="draft_len", values="verify_tokens").reindex(
        index=table.index, columns=table.columns).to_numpy()
    # relative speedup per batch; within TIE_TOLERANCE of that batch's best counts as best, so
    # ties go to the smaller D (argmax takes the first, and D ascends), as in best_per_batch
    rel = np.where(np.isfinite(value), value / np.nanmax(value, axis=1, keepdims=True), -1e9)
    rel = np.minimum(rel, 1.0 - TIE_TOLERANCE)
    # score[i, j]: best total over batches i.. with D_i = ds[j] and later D's ≤ ds[j]
    n, m = rel.shape
    score = np.zeros((n, m))
    choice = np.zeros((n, m), dtype=int)
    for i in range(n - 1, -1, -1):
        if i == n - 1:
            score[i] = rel[i]
            continue
        running = np.maximum.accumulate(score[i + 1])  # best continuation with D ≤ ds[j]
        arg = np.array([int(np.argmax(score[i + 1][: j + 1])) for j in range(m)])
        score[i] = rel[i] + running
        choice[i] = arg
    j = int(np.argmax(score[0]))
    picks = []
    for i in range(n):
        picks.append(j)
        j = choice[i][j] if i < n - 1 else j
    out = []
    for i, j in enumerate(picks):
        b, d = batches[i], ds[j]
        k = int(np.nanargmax(value[i]))
        out.append({
            "batch": int(b), "context": int(context), "draft_len": int(d),
            "verify_tokens": int(verify_tokens[i][j]), "speedup": float(value[i][j]),
            "pointwise_draft_len": int(ds[k]), "pointwise_speedup": float(value[i][k]),
        })
    return pd.DataFrame(out)


def slo_pick(frame: pd.DataFrame, min_tokens_per_user: float) -> pd.Series | None:
    """The feasible row with the most tokens/s/GPU that still gives each user at least
    `min_tokens_per_user` tokens/s; None when nothing meets the SLO."""
    ok = frame[frame["feasible"] & (frame["tokens_per_s_per_user"] >= min_tokens_per_user)]
    if ok.empty:
        return None
    near = ok[ok["tokens_per_s_per_gpu"] >= (1.0 - TIE_TOLERANCE) * ok["tokens_per_s_per_gpu"].max()]
    return near.sort_values(["verify_tokens", "tokens_per_s_per_gpu"], ascending=[True, False]).iloc[0]  # ties as in best_per_batch


def recommendations(result) -> list[dict]:
    """recommendations.json: per batch size (first context) the picked mechanism and D."""
    best = result.best
    best = best[best["context"] == best["context"].min()] if not best.empty else best
    out = []
    for _, r in best.iterrows():
        out.append({
            "batch": int(r.batch),
            "context": int(r.context),
            "mechanism": r.mechanism,
            "draft_len": int(r.draft_len),
            "verify_tokens": int(r.verify_tokens),
            "acceptance_length": round(float(r.acceptance_length), 4),
            "speedup": round(float(r.speedup), 4),
            "tokens_per_s_per_user": round(float(r.tokens_per_s_per_user), 3),
            "tokens_per_s_per_gpu": round(float(r.tokens_per_s_per_gpu), 3),
            "t_step_s": float(r.t_step_s),
            "cost_source": r.cost_source,
            "acceptance_source": r.acceptance_source,
        })
    return out


def choose_serving_mechanism(result) -> str | None:
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


def serving_plan(result):
    """The ServingPlan (speedplan.serving) for the chosen mechanism and its D(B) schedule."""
    from speedplan.serving import ServingPlan  # serving imports nothing of the planner's

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
        tree = {"topk": int(result.meta.get("topk", {}).get(label, 8)), "depth": draft_len, "nodes": int(row["verify_tokens"]) - 1}
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
