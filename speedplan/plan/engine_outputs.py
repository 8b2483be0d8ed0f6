"""What an engine's plan becomes in the output files: the "engines" object of recommendations.json
(`engine_records`), the `ServingPlan` each engine's serving files are rendered from
(`serving_plans`), schedule.csv (`schedule_frame`), and how they name the engine profile
(`engine_profile_name`). `speedplan.plan.engine_plan` makes the plans."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import pandas as pd

from speedplan.cost.ops import latency_label, missing_tables
from speedplan.engine.profile import SHIPPED
from speedplan.plan.api_checks import engine_plans, sweep_result

if TYPE_CHECKING:
    from speedplan.plan.engine_plan import EnginePlan

NOT_RUN = "not planned"  # how an EnginePlan reads whose engine does not run on the sweep's hardware (its not_run says why)


def read_from_file(meta: dict) -> str:
    """The file a sweep's engine profile (`meta`) was read from; "" for a shipped one."""
    source = meta.get("engine_source") or ""
    return "" if source.endswith(SHIPPED) else source


def engine_profile_name(meta: dict) -> str:
    """The profile's name as outputs give it: "vllm", or "vllm (file my.json)" for a copy read from a file."""
    source, name = read_from_file(meta), str(meta.get("engine", "?"))
    return f"{name} (file {source})" if source else name


def launch_ranges(plan: EnginePlan) -> list[tuple[int, int, int]]:
    """The plan's schedule as the engine's launch runs it by offered batch size, as its launch file
    says it (`serving.launch_ranges`: from 1, the last range open to 65536; SGLang's adaptive
    buckets keyed by the requests a step runs, capped). vLLM's had read [64, 64, 5] here where
    vllm_serve.sh ran [64, 65536, 5]."""
    from speedplan.serving import launch_ranges as ranges_run

    if plan.rows.empty:
        return []
    per_b = plan.rows.drop_duplicates("batch").sort_values("batch")
    return ranges_run(plan.engine, zip(per_b["batch"], per_b["draft_len"]), plan.mode, plan.spec_max_running)[0]


def engine_records(result, plans: dict[str, EnginePlan], batch_weights=None) -> dict[str, dict]:
    """The "engines" object of recommendations.json."""
    out = {}
    for name, plan in plans.items():
        if not len(plan.rows):  # not planned (runs not on this hardware, or its memory rule holds no sequence):
            # not "off", which a script would read as "launch it without speculation"; no serving files either
            out[name] = {"mechanism": None, "mode": NOT_RUN, "how": plan.how,
                         "engine_profile": None if plan.not_run else plan.engine_profile, "schedule": [],
                         "per_batch": []}
            continue
        rec = {"mechanism": plan.mechanism, "mode": plan.mode, "how": plan.how, "engine_profile": plan.engine_profile,
               "schedule": [list(s) for s in launch_ranges(plan)],
               "objective": round(plan.objective, 5),
               "tokens_per_s_per_gpu": round(plan.tokens_per_s_per_gpu, 3),
               "batch_weights": {str(b): round(float(w), 6) for b, w in
                                 plan.rows.groupby("batch")["weight"].sum().items()} if len(plan.rows) else {}}
        rec.update(_extras(result, plan))
        rec["per_batch"] = [{
            "batch": int(r.batch), "context": int(r.context), "draft_len": int(r.draft_len),
            "verify_tokens": int(r.verify_tokens), "speedup": round(float(r.speedup), 4),
            "loss_vs_best": round(float(r.loss_vs_best), 4), "loss_vs_any": round(float(r.loss_vs_any), 4),
            "tokens_per_s_per_gpu": round(float(r.tokens_per_s_per_gpu), 3), "runs_at_batch": int(r.runs_at_batch),
            "running": int(n),
            "best_mechanism": r.best_mechanism, "best_draft_len": int(r.best_draft_len),
            "best_verify_tokens": int(r.best_verify_tokens),
            "best_speedup": round(float(r.best_speedup), 4),
        } for r, n in zip(plan.rows.itertuples(), plan.running)]
        out[name] = rec
    return out


def _cannot_run(engine: str, labels, meta: dict) -> tuple[list[str], list[str]]:
    """(mechanism names serving engine `engine` cannot run at all, labels among sweep `labels` of a
    draft model at a draft TP it does not run): `_runnable`'s test."""
    from speedplan.plan.mechanisms import MECHANISMS
    from speedplan.serving import engine_module

    module, tp = engine_module(engine), int(meta.get("tp", 1))
    names, layers = sorted({str(lb).split(":")[0] for lb in labels} & set(MECHANISMS)), int(
        (meta.get("model") or {}).get("mtp_layers") or 0)
    names = [n for n in names if module.support(n, layers) is None]
    drafts = meta.get("draft_models") or {}
    odd = sorted(str(lb) for lb in labels if str(lb) in drafts and str(lb).split(":")[0] not in names
                 and drafts[str(lb)]["tp"] not in module.draft_tp_options(str(lb).split(":")[0], tp))
    return names, odd


