"""`report.html`: one offline page with the recommendations, the SLO pick, the figures (each
captioned with where its numbers came from) and links to the data and serving files.

`write_report` writes the page and has the figures drawn: by the console script's figure
worker when one is given (`speedplan.entry`), else here, one after another. Importing this
module is cheap: matplotlib is imported only while drawing.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import numpy as np
import pandas as pd

from speedplan.plan.pick import RISE_GAIN, TIE_TOLERANCE
from speedplan.report.plan_lines import engine_plan_lines
from speedplan.report.table_notes import cheaper_than_plain_line, grouped, moe_rise_line, plain_dip_line, plan_notes
from speedplan.report.summary import (engine_source, latency_source, no_feasible_message, provenance, report_context,
                                      not_servable, plain_unfit_cells, setting_text, short_provenance, slo_line,
                                      table_rows, tuples, unplanned_line, waiting_line)

if TYPE_CHECKING:
    from speedplan.plan.sweep import SweepResult


def send_figures(result: "SweepResult", out_dir: Path, worker=None):
    """What the figures show (`report_data.figure_set`), handed to a started
    `figure_worker.FigureWorker` to draw into out_dir if one is given. Returns the FigureSet."""
    from speedplan.report.data import figure_set

    context = report_context(result.frame)
    figures = figure_set(result, context if context is not None else 0)
    if worker is not None:
        worker.submit(figures, Path(out_dir), short_provenance(result))
    return figures


def write_report(result: "SweepResult", out_dir: Path, files: list[str], worker=None, figures=None,
                 plans=None, sensitivity_table=None) -> list[Path]:
    """Write report.html and the PNG figures into out_dir (which exists); `files` are the other
    files the lead writes into the same folder (sweep.csv, pareto.csv, recommendations.json,
    serving configs) for the HTML to link; `plans` the per-engine plans (engine_plan.plan_engines,
    computed here when not given). With a `figure_worker.FigureWorker`, the worker
    draws the figures (`figures`: what `send_figures` already sent it); this process draws
    them if there is none or it fails. Returns the paths written."""
    from speedplan.report.figures import draw_figures, figure_paths

    out_dir = Path(out_dir)
    if figures is None:
        figures = send_figures(result, out_dir, worker)
    short = short_provenance(result)
    paths = figure_paths(out_dir)
    page = out_dir / "report.html"
    links = [_link(out_dir, f) for f in files]
    if plans is None:
        from speedplan.plan.engine_plan import plan_engines

        plans = plan_engines(result)
    page.write_text(render_html(result, report_context(result.frame), paths, links, provenance(result), short,
                                plans, sensitivity_table), encoding="utf-8")
    if worker is None or not worker.wait():
        paths = draw_figures(figures, out_dir, short)
    return paths + [page]


def _link(out_dir: Path, file: str | Path) -> str:
    path = Path(file)
    if path.is_absolute():
        try:
            return path.relative_to(out_dir.resolve()).as_posix()
        except ValueError:
            return os.path.relpath(path, out_dir.resolve()).replace(os.sep, "/")
    return path.as_posix()


_CSS = """body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em}td,th{padding:.25em .7em;border-bottom:1px solid #eee;
text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}.note{color:#555;font-size:.9em}
.warn{color:#a00000;font-weight:bold}figure{margin:1.2em 0}img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}code{background:#f4f4f4;padding:0 .2em}"""

_FIGURE_TEXT = {
    "pareto.png": "Every feasible configuration (faint, by mechanism) and the Pareto frontier of "
                  "tokens/s per user against tokens/s per GPU; a label names a frontier point's own setting, "
                  "which can differ from the recommendation table's at that B: the table takes the most tokens/s/GPU "
                  f"(the shortest draft within {TIE_TOLERANCE:.0%} of it, or off), while a frontier point may give "
                  "up tokens/s/GPU for tokens/s per user. Tokens/s per user is a running request's: where a "
                  "step runs fewer requests than offered (^ in the table), an offered request gets less.",
    "speedup_heatmap.png": "Speedup over plain decoding at each batch size B and draft length D, one panel "
                           "per mechanism (a tree's cell: its best node count at that depth); grey cells are "
                           "infeasible, stars mark the best D per B where it beats plain decoding (the setting "
                           f"that verifies the fewest tokens within {TIE_TOLERANCE:.0%} of the fastest, for a chain "
                           "the shortest draft, as the recommendation table picks).",
    "best_draft_len.png": "Per mechanism, the best non-increasing draft-length schedule over batch size (the "
                          "engines' own plans, above, follow what each engine can express and may rise again), "
                          "crosses where the pointwise best D differs (an engine plan that sets D per batch size "
                          f"follows a cross only where each rise it needs gains more than {RISE_GAIN:.0%} of a batch "
                          f"size's share, settings within {TIE_TOLERANCE:.0%} of a batch size's best counting as "
                          "its best), and the overall pick at each batch size. D = 0 here is plain "
                          "decoding without a drafter; an engine's plan that turns drafting off keeps its drafter "
                          "loaded (and running, in vLLM, SGLang and TensorRT-LLM's EAGLE paths), so its D = 0 costs "
                          "more and its schedule may keep D > 0 there (see each engine's plan).",
    "step_breakdown.png": "Where the time of one target step goes for the picked configuration at each batch "
                          "size (the black tick is the plain-decoding step; where plain decoding does not fit in "
                          "memory, * in the table, that tick is priced as if it fit).",
    "roofline.png": "The verify step's linear layers against the achievable roofline (its numbers and where "
                    "they come from: 'roofline' in the table above): memory-bound left of the ridge point (for a "
                    "dense model's weights, draft tokens nearly free there; a mixture of experts reads more "
                    "experts as it verifies more tokens, see the note under the table), compute-bound right of "
                    "it. The table's 'verify GEMMs' column says which bound the op cost model's priced GEMMs "
                    "hit, which can differ from this datasheet picture near the ridge.",
}


def _e(value) -> str:
    return html.escape(str(value))


def _html_table(rows: list[dict], left: set[str]) -> str:
    if not rows:
        return ""
    def cell(tag: str, column: str, value) -> str:
        attr = ' class="l"' if column in left else ""
        return f"<{tag}{attr}>{_e(value)}</{tag}>"

    head = "".join(cell("th", c, c) for c in rows[0])
    body = "".join("<tr>" + "".join(cell("td", c, v) for c, v in r.items()) + "</tr>\n" for r in rows)
    return f"<table>\n<tr>{head}</tr>\n{body}</table>"


def _recommendation_rows(best: pd.DataFrame, plain_unfit: set[tuple[int, int]] = frozenset()) -> list[dict]:
    rows = table_rows(best, plain_unfit)
    extra = tuples(best.sort_values(["context", "batch"]), ["verify_tokens", "t_step_s", "bound", "cost_source"])
    for row, (verify_tokens, t_step, bound, source) in zip(rows, extra):
        row["verified/seq"] = str(int(verify_tokens))
        row["step (ms)"] = f"{t_step * 1e3:.2f}"
        row["verify GEMMs"] = f"{bound}-bound"
        row["latency from"] = str(source)
    return rows


def _engine_sections(plans: dict) -> list[str]:
    parts = ["<h2>Plan per engine</h2>",
             '<p class="note">Each engine gets one mechanism and the draft lengths it can express (vLLM: any D per '
             "batch range; SGLang: fixed, or per batch-size bucket for EAGLE/EAGLE3/MTP chains; TensorRT-LLM: "
             "draft_len_schedule, no D above batch 1's), chosen for the largest weighted mean of tokens/s/GPU over "
             "that engine's best at each planned batch size (uniform weights unless --batch-weights). D = 0: no drafts "
             "(a loaded drafter keeps its memory: where it leaves room for fewer sequences than offered, the engine runs "
             "as many as fit and the others wait, priced with that many sequences; where the engine still "
             "runs its forward over each step's tokens to keep its KV cache current, that is priced). Loss: against the best any setting of that engine reaches "
             "at that batch size; loss vs any: against the best row of the sweep under the same engine profile, whatever "
             "engine could run it. Each engine's plan is priced with its own engine profile (the sweep's --engine "
             "for the engine it describes, the shipped profile for the others).</p>"]
    for name, plan in plans.items():
        if not len(plan.rows):  # it does not run on this hardware, or holds no sequence: no figures to give
            why = plan.how if plan.not_run else "its memory rule holds no sequence at any planned batch size"
            parts.append(f'<h3>{_e(name)}: not planned</h3><p class="note">{_e(why)}</p>')
            continue
        size = f", {plan.tree_nodes} nodes" if plan.tree_nodes else ""  # a tree plan's size, as the terminal gives it
        weights = plan.rows.groupby("batch")["weight"].sum()
        weighed = ("uniform weights over the planned batch sizes" if np.allclose(weights, weights.iloc[0]) else
                   "weighted by --batch-weights: " + ", ".join(f"B={int(b)} {w:.2g}" for b, w in weights.items()))
        parts.append(f"<h3>{_e(name)}: {_e(plan.mechanism)} ({_e(plan.mode)}{size})</h3><p class=\"note\">{_e(plan.how)}; "
                     f"{100 * plan.objective:.1f}% of this engine's best tokens/s/GPU on average over the planned "
                     f"batch sizes ({_e(weighed)}); {plan.tokens_per_s_per_gpu:,.0f} tokens/s/GPU time-weighted; "
                     f"priced with engine profile {_e(plan.engine_profile)}</p>")
        rows = [{"B": str(int(r.batch)), "context": str(int(r.context)), "D": str(int(r.draft_len)),
                 "verified/seq": str(int(r.verify_tokens)),
                 "speedup": (f"{r.speedup:.2f}x" if not r.feasible or r.runs_at_batch == r.batch else
                             f"{r.speedup:.2f}x (runs {int(r.runs_at_batch)} "
                             f"{'sequence' if int(r.runs_at_batch) == 1 else 'sequences'}, the most that fit"
                             + (" with the drafter loaded" if plan.mechanism != "none" else "") + "; the rest wait)")
                 if r.feasible else "does not fit in memory",
                 "runs at once": str(int(step)) + (" (the engine's cap with speculative decoding, spec_max_running)"
                                                   if 0 < step < r.runs_at_batch else ""),
                 "loss vs best": f"{100 * r.loss_vs_best:.1f}%",
                 "best": f"{setting_text(r.best_mechanism, r.best_draft_len, r.best_verify_tokens)} {r.best_speedup:.2f}x",
                 "loss vs any": f"{100 * r.loss_vs_any:.1f}%"}
                for r, step in zip(plan.rows.itertuples(), plan.running if len(plan.rows) else [])]
        parts.append(_html_table(rows, {"best"}))
        line = engine_plan_lines({name: plan})[-1]  # the terminal's line: caps, the sequences held, and what to do
        parts.append(f'<p class="note">{_e(line[line.find("worst loss"):] if "worst loss" in line else line.strip())}</p>')
    return parts


def _sensitivity_section(result: "SweepResult", table: pd.DataFrame | None = None) -> list[str]:
    """The AL ±10% table; `table` is `plan.pick.sensitivity` of the sweep (computed here when not given)."""
    if table is None:
        from speedplan.plan.pick import sensitivity

        table = sensitivity(result.frame, result.meta.get("published_acceptance") or [])
    if table.empty:
        return []
    rows = [{"mechanism": r.mechanism, "B": str(int(r.batch)), "context": str(int(r.context)),
             "D at AL -10%": str(r.draft_len_low), "D": str(r.draft_len_mid), "D at AL +10%": str(r.draft_len_high),
             "speedup -10%": f"{r.speedup_low:.2f}x", "speedup": f"{r.speedup_mid:.2f}x",
             "speedup +10%": f"{r.speedup_high:.2f}x"} for r in table.itertuples()]
    return ["<h2>How sure: published acceptance at AL &plusmn;10%</h2>",
            '<p class="note">These mechanisms use a published default (rows named under "acceptance from"), '
            "measured on other models, hardware or datasets. Per mechanism, its fastest D (the highest speedup, "
            "not the shortest draft within 1% that the recommendation table takes; a tree's D is its depth, at its "
            "best node count) and that speedup with every AL 10% lower and higher (step times unchanged: priced "
            f"with engine profile {_e(result.meta.get('engine', '?'))} and the latency named in the header). Measure "
            "your own with --acceptance (a trace, a vLLM /metrics scrape or an SGLang log). Steps past their "
            "drafter's positions are left out: priced at AL 1, their acceptance moves nothing (the cautions).</p>",
            _html_table(rows, {"mechanism"})]


def render_html(result: "SweepResult", context: int | None, figures: list[Path], links: list[str],
                caption: str, figure_caption: str, plans: dict | None = None,
                sensitivity_table: pd.DataFrame | None = None) -> str:
    """One page with no external links (its figures are the PNGs beside it in the folder: copy the
    folder, not the page alone): facts, recommendations, SLO pick, figures (each captioned with the
    provenance line drawn inside it), data files. `caption` is the full provenance line;
    `sensitivity_table` the AL ±10% table when the caller has it."""
    meta, frame = result.meta, result.frame
    model = meta.get("model") or {}
    title = f"speedplan: {model.get('model', '?')} on {meta.get('hardware', '?')}"
    facts = [
        ("model", ", ".join(f"{k}={v}" for k, v in model.items() if v not in ("", None))),
        ("hardware", f"{meta.get('hardware', '?')}: {meta.get('hardware_description', '')}"
                     + (f" ({meta['hardware_file']})" if meta.get("hardware_file") else
                        f" (profile {meta['profile']})" if meta.get("profile") not in (None, "", meta.get("hardware"))
                        else "")),
        ("tensor parallel", meta.get("tp", 1)),
        ("dtype", meta.get("dtype", "")),
        ("temperature", f"{meta.get('temperature') or 0:g} (0: greedy; the acceptance sources say how they were moved to it)"),
        ("latency from", latency_source(result)),
        ("engine", engine_source(result)),
        ("roofline", meta.get("roofline_basis") or
                     f"{float(meta.get('peak_flops_per_s') or 0) / 1e12:,.0f} TFLOP/s achievable, "
                     f"{float(meta.get('bytes_per_s') or 0) / 1e9:,.0f} GB/s, ridge "
                     f"{float(meta.get('ridge_flops_per_byte') or 0):,.0f} FLOP/byte"),
        ("grid", f"{len(frame)} points ({int(frame['feasible'].sum()) if len(frame) else 0} feasible): "
                 f"mechanisms {', '.join(dict.fromkeys(frame['mechanism']))}; B {_values(frame, 'batch')}; "
                 f"D {_values(frame, 'draft_len')}; context {_values(frame, 'context')}"),
        *((f"head of {label}", text) for label, text in (meta.get("heads") or {}).items()),
        *((f"draft of {label}", f"{d['model']} at tensor parallel {d['tp']}")
          for label, d in (meta.get("draft_models") or {}).items()),
        ("created", f"{meta.get('created', '')} by speedplan {meta.get('version', '')}"),
        ("command", meta.get("command") or "none: made from Python (speedplan.sweep)"),
    ]
    parts = [
        f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>",
        f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>",
        "<table>" + "".join(f'<tr><th class="l">{_e(k)}</th><td class="l">{_e(v)}</td></tr>' for k, v in facts),
        '<tr><th class="l">acceptance from</th><td class="l">'
        + "<br>".join(f"{_e(m)}: {_e(s)}" for m, s in (meta.get("acceptance") or {}).items())
        + "</td></tr></table>",
        "<h2>Recommendation per batch size</h2>",
    ]
    if result.best.empty:
        parts.append(f'<p class="warn">{_e(no_feasible_message(result))}</p>')
    else:
        parts.append('<p class="note">At each batch size and context: the feasible configuration with the most '
                     'tokens/s per GPU, near-ties going to fewer verified tokens ("none": plain decoding '
                     "wins).</p>")
        parts.append(_html_table(_recommendation_rows(result.best, plain_unfit_cells(frame)),
                                 {"mechanism", "latency from", "verify GEMMs"}))
        parts.extend(f'<p class="note">{_e(line)}</p>' for line in waiting_line(result.best))
        parts.extend(f'<p class="note">{_e(line)}</p>' for line in filter(None, [moe_rise_line(result.meta, result.best),
                                                                                   cheaper_than_plain_line(result.best),
                                                                                   plain_dip_line(frame)]))
        unplanned = unplanned_line(result, list(plans) if plans else None)
        if unplanned:
            parts.append(f'<p class="note">{_e(unplanned)}</p>')
        parts.extend(f'<p class="note">{_e(line)}</p>'
                     for line in not_servable(result.meta, set(result.best["mechanism"])))
    if plans:
        parts.extend(_engine_sections(plans))
        parts.extend(f'<p class="note">{_e(line)}</p>' for line in plan_notes(result, plans))
    parts.extend(f'<p class="note">{word}: {_e(name)}: {_e(why)}</p>' for key, word in (("skipped", "skipped"),
                 ("cautions", "caution")) for name, why in grouped(meta.get(key)))
    parts.extend(_sensitivity_section(result, sensitivity_table))
    parts.append(f"<h2>SLO pick</h2><p>{_e(slo_line(result))}</p>")
    parts.append("<h2>Figures</h2>")
    if context is not None and frame["context"].nunique() > 1:
        parts.append(f'<p class="note">Per-context figures show context {context} tokens; every context is in '
                     "the tables and data files.</p>")
    parts.append(f'<p class="note">{_e(caption)}</p>')
    for fig in figures:
        name = Path(fig).name
        parts.append(f'<figure><img src="{_e(name)}" alt="{_e(name)}"><figcaption>{_e(_FIGURE_TEXT.get(name, ""))} '
                     f"<br>{_e(figure_caption)}</figcaption></figure>")
    parts.append("<h2>Data and serving files</h2><ul>")
    parts.extend(f'<li><a href="{_e(quote(link))}">{_e(link)}</a></li>' for link in links)
    parts.append("</ul></body></html>\n")
    return "\n".join(parts)


def _values(frame: pd.DataFrame, column: str) -> str:
    values = sorted(frame[column].unique())
    if len(values) <= 14:
        return ", ".join(str(v) for v in values)
    return f"{values[0]}..{values[-1]} ({len(values)} values)"
