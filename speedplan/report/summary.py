"""The terminal summary `speedplan sweep` prints, and the provenance lines every output carries: where the
latencies came from (measured profile or datasheet roofline) and where acceptance came from.
`speedplan.report.html` builds the page from the same pieces."""

from __future__ import annotations

import numbers
import re
from pathlib import Path
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from speedplan.cost.ops import latency_label, missing_tables
from speedplan.plan.engine_outputs import engine_profile_name
from speedplan.plan.pick import offered_rate
from speedplan.errors import SpeedplanInputError
from speedplan.report.plan_lines import engine_plan_lines, pick_rows, setting_text
from speedplan.report.table_notes import (cheaper_than_plain_line, cpu_engine_note, grouped, moe_rise_line,
                                          plain_dip_line, plan_notes)
from speedplan.specs.model import attention_label

if TYPE_CHECKING:
    from speedplan.plan.sweep import SweepResult


def report_context(frame: pd.DataFrame) -> int | None:
    """The context the per-context figures show: most feasible rows (all rows where none is), ties to the first."""
    if frame.empty:
        return None
    rows = frame[frame["feasible"]] if frame["feasible"].any() else frame
    counts = rows["context"].value_counts(sort=False)
    order = list(dict.fromkeys(rows["context"]))
    return int(max(order, key=lambda c: (counts[c], -order.index(c))))


def latency_source(result: "SweepResult", notes: bool = True) -> str:
    """E.g. "measured (AIConfigurator 0.12, vLLM 0.24 kernels) h100-sxm" or "datasheet
    roofline mi300x", plus how many rows used the roofline fallback for some ops and how many
    were priced partly outside the measured range, when a profile was used."""
    meta = result.meta
    origin = meta.get("cost_origin", "datasheet")
    text = latency_label(origin, meta.get("profile") or meta.get("hardware", "?"), meta.get("roofline_fit", ""))
    frame = result.frame
    if origin in ("datasheet", "datasheet-roofline") or not notes:
        return text
    notes = []
    sources = frame["cost_source"].value_counts() if "cost_source" in frame else {}
    fallback = int(sources.get("roofline", 0)) + int(sources.get("mixed", 0))
    if fallback:
        notes.append(f"roofline fallback for some ops in {fallback} of {len(frame)} rows{_no_table(meta)}")
    if "out_of_range_share" in frame and len(frame) and frame["out_of_range_share"].max() > 0.001:
        share = frame["out_of_range_share"]
        notes.append(f"verify pass priced outside the measured range: median {share.median():.0%}, "
                     f"max {share.max():.0%} (sweep.csv out_of_range_share)")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _no_table(meta: dict) -> str:
    """", the profile has no elementwise table" (`cost.ops.missing_tables`)."""
    missing = missing_tables(meta)
    return f": the profile has no {', '.join(missing)} table" if missing else ""


def engine_source(result: "SweepResult") -> str:
    """The engine profile that priced the steps and how its terms were set."""
    meta = result.meta
    label = meta.get("engine_label") or meta.get("engine", "?")
    how = meta.get("engine_fit") or ""
    cap = meta.get("engine_spec_max_running") or 0
    capped = (f"; a speculative step runs at most {cap:g} requests (spec_max_running), so at B > {cap:g} the "
              "others wait" if cap else "")
    return f"{label}{'; ' + how if how else ''}{capped}{_beyond_fit(result)}{_other_setting(result)}{cpu_engine_note(meta)}"