def unsupported(engine: str, labels, meta: dict) -> tuple[str, ...]:
    """The mechanisms among sweep `labels` that serving engine `engine` cannot run at all, and the
    draft models it cannot run at their draft TP ("draft-model:llama-3.2-1b@tp1 (its draft at TP 1
    beside the target's 4)"): every plan said "off" there without a reason, while the SLO pick chose
    one of them (2026-12-05)."""
    names, odd = _cannot_run(engine, labels, meta)
    tp, drafts = int(meta.get("tp", 1)), meta.get("draft_models") or {}
    return tuple(names) + tuple(f"{lb} (its draft at TP {drafts[lb]['tp']} beside the target's {tp})" for lb in odd)


def serving_engine(meta: dict) -> str | None:
    """The serving engine (vllm, sglang, trtllm) whose family (meta's `engine_family`: "vLLM",
    "SGLang", "TensorRT-LLM", a calibrated copy's base's) priced a sweep; None for another family."""
    from speedplan.serving import ENGINES

    family = str(meta.get("engine_family") or "").split(" ")[0].lower()
    return family if family in ENGINES else _shipped_families().get(family)


@functools.lru_cache(maxsize=1)
def _shipped_families() -> dict[str, str]:
    """{family word of a shipped profile's engine ("tensorrt-llm"): the serving engine it describes}, read
    once (the pricing of every sweep asks: `plan.drafter_positions.past_positions`)."""
    from speedplan.engine.profile import get_engine
    from speedplan.serving import ENGINES

    return {get_engine(n).engine.split(" ")[0].lower(): n for n in ENGINES}


def runnable_rows(frame, meta: dict):
    """The rows of a sweep `frame` whose mechanism the serving engine that priced it (`serving_engine`)
    can run; every row for another engine family (speedplan-runtime, a profile of one's own engine)."""
    engine = serving_engine(meta)
    if engine is None or frame.empty:
        return frame
    names, odd = _cannot_run(engine, set(frame["mechanism"]) - {"none"}, meta)
    if not names and not odd:
        return frame
    labels = frame["mechanism"].astype(str)
    return frame[~labels.str.split(":").str[0].isin(names) & ~labels.isin(odd)]


def _extras(result, plan: EnginePlan) -> dict:
    """tree / draft model of a plan, from the sweep's meta."""
    meta = result.meta
    extra = {}
    name = plan.mechanism.split(":")[0]
    if plan.mechanism in (meta.get("draft_models") or {}):
        d = meta["draft_models"][plan.mechanism]
        extra.update(draft_model=d.get("serve_as", d["model"]), draft_tp=int(d["tp"]))
    from speedplan.plan.mechanisms import TREE_MECHANISMS

    if name in TREE_MECHANISMS and len(plan.rows):
        r = plan.rows.iloc[0]
        extra["tree"] = {"topk": int((meta.get("topk") or {}).get(plan.mechanism, 8)), "depth": int(r.draft_len),
                         "nodes": int(r.verify_tokens) - 1}
    return extra


def latency_text(meta: dict) -> str:
    """Where a sweep's latencies came from, for files that carry no table of rows: the profile's
    label (or the datasheet roofline) and the op families the roofline fallback priced."""
    origin = meta.get("cost_origin", "datasheet")
    latency = latency_label(origin, meta.get("profile") or meta.get("hardware", ""), meta.get("roofline_fit", ""))
    missing = missing_tables(meta) if origin not in ("datasheet", "datasheet-roofline") else []
    if missing:  # a measured profile without some table: those ops are priced by the roofline fallback
        latency += f" (roofline fallback for some ops: the profile has no {', '.join(missing)} table)"
    return latency


