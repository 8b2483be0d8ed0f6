"""Reading a sweep: the Pareto frontier, the pick per batch size, the draft-length schedule of
one mechanism over batch size (and the schedule an engine plan takes, `falling_schedule`), the
pick under a latency SLO, recommendations.json, and the sensitivity of the picks to acceptance.
The plan per serving engine is engine_plan.py.

All are pure functions of the sweep's DataFrame (`speedplan.plan.sweep`); throughputs are
tokens per second, times seconds.
"""

from __future__ import annotations

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
    picks = non_increasing(rel)
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


def non_increasing(rel: np.ndarray) -> list[int]:
    """The column index per row (rows: batches ascending; columns: settings ascending, e.g. D)
    that never rises from one row to the next and maximises the summed `rel`: `few_rises` with
    rises barred."""
    return few_rises(rel, np.inf)


UNIT = 1e-9  # few_rises works in integer multiples of this, so that ties are exact


def few_rises(rel: np.ndarray, rise_cost) -> list[int]:
    """The column index per row (rows: batches ascending; columns: settings ascending in verified
    tokens) that maximises the summed `rel` less the cost of each rise (a larger column than the
    row before): `rise_cost` is one number, or one per row (the cost of rising into that row).
    Falls are free. rise_cost = inf gives `non_increasing`'s schedule; 0 every row's own best. A
    dynamic program in integer units of UNIT, so that equal totals are equal: among them, the
    smallest last column, then at each row before it the smallest column that reaches it.

    >>> few_rises(np.array([[0.9, 1.0], [1.0, 0.97], [0.9, 1.0]]), 0.05)  # one dip: not worth a rise
    [1, 1, 1]
    >>> few_rises(np.array([[0.9, 1.0], [1.0, 0.90], [0.9, 1.0]]), 0.05)  # a 10% dip is
    [1, 0, 1]
    """
    n, m = rel.shape
    if n == 0:
        return []
    big = np.iinfo(np.int64).max // (4 * max(n, 1))
    score = np.clip(np.round(np.asarray(rel, dtype=float) / UNIT), -big, big).astype(np.int64)
    cost = np.broadcast_to(np.asarray(rise_cost, dtype=float), (n,))
    cost = np.where(np.isinf(cost), big, np.clip(np.round(cost / UNIT), 0, big)).astype(np.int64)
    upper = np.triu(np.ones((m, m), dtype=bool), k=1)  # upper[i, j]: from column i to a larger j
    total = score[0].copy()
    back = []
    for t in range(1, n):
        cand = total[:, None] - np.where(upper, cost[t], 0)  # cand[i, j]: ending at column i, then j
        prev = cand.argmax(axis=0)  # the smallest i among equals
        back.append(prev)
        total = cand[prev, np.arange(m)] + score[t]
    j = int(total.argmax())
    picks = [j]
    for prev in reversed(back):
        j = int(prev[j])
        picks.append(j)
    return picks[::-1]


# What a rise (a longer draft at the next larger batch size) must gain at a batch size of its own
# (`falling_schedule`): a hysteresis about the size of the op model's own resolution (interpolating one
# measured GEMM from its neighbours is off by a median 2.6-3.3% on H100, H200 and B200:
# benchmarks/bench_profiles_vs_aic.py). Without it the tile grid's steps in the profiles
# (B·(1+D) crossing 32, 64, 128 tokens) made schedules zigzag 8, 7, 8, 7, ... across neighbouring
# batch sizes for gains of 1-3%; falls cost nothing.
RISE_GAIN = 0.03