def _other_setting(result: "SweepResult") -> str:
    """"; fitted on llama-3.1-8b on h100-sxm, TP=1, not this sweep's ..." where no row the engine
    profile was fitted to ran this sweep's model, hardware and TP; "" otherwise (or unlabelled rows)."""
    meta = result.meta
    settings = meta.get("engine_fitted_settings") or []
    parsed = [re.fullmatch(r"(.+) on (.+), TP=(\d+)", s) for s in settings]
    if not settings or not all(parsed):
        return ""
    model, hardware, tp = (meta.get("model") or {}).get("model", ""), str(meta.get("hardware", "")), int(meta.get("tp", 1))
    same = lambda m: (m[1] == model and int(m[3]) == tp and
                      hardware in (m[2], Path(m[2]).stem, Path(m[2]).name))  # calibrate's --hardware may be a path
    if any(same(m) for m in parsed):
        return ""
    shown = "; ".join(settings[:3]) + (f" and {len(settings) - 3} more" if len(settings) > 3 else "")
    return (f"; its fitted rows ran on {shown}, not on {model} on {hardware}, TP={tp}: its host and launch terms "
            "may carry over, its kernel_scale and anything tied to the model may not (calibrate on this setting)")


def _beyond_fit(result: "SweepResult") -> str:
    """"; B = 2–64 lie beyond its fitted rows: extrapolated there ..." where the sweep plans
    batch sizes outside those its engine profile was fitted at (above or below); "" otherwise."""
    span = result.meta.get("engine_fitted_batches") or []
    frame = result.frame
    if len(span) != 2 or frame is None or frame.empty or "feasible" not in frame:
        return ""
    planned = {float(b) for b in frame.loc[frame["feasible"], "batch"]}
    parts = [sorted(b for b in planned if b < span[0]), sorted(b for b in planned if b > span[1])]
    parts = [f"{p[0]:g}" + (f"–{p[-1]:g}" if len(p) > 1 else "") for p in parts if p]
    if not parts:
        return ""
    many = len(parts) > 1 or "–" in parts[0]
    return (f"; B = {' and '.join(parts)} {'lie' if many else 'lies'} beyond its fitted rows: extrapolated there "
            "(speedplan calibrate with your own runs at those batch sizes)")


def acceptance_source(result: "SweepResult") -> str:
    """Where each mechanism's acceptance came from, e.g. "eagle = published: ...; ngram = user: alpha=0.8"."""
    acceptance = result.meta.get("acceptance") or {}
    if not acceptance:
        return "not stated"
    return "; ".join(f"{mech} = {source}" for mech, source in acceptance.items())


def provenance(result: "SweepResult") -> str:
    """The full provenance line the HTML and the terminal summary carry."""
    return (f"latency: {latency_source(result)}; engine: {engine_source(result)}; "
            f"acceptance: {acceptance_source(result)}")


def short_provenance(result: "SweepResult") -> str:
    """The caption inside every figure: the same facts with each acceptance source cut to its kind and the row it
    came from ('eagle3: published: "EAGLE-3 paper Tab.1"'; a default with no row for the target adds how it got one:
    `short_acceptance`; "AL 1 past its drafter's positions" where its rows are priced so, whatever that source says).
    Text is the costliest thing to draw, and report.html carries the full line."""
    acceptance, frame = result.meta.get("acceptance") or {}, result.frame
    past = set(frame.loc[frame["past_positions"].astype(bool), "mechanism"]) if "past_positions" in frame else set()
    parts = [f"{mech}: {short_acceptance(source)}" + (" (AL 1 past its drafter's positions)" if mech in past else "")
             for mech, source in acceptance.items()]
    return (f"latency: {latency_source(result, notes=False)}; engine profile {engine_profile_name(result.meta)}; "
            f"acceptance: {'; '.join(parts) or 'not stated'}")


def short_acceptance(source) -> str:
    """An acceptance source cut to its kind and the row it came from, e.g. 'published: "EAGLE-3
    paper Tab.1"', in 60 characters. A default with no row for this target says how it got one:
    "(by draft size)" for a draft model's alpha from its size, "(other target)" for a row
    measured on another target (`plan.defaults`); the row's title is cut before that tag is."""
    source = str(source)
    kind, _, rest = source.split(";")[0].partition(": ")
    title = re.search(r'"[^"]+"', rest)  # the row's source, as the cases files quote it
    first = title.group(0) if title else rest.split(", ")[0]
    while first.count("(") > first.count(")"):  # a file's "(12 decode lines, ..." cut inside: drop the open part
        first = first[:first.rindex("(")].rstrip()
    tag = (" (by draft size)" if "alpha from the draft's size" in source else
           " (other target)" if "no row for" in source else "")
    text = f"{kind}: {first}" if first else kind
    room = 60 - len(tag)
    return (text if len(text) <= room else text[:room - 1] + "…") + tag