def serving_plans(result, plans: dict[str, EnginePlan]) -> dict:
    """{engine: ServingPlan} to render, each from that engine's own plan."""
    from speedplan.serving import ServingPlan

    engine_plans(plans, sweep_result(result, "serving_plans"), "serving_plans")
    meta = result.meta
    latency = latency_text(meta)
    out = {}
    for name, plan in plans.items():
        if plan.not_run or not len(plan.rows):  # runs not on this hardware, or its memory rule holds no sequence
            continue  # at any planned batch size: no files (recommendations.json and the plan line say why)
        rows = plan.rows
        acceptance = (meta.get("acceptance") or {}).get(plan.mechanism)  # whole: a comment has room for it
        caution = (meta.get("cautions") or {}).get(plan.mechanism)  # a drafter past its positions (plan.drafter_positions)
        sources = (f"latency {latency}" + (f"; acceptance {acceptance}" if acceptance else "")
                   + (f"; caution: {caution}" if caution else ""))
        context = int(rows["context"].min()) if len(rows) else None
        at = rows[rows["context"] == context].sort_values("batch") if len(rows) else rows
        shown = lambda r: (int(r.batch), int(r.draft_len), float(r.speedup), float(r.loss_vs_best), int(r.runs_at_batch))  # noqa: E731
        per_batch = tuple(shown(r) for r in at.itertuples())
        others = rows[rows["context"] != context].sort_values(["context", "batch"]) if len(rows) else rows
        other_contexts = tuple((int(r.context), *shown(r)) for r in others.itertuples())
        common = dict(model=meta["model"].get("serve_as", meta["model"]["model"]), tp=int(meta["tp"]), hardware=meta.get("hardware", ""),
                      per_batch=per_batch, other_contexts=other_contexts, context=context, priced_by=plan.engine_profile,
                      sources=sources, engine=name,
                      contexts=tuple(sorted(int(c) for c in set(rows["context"]))) if len(rows) else (),
                      context_fit=_context_fit(result, name, plan))
        if plan.mechanism == "none":
            out[name] = ServingPlan(mechanism="none", draft_len=0, schedule=(), fits_memory=len(rows) > 0,
                                    unsupported=unsupported(name, result.frame["mechanism"].unique(), meta), **common)
            continue
        extra = _extras(result, plan)
        schedule = tuple((int(b), int(d)) for b, d in zip(at["batch"], at["draft_len"]))
        ds = [d for _, d in schedule]
        draft_len = ds[0] if ds[0] > 0 else max(ds)
        out[name] = ServingPlan(
            mechanism=plan.mechanism.split(":")[0], draft_len=draft_len, schedule=schedule,
            draft_model=extra.get("draft_model"), draft_tp=extra.get("draft_tp"), tree=extra.get("tree"),
            mode=plan.mode, spec_max_running=plan.spec_max_running, drafter_kept_warm=plan.drafter_kept_warm,
            acceptance_published=plan.mechanism in (meta.get("published_acceptance") or []),
            drafter_positions=int((meta.get("drafter_positions") or {}).get(plan.mechanism) or 0), **common)
    return out


def _context_fit(result, name: str, plan: EnginePlan):
    """`serving.context.ContextFit` of engine `name`'s launch of `plan` (its drafter loaded, the widest
    setting it plans) under the memory rule of the profile that priced it (`engine_profile_for`); None
    without rows or pricing."""
    from speedplan.plan.engine_pricing import engine_profile_for
    from speedplan.serving.context import context_fit

    rows = plan.rows
    if not len(rows) or result.pricing is None:
        return None
    pricings, hw, target, tp, _ = result.pricing  # engine-independent: only the memory rule is the engine's
    rule = engine_profile_for(result, name).memory
    mech = next((p.mech for p in pricings if p.mech is not None and p.mech.label == plan.mechanism), None)
    widest = rows.loc[rows["verify_tokens"].idxmax()]
    draft_len, width = int(widest["draft_len"]), int(widest["verify_tokens"])
    nodes = width - 1 if mech is not None and mech.is_tree else draft_len + 1  # as capacity._draft_and_nodes
    return context_fit(target, mech, rule, hw.memory_bytes, tp, draft_len, nodes,
                       int(rows["context"].max()), platform=hw.platform)


def schedule_frame(plans: dict[str, EnginePlan]) -> pd.DataFrame:
    """schedule.csv: each engine's plan per (batch, context); D 0: drafting off; fits_memory False: the launch
    (its drafter loaded) does not hold that many sequences, and runs_at_batch is how many it runs (0: none);
    running: requests a step runs at once (at most the engine's speculative cap: `EnginePlan.running`)."""
    parts = [p.rows.assign(engine=name, engine_profile=p.profile_name or p.engine_profile.split(":")[0],
                           plan_mechanism=p.mechanism, mode=p.mode, fits_memory=p.rows["runs_at_batch"] == p.rows["batch"],
                           running=p.running)
             for name, p in plans.items() if len(p.rows)]
    if not parts:
        return pd.DataFrame(columns=["engine", "engine_profile", "plan_mechanism", "mode", "batch", "context",
                                     "draft_len"])
    cols = ["engine", "engine_profile", "plan_mechanism", "mode", "batch", "context", "weight", "draft_len",
            "verify_tokens", "fits_memory", "runs_at_batch", "running", "speedup", "tokens_per_s_per_gpu", "loss_vs_best", "loss_vs_any",
            "best_mechanism", "best_draft_len", "best_verify_tokens", "best_speedup"]
    return pd.concat(parts, ignore_index=True)[cols]