def falling_schedule(s: dict, allowed: list, nb: int) -> list:
    """An "any" plan of engine_plan.py: per batch, the setting (`allowed`, ascending in verified
    tokens; `s`: each setting's score per batch) that maximises the summed share of each batch's best (a batch's throughput over its best, counted
    as 0.99 within TIE_TOLERANCE of it, so near-ties fall with B as the best-D figure draws them)
    less RISE_GAIN for each rise (`few_rises`; falls are free). Each batch's share, and the
    cost of a rise into it, counts by the best score `allowed` reaches there (its weight w_B,
    the `--batch-weights` share, times how near this drafter gets to the engine's best there;
    relative to the mean over batches), so that batch sizes a user left out neither hold the
    others back nor are held to a schedule. A rise at one batch size alone thus needs more than
    RISE_GAIN of its share (3%: a 4% gain over a setting within 1% of the best)."""
    score = np.array([[s[k][i] for k in allowed] for i in range(nb)])
    top = score.max(axis=1, keepdims=True)
    rel = np.minimum(np.divide(score, top, out=np.zeros_like(score), where=top > 0), 1.0 - TIE_TOLERANCE)
    weight = top[:, 0] / top.mean() if top.mean() > 0 else np.ones(nb)  # w_B relative to the mean
    return [allowed[j] for j in few_rises(rel * weight[:, None], RISE_GAIN * weight)]


def offered_rate(rows):
    """Tokens/s an offered request gets (rows of the sweep frame, or one row): a running one's
    tokens_per_s_per_user × running / batch, since under an engine's cap a step runs `running`
    of the `batch` requests in flight and the rest wait; the running rate where none wait."""
    running = rows["running"] if "running" in rows else rows["batch"]
    return rows["tokens_per_s_per_user"] * running / rows["batch"]


def slo_pick(frame: pd.DataFrame, min_tokens_per_user: float) -> pd.Series | None:
    """The feasible row with the most tokens/s/GPU that still gives each user at least
    `min_tokens_per_user` tokens/s, an offered request's (`offered_rate`); None when nothing
    meets the SLO."""
    ok = frame[frame["feasible"] & (offered_rate(frame) >= min_tokens_per_user)]
    if ok.empty:
        return None
    near = ok[ok["tokens_per_s_per_gpu"] >= (1.0 - TIE_TOLERANCE) * ok["tokens_per_s_per_gpu"].max()]
    return near.sort_values(["verify_tokens", "tokens_per_s_per_gpu"], ascending=[True, False]).iloc[0]  # ties as in best_per_batch


def _per_batch_records(best: pd.DataFrame, profile: str | None = None) -> list[dict]:
    return [_record(r, profile) for _, r in best.iterrows()]


def _record(r, profile: str | None = None) -> dict:
    """One configuration row as recommendations.json writes it; `profile`: the engine profile's
    name as the outputs give it (with its file unless shipped), else the row's."""
    return {
        "batch": int(r.batch),
        "context": int(r.context),
        "mechanism": r.mechanism,
        "draft_len": int(r.draft_len),
        "verify_tokens": int(r.verify_tokens),
        "acceptance_length": round(float(r.acceptance_length), 4),
        "speedup": round(float(r.speedup), 4),
        "tokens_per_s_per_user": round(float(r.tokens_per_s_per_user), 3),
        "running": int(getattr(r, "running", r.batch)),  # below batch: the user rate is a running request's (^)
        "tokens_per_s_per_gpu": round(float(r.tokens_per_s_per_gpu), 3),
        "t_step_s": float(r.t_step_s),
        "engine_profile": profile or r.engine,
        "cost_source": r.cost_source,
        "acceptance_source": r.acceptance_source,
    }