def no_feasible_message(result: "SweepResult") -> str:
    """Why the sweep recommends nothing: `plan.shortfall.memory_shortfall`'s line (the one the CLI
    refuses such a sweep with) when plain decoding fits nowhere."""
    from speedplan.plan.shortfall import memory_shortfall

    shortfall = memory_shortfall(result)
    return f"no feasible configuration: {shortfall}" if shortfall else "no feasible configuration in the sweep grid"


def slo_line(result: "SweepResult") -> str:
    target = result.meta.get("min_tokens_per_user")
    pick = result.slo_pick
    if target is None and pick is None:
        return "SLO pick: none asked (--min-tokens-per-user N picks one)"
    need = f">= {target:g} tokens/s/user" if target is not None else "SLO"
    from speedplan.plan.engine_outputs import runnable_rows
    from speedplan.plan.pick import slo_pick

    family = str(result.meta.get("engine_family") or "").split(" ")[0]
    if pick is None:
        feasible = result.frame[result.frame["feasible"]] if "feasible" in result.frame else result.frame.iloc[:0]
        runs = runnable_rows(feasible, result.meta)
        if runs.empty:
            return f"SLO pick ({need}): no feasible configuration reaches it"
        top = runs.loc[runs["tokens_per_s_per_user"].idxmax()]
        other = slo_pick(result.frame, target) if target is not None and len(runs) < len(feasible) else None
        return (f"SLO pick ({need}): " + ("no feasible configuration reaches it" if other is None else
                f"nothing {family} runs reaches it ({other['mechanism']} D={int(other['draft_len'])} at "
                f"B={int(other['batch'])} would, which {family} cannot run)") + "; the most is "
                f"{top['tokens_per_s_per_user']:.1f} tokens/s/user ({setting_text(top['mechanism'], top['draft_len'], top['verify_tokens'])} "
                f"at B={int(top['batch'])}, context {int(top['context'])})")
    # the pick is among what the engine runs (sweep: runnable_rows); over every mechanism, one may do better
    anyone = slo_pick(result.frame, target) if target is not None else None
    beyond = ("" if anyone is None or anyone["tokens_per_s_per_gpu"] <= pick["tokens_per_s_per_gpu"] else
              f"; among what {family} runs (the best of any mechanism, {anyone['mechanism']} D={int(anyone['draft_len'])} "
              f"at B={int(anyone['batch'])}, gives {anyone['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU: {family} cannot run it)")
    running = int(pick["running"]) if "running" in pick else int(pick["batch"])
    waiting = (f"^ (a running request's: a step runs {running} of the {int(pick['batch'])}, the rest wait), "
               f"{offered_rate(pick):.1f} per offered request" if running < int(pick["batch"]) else "")
    return (f"SLO pick ({need}): {pick['mechanism']} D={int(pick['draft_len'])} at B={int(pick['batch'])}, "
            f"context {int(pick['context'])}: {pick['tokens_per_s_per_user']:.1f} tokens/s/user{waiting}, "
            f"{pick['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU{beyond}; it holds while at most "
            + (f"{running} requests run" if int(running) != 1 else "1 request runs")
            + f" at once: cap the server there (vLLM --max-num-seqs {running}, SGLang --max-running-requests "
            f"{running}, TensorRT-LLM max_batch_size {running}); the launch files serve every planned batch size")


def plain_unfit_cells(frame: pd.DataFrame) -> set[tuple[int, int]]:
    """(batch, context) cells where some configuration fits in memory but plain decoding does
    not: an engine that caps its speculative steps (`spec_max_running`) runs fewer requests
    there than plain decoding would, so the speedup is against a plain step that cannot run."""
    batch, context = frame["batch"].to_numpy(dtype=int), frame["context"].to_numpy(dtype=int)  # arrays: a hot path
    plain = (frame["mechanism"].to_numpy() == "none") & ~frame["fits_memory"].to_numpy(dtype=bool)
    if not plain.any():
        return set()
    fit = frame["feasible"].to_numpy(dtype=bool) & np.isin(batch, batch[plain])
    return set(zip(batch[plain].tolist(), context[plain].tolist())) & set(zip(batch[fit].tolist(), context[fit].tolist()))


def table_rows(best: pd.DataFrame, plain_unfit: set[tuple[int, int]] = frozenset(), nodes: bool = False) -> list[dict]:
    """The best configuration per (batch, context) as display strings; a speedup against a
    plain step that does not fit in memory (`plain_unfit_cells`) is marked with a *, a tokens/s
    per user where a step runs fewer requests than offered (an engine's cap) with a ^; `nodes`:
    a tree's draft nodes after its mechanism (the terminal's table, which has no verified column)."""
    columns = ["batch", "context", "mechanism", "draft_len", "acceptance_length", "speedup",
               "tokens_per_s_per_user", "tokens_per_s_per_gpu", "running", "verify_tokens"]
    ordered = best.sort_values(["context", "batch"])
    if "running" not in ordered:  # a frame from before the engines' caps: every request runs
        ordered = ordered.assign(running=ordered["batch"])
    if "verify_tokens" not in ordered:  # a hand-made frame: chains
        ordered = ordered.assign(verify_tokens=ordered["draft_len"] + 1)
    rows = []
    for b, ctx, mech, d, al, speedup, user, gpu, run, verified in tuples(ordered, columns):
        mark = "*" if (int(b), int(ctx)) in plain_unfit else ""
        tree = f" ({int(verified) - 1} nodes)" if nodes and mech != "none" and int(verified) > int(d) + 1 else ""
        rows.append({
            "B": str(int(b)),
            "context": str(int(ctx)),
            "mechanism": "off (plain decoding)" if mech == "none" else str(mech) + tree,
            "D": str(int(d)),
            "AL": f"{al:.2f}",
            "speedup": f"{speedup:.2f}x{mark}",
            "tok/s/user": f"{user:,.1f}" + ("^" if run < b else ""),  # per running request: the rest wait
            "tok/s/GPU": f"{gpu:,.0f}",
        })
    return rows


def waiting_line(best: pd.DataFrame, shown: set | None = None) -> list[str]:
    """The note for tokens/s per user marked ^: where a step runs fewer requests than the batch
    offered (SGLang's cap with speculative decoding), the rate is a running request's; the rest
    wait, so per offered request it is `plan.pick.offered_rate`. `shown`: the (B, context) cells a
    cut table shows (None: every row)."""
    if "running" not in best:
        return []
    capped = best[best["running"] < best["batch"]].sort_values(["context", "batch"])
    if shown is not None:
        capped = capped[[(int(b), int(c)) in shown for b, c in zip(capped["batch"], capped["context"])]]
    if capped.empty:
        return []
    several = best["context"].nunique() > 1
    per_offered = ", ".join(f"{rate:,.1f} at B = {int(b)}" + (f" (context {int(c)})" if several else "")
                            for rate, b, c in zip(offered_rate(capped), capped["batch"], capped["context"]))
    runs = sorted({int(n) for n in capped["running"]})
    return [f"note: tok/s/user marked ^ is a running request's: a step runs {', '.join(map(str, runs))} requests "
            f"there and the rest wait (queued), so per offered request it is {per_offered}"]


def tuples(frame: pd.DataFrame, columns: list[str]):
    """Rows as plain tuples (itertuples' namedtuple class costs ~10 ms for a wide frame)."""
    return frame[columns].itertuples(index=False, name=None)