def recommendations(result, plans=None, batch_weights=None) -> dict:
    """recommendations.json: {"per_batch": the best configuration per (batch, context) over
    every mechanism, "engines": {engine: its plan (engine_plan.plan_engines)}}. Each engine
    has mechanism, schedule ([first_batch, last_batch, D] ranges over the planned batches; the
    engine's config carries the last D on), and per_batch rows with batch, context, draft_len,
    speedup and loss_vs_best (a fraction, against the best that engine reaches at that batch)."""
    from speedplan.plan.api_checks import engine_plans, sweep_result
    from speedplan.plan.engine_outputs import engine_profile_name, engine_records, latency_text
    from speedplan.plan.engine_plan import plan_engines

    sweep_result(result, "recommendations")
    if plans is not None and batch_weights is not None:
        raise SpeedplanInputError("recommendations: give batch_weights or plans, not both (plans were weighted when "
                                  "planned: plan_engines(result, batch_weights))")
    if plans is None:
        plans = plan_engines(result, batch_weights)
    engine_plans(plans, result, "recommendations")
    latency = latency_text(result.meta)  # every row was priced so, beside its engine profile and acceptance source
    profile = engine_profile_name(result.meta)
    out = {"per_batch": [{**r, "latency_source": latency} for r in _per_batch_records(result.best, profile)],
           "engines": {n: {**e, "latency_source": latency} for n, e in engine_records(result, plans, batch_weights).items()}}
    slo = result.meta.get("min_tokens_per_user")
    if slo is not None:  # the SLO pick, as the terminal and report.html show it (None: nothing meets it)
        out["slo_pick"] = {"min_tokens_per_user": float(slo),
                           "pick": None if result.slo_pick is None else _record(result.slo_pick, profile)}
    return out


def sensitivity(frame: pd.DataFrame, mechanisms, factor: float = 0.1) -> pd.DataFrame:
    """Best D and speedup per (mechanism, batch, context) if the AL of the best configuration
    were `factor` lower or higher (default ±10%). Every configuration's drafted part (AL − 1)
    scales by the one factor k that moves the best one's AL by ±10%, so longer drafts gain or
    lose more tokens than short ones, while step times stay (they do not depend on AL):
    speedup' = AL' · (R / B) · t_plain / t_step, as in the sweep (R: the requests a step runs,
    below B where an engine caps speculative steps). Worked example: best AL 3.0 → 3.3 needs k = 1.15, so a
    D = 1 row with AL 1.8 becomes 1.92. Columns: engine (the profile that priced the steps),
    mechanism, batch, context, draft_len_low/mid/high, speedup_low/mid/high. Rows past the drafter's
    positions (`past_positions`: priced at AL 1 whatever the acceptance) are left out."""
    rows = frame[frame["feasible"] & frame["mechanism"].isin(list(mechanisms))]
    if "past_positions" in rows:  # priced at AL 1 past the drafter's positions: no acceptance to move there
        rows = rows[~rows["past_positions"].astype(bool)]
    if rows.empty:
        return pd.DataFrame(columns=["engine", "mechanism", "batch", "context"])
    keys = ["mechanism", "batch", "context"]
    order = rows.sort_values(["speedup", "verify_tokens"], ascending=[False, True])
    best_al = order.drop_duplicates(keys).set_index(keys)["acceptance_length"]
    al_star = rows.set_index(keys).index.map(best_al).to_numpy(dtype=float)
    parts = {}
    for tag, sign in (("low", -1.0), ("mid", 0.0), ("high", 1.0)):
        k = np.where(al_star > 1.0, (al_star * (1.0 + sign * factor) - 1.0) / np.maximum(al_star - 1.0, 1e-12), 1.0)
        al = np.clip(1.0 + k * (rows["acceptance_length"].to_numpy() - 1.0), 1.0, 1.0 + rows["draft_len"].to_numpy())
        sp = rows.assign(speedup=al * rows["running"] / rows["batch"] * rows["t_plain_s"] / rows["t_step_s"])
        pick = sp.sort_values(["speedup", "verify_tokens"], ascending=[False, True]).drop_duplicates(keys).set_index(keys)
        parts[f"draft_len_{tag}"] = pick["draft_len"].astype(int)
        parts[f"speedup_{tag}"] = pick["speedup"]
    table = pd.DataFrame(parts).reset_index().sort_values(["mechanism", "context", "batch"]).reset_index(drop=True)
    table.insert(0, "engine", rows["engine"].iloc[0])
    return table