def not_servable(meta: dict, labels: set) -> list[str]:
    """A line naming the table's mechanisms that the engine whose profile priced it cannot run
    (the table is the best any mechanism reaches; each engine's plan keeps to what it runs)."""
    from speedplan.plan.engine_outputs import serving_engine, unsupported

    family, engine = str(meta.get("engine_family") or "").split(" ")[0], serving_engine(meta)
    cannot = unsupported(engine, labels, meta) if engine is not None else ()
    return [f"note: {family} cannot run {', '.join(cannot)}: this table is the best any mechanism reaches under "
            "its profile; the engine plans below keep to what each engine runs"] if cannot else []


def batch_ranges(batches) -> str:
    """Sorted batch sizes with runs of three or more consecutive ones as ranges: "1, 2, 110–256"."""
    out, run = [], []
    for b in sorted(int(b) for b in batches):
        if run and b != run[-1] + 1:
            out.append(f"{run[0]}–{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)))
            run = []
        run.append(b)
    if run:
        out.append(f"{run[0]}–{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)))
    return ", ".join(out)


def unplanned_line(result: "SweepResult", engines=None) -> str | None:
    """The swept batch sizes at which nothing fits in memory, or plain decoding does not, or
    None: they drop out of the per-engine plans, and the terminal says so (with what the
    smallest of them needs) instead of leaving them out in silence; `engines`: the serving
    engines planned for (all where None), whose roomier memory rules it names."""
    from speedplan.plan.shortfall import held_elsewhere, plain_memory_need

    frame = result.frame
    fits = set(frame.loc[frame["feasible"], "batch"])
    missing = sorted(set(frame["batch"]) - fits)
    if not fits:
        return None
    has_plain = lambda b: (frame.loc[frame["batch"] == b, "mechanism"] == "none").any()
    parts = []
    if missing:
        need = f" ({plain_memory_need(result, missing[0])})" if has_plain(missing[0]) else ""
        parts.append(f"at B = {batch_ranges(missing)} nothing fits in memory{need}"
                     + "".join(f"; {name}'s memory rule ({rule}) holds plain decoding at B = {batch_ranges(held)}: "
                               f"sweep with --engine {name} to plan it there"
                               for name, rule, held in held_elsewhere(result, missing, engines)))
    cells = set(zip(frame.loc[frame["feasible"], "batch"], frame.loc[frame["feasible"], "context"]))
    for c in sorted(set(frame["context"])):  # a batch size that fits at another context only
        lost = sorted({b for b in fits if (b, c) not in cells})
        if lost:
            parts.append(f"at context {int(c)}, B = {batch_ranges(lost)} nothing fits in memory (at a shorter "
                         "context it does)" if (frame["context"] < c).any() else
                         f"at context {int(c)}, B = {batch_ranges(lost)} nothing fits in memory")
    unfit = plain_unfit_cells(frame)
    if unfit:
        cap = result.meta.get("engine_spec_max_running") or 0
        why = (f"only speculative steps, which this engine caps at {cap:g} running requests (spec_max_running), "
               "fit there" if cap else "only some speculative configurations fit there")
        several = frame["context"].nunique() > 1
        where = []
        for c in sorted({c for _, c in unfit}):  # the need at a context where it does not fit, not the smallest one
            batches = sorted(b for b, cc in unfit if cc == c)
            at_c = replace(result, frame=frame[frame["context"] == c]) if several else result
            where.append((f"at context {int(c)}, " if several else "at ")
                         + f"B = {batch_ranges(batches)} plain decoding does not fit in memory "
                         f"({plain_memory_need(at_c, batches[0])})")
        parts.append(f"{'; '.join(where)}: {why}; the speedups marked * are against plain decoding priced as if it fit")
    return "not planned: " + "; ".join(parts) if parts else None


def render_summary(result: "SweepResult", max_rows: int = 12, plans: dict | None = None) -> str:
    """The short plain-text table printed to the terminal: per batch size the best mechanism, D,
    AL, speedup, tokens/s/user, tokens/s/GPU; each engine's plan (when `plans` are given); then
    where latencies and acceptance came from, and the SLO pick if any."""
    from speedplan.plan.api_checks import engine_plans, sweep_result

    sweep_result(result, "render_summary")
    if plans is not None:
        engine_plans(plans, result, "render_summary")
    if isinstance(max_rows, bool) or not isinstance(max_rows, numbers.Integral) or max_rows < 1:
        raise SpeedplanInputError(f"render_summary: max_rows must be a positive integer, got {max_rows!r}")
    max_rows = int(max_rows)  # np.int64 from a notebook
    meta = result.meta
    model = (meta.get("model") or {}).get("model", "?")
    attention = attention_label(meta.get("model") or {})
    narrow = str((meta.get("model") or {}).get("experts", "")).endswith("mxfp4")
    where = f" ({meta['hardware_file']})" if meta.get("hardware_file") else ""  # a file of one's own, maybe a preset's name
    profile = str(meta.get("profile") or "")  # a folder of one's own (its path), or a shipped one of another name
    if not where and profile and ("/" in profile or profile != meta.get("hardware")):  # cpu-local-xeon: cpu-local's
        where = f" (profile {profile})"
    lines = [f"speedplan: {model} on {meta.get('hardware', '?')}{where}, TP={meta.get('tp', 1)}, {meta.get('dtype', '')}"
             + (" (experts mxfp4)" if narrow else "") + (f" ({meta['dtype_note']})" if meta.get("dtype_note") else "")
             + (f", attention {attention}" if attention else "")
             + f", engine profile {engine_profile_name(meta)}"
             + (f", temperature {meta['temperature']:g}" if meta.get("temperature") else "")]
    rows = table_rows(result.best, plain_unfit_cells(result.frame), nodes=True)
    if not rows:
        lines.append(no_feasible_message(result))
    else:
        columns = list(rows[0])
        if len({r["context"] for r in rows}) == 1:
            columns.remove("context")
            lines[0] += f", context {rows[0]['context']}"
        # a cut adds a "(k of n rows shown)" line: one row over shows whole in as many lines
        shown = rows if len(rows) <= max_rows + 1 else pick_rows(rows, max_rows)
        widths = {c: max(len(c), *(len(r[c]) for r in shown)) for c in columns}
        left = {"mechanism"}
        fmt = lambda r: "  ".join(r[c].ljust(widths[c]) if c in left else r[c].rjust(widths[c]) for c in columns)
        lines.append(fmt({c: c for c in columns}))
        lines.extend(fmt(r) for r in shown)
        if len(shown) < len(rows):
            lines.append(f"({len(shown)} of {len(rows)} rows shown; all in report.html and sweep.csv)")
        cells = {(int(r["B"]), int(r["context"])) for r in shown}
        lines.extend(waiting_line(result.best, cells))
        lines.extend(filter(None, [moe_rise_line(meta, result.best), cheaper_than_plain_line(result.best),
                                   plain_dip_line(result.frame), unplanned_line(result, list(plans) if plans else None)]))
        lines.extend(not_servable(meta, {m for b, c, m in tuples(result.best, ["batch", "context", "mechanism"])
                                         if (int(b), int(c)) in cells}))
    if plans:
        lines.extend(engine_plan_lines(plans, own=meta.get("engine")))
        lines.extend(plan_notes(result, plans))
    lines.append(f"latency: {latency_source(result)}")
    lines.append(f"engine: {engine_source(result)}")
    acceptance = result.meta.get("acceptance") or {}
    lines.extend(f"{'acceptance:' if i == 0 else '':11s} {mech}: {source}"
                 for i, (mech, source) in enumerate(acceptance.items()))
    if not acceptance:
        lines.append("acceptance: not stated")
    lines.extend(f"{word}: {name}: {why}" for key, word in (("skipped", "skipped"), ("cautions", "caution"))
                 for name, why in grouped(meta.get(key)))
    lines.append(slo_line(result))
    return "\n".join(lines)
