"""The sweep report: `report.html` with its PNG figures, and the terminal summary.

`write_report` draws the figures (`speedplan.report_figures`) and one offline HTML page that
links them and the lead's data files (sweep.csv, pareto.csv, recommendations.json, serving
configs). `render_summary` is the short table `speedplan sweep` prints. Both say where the
latencies came from (measured profile or datasheet roofline) and where acceptance came from.
Importing this module is cheap: matplotlib is imported only while drawing.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import pandas as pd

if TYPE_CHECKING:
    from .planner import SweepResult

LATENCY_ORIGINS = {
    "measured": "measured profile",
    "derived": "derived profile",
    "datasheet-roofline": "datasheet roofline",
    "datasheet": "datasheet roofline",
}


def report_context(frame: pd.DataFrame) -> int | None:
    """The context length the per-context figures show: the one with most feasible rows
    (all rows when none is feasible), ties to the first in sweep order."""
    if frame.empty:
        return None
    rows = frame[frame["feasible"]] if frame["feasible"].any() else frame
    counts = rows["context"].value_counts(sort=False)
    order = list(dict.fromkeys(rows["context"]))
    return int(max(order, key=lambda c: (counts[c], -order.index(c))))


def latency_source(result: "SweepResult") -> str:
    """E.g. "measured profile h100-sxm" or "datasheet roofline h100-sxm", plus how many rows
    fell back to the roofline when a profile was used."""
    meta = result.meta
    origin = meta.get("cost_origin", "datasheet")
    name = meta.get("profile") or meta.get("hardware", "?")
    text = f"{LATENCY_ORIGINS.get(origin, origin)} {name}"
    sources = result.frame["cost_source"].value_counts() if "cost_source" in result.frame else {}
    fallback = int(sources.get("roofline", 0)) + int(sources.get("mixed", 0))
    if origin in ("measured", "derived") and fallback:
        text += f" (datasheet roofline for some ops in {fallback} of {len(result.frame)} rows)"
    return text


def acceptance_source(result: "SweepResult") -> str:
    """Where each mechanism's acceptance came from, e.g. "eagle = published: ...; ngram = user: alpha=0.8"."""
    acceptance = result.meta.get("acceptance") or {}
    if not acceptance:
        return "not stated"
    return "; ".join(f"{mech} = {source}" for mech, source in acceptance.items())


def provenance(result: "SweepResult") -> str:
    """The full provenance line the HTML and the terminal summary carry."""
    return f"latency: {latency_source(result)}; acceptance: {acceptance_source(result)}"


def short_provenance(result: "SweepResult") -> str:
    """The caption inside every figure: the same facts with each acceptance source cut to its
    kind and first clause ("eagle: published: Spec-Bench leaderboard (A100)"); text is the
    costliest thing to draw, and report.html carries the full line."""
    acceptance = result.meta.get("acceptance") or {}
    parts = []
    for mech, source in acceptance.items():
        kind, _, rest = str(source).split(";")[0].partition(": ")
        first = rest.split(", ")[0] if rest else ""
        text = f"{kind}: {first}" if first else kind
        parts.append(f"{mech}: {text if len(text) <= 48 else text[:47] + '…'}")
    return f"latency: {latency_source(result)}; acceptance: {'; '.join(parts) or 'not stated'}"


def no_feasible_message(frame: pd.DataFrame) -> str:
    if not frame.empty and "fits_memory" in frame and not frame["fits_memory"].any():
        return ("no feasible configuration: no grid point fits in memory "
                "(try smaller batches, a shorter context or more GPUs)")
    return "no feasible configuration in the sweep grid"


def slo_line(result: "SweepResult") -> str:
    target = result.meta.get("min_tokens_per_user")
    pick = result.slo_pick
    if target is None and pick is None:
        return "SLO pick: none asked (--min-tokens-per-user N picks one)"
    need = f">= {target:g} tokens/s/user" if target is not None else "SLO"
    if pick is None:
        return f"SLO pick ({need}): no feasible configuration reaches it"
    return (f"SLO pick ({need}): {pick['mechanism']} D={int(pick['draft_len'])} at B={int(pick['batch'])}, "
            f"context {int(pick['context'])}: {pick['tokens_per_s_per_user']:.1f} tokens/s/user, "
            f"{pick['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU")


def _table_rows(best: pd.DataFrame) -> list[dict]:
    columns = ["batch", "context", "mechanism", "draft_len", "acceptance_length", "speedup",
               "tokens_per_s_per_user", "tokens_per_s_per_gpu"]
    rows = []
    for b, ctx, mech, d, al, speedup, user, gpu in _tuples(best.sort_values(["context", "batch"]), columns):
        rows.append({
            "B": str(int(b)),
            "context": str(int(ctx)),
            "mechanism": str(mech),
            "D": str(int(d)),
            "AL": f"{al:.2f}",
            "speedup": f"{speedup:.2f}x",
            "tok/s/user": f"{user:,.1f}",
            "tok/s/GPU": f"{gpu:,.0f}",
        })
    return rows


def _tuples(frame: pd.DataFrame, columns: list[str]):
    """Rows as plain tuples (itertuples' namedtuple class costs ~10 ms for a wide frame)."""
    return frame[columns].itertuples(index=False, name=None)


def _pick_rows(rows: list, max_rows: int) -> list:
    """All rows, or max_rows (at least 2) evenly spaced ones keeping the first and the last."""
    if len(rows) <= max_rows:
        return rows
    max_rows = max(max_rows, 2)
    step = (len(rows) - 1) / (max_rows - 1)
    return [rows[round(i * step)] for i in range(max_rows)]


def render_summary(result: "SweepResult", max_rows: int = 12) -> str:
    """The short plain-text table printed to the terminal: per batch size the best mechanism, D,
    AL, speedup, tokens/s/user, tokens/s/GPU; then where latencies and acceptance came from,
    and the SLO pick if any."""
    meta = result.meta
    model = (meta.get("model") or {}).get("model", "?")
    lines = [f"speedplan: {model} on {meta.get('hardware', '?')}, TP={meta.get('tp', 1)}, {meta.get('dtype', '')}"]
    rows = _table_rows(result.best)
    if not rows:
        lines.append(no_feasible_message(result.frame))
    else:
        columns = list(rows[0])
        if len({r["context"] for r in rows}) == 1:
            columns.remove("context")
            lines[0] += f", context {rows[0]['context']}"
        shown = _pick_rows(rows, max_rows)
        widths = {c: max(len(c), *(len(r[c]) for r in shown)) for c in columns}
        left = {"mechanism"}
        fmt = lambda r: "  ".join(r[c].ljust(widths[c]) if c in left else r[c].rjust(widths[c]) for c in columns)
        lines.append(fmt({c: c for c in columns}))
        lines.extend(fmt(r) for r in shown)
        if len(shown) < len(rows):
            lines.append(f"({len(shown)} of {len(rows)} rows shown; all in report.html and sweep.csv)")
    lines.append(f"latency: {latency_source(result)}")
    acceptance = result.meta.get("acceptance") or {}
    lines.extend(f"{'acceptance:' if i == 0 else '':11s} {mech}: {source}"
                 for i, (mech, source) in enumerate(acceptance.items()))
    if not acceptance:
        lines.append("acceptance: not stated")
    lines.append(slo_line(result))
    return "\n".join(lines)


def send_figures(result: "SweepResult", out_dir: Path, worker=None):
    """What the figures show (`report_data.figure_set`), handed to a started
    `figure_worker.FigureWorker` to draw into out_dir if one is given. Returns the FigureSet."""
    from .report_data import figure_set

    context = report_context(result.frame)
    figures = figure_set(result, context if context is not None else 0)
    if worker is not None:
        worker.submit(figures, Path(out_dir), short_provenance(result))
    return figures


def write_report(result: "SweepResult", out_dir: Path, files: list[str], worker=None, figures=None) -> list[Path]:
    """Write report.html and the PNG figures into out_dir (which exists); `files` are the other
    files the lead writes into the same folder (sweep.csv, pareto.csv, recommendations.json,
    serving configs) for the HTML to link. With a `figure_worker.FigureWorker`, the worker
    draws the figures (`figures`: what `send_figures` already sent it); this process draws
    them if there is none or it fails. Returns the paths written."""
    from .report_figures import draw_figures, figure_paths

    out_dir = Path(out_dir)
    if figures is None:
        figures = send_figures(result, out_dir, worker)
    short = short_provenance(result)
    paths = figure_paths(out_dir)
    page = out_dir / "report.html"
    links = [_link(out_dir, f) for f in files]
    page.write_text(render_html(result, report_context(result.frame), paths, links, provenance(result), short),
                    encoding="utf-8")
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
                  "tokens/s per user against tokens/s per GPU.",
    "speedup_heatmap.png": "Speedup over plain decoding at each batch size B and draft length D, one panel "
                           "per mechanism; grey cells are infeasible, stars mark the best D per B where it "
                           "beats plain decoding.",
    "best_draft_len.png": "Per mechanism, the planner's draft-length schedule over batch size (non-increasing; "
                          "crosses where the pointwise best D differs), and the overall pick at each batch size.",
    "step_breakdown.png": "Where the time of one target step goes for the picked configuration at each batch "
                          "size (the black tick is the plain-decoding step).",
    "roofline.png": "The verify step's linear layers against the achievable roofline: memory-bound left of "
                    "the ridge point (draft tokens nearly free), compute-bound right of it.",
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


def _recommendation_rows(best: pd.DataFrame) -> list[dict]:
    rows = _table_rows(best)
    extra = _tuples(best.sort_values(["context", "batch"]), ["nodes", "t_step", "bound", "cost_source"])
    for row, (nodes, t_step, bound, source) in zip(rows, extra):
        row["nodes"] = str(int(nodes))
        row["step (ms)"] = f"{t_step * 1e3:.2f}"
        row["verify GEMMs"] = f"{bound}-bound"
        row["latency from"] = str(source)
    return rows


def render_html(result: "SweepResult", context: int | None, figures: list[Path], links: list[str],
                caption: str, figure_caption: str) -> str:
    """One self-contained page: facts, recommendations, SLO pick, figures (each captioned with
    the provenance line drawn inside it), data files. `caption` is the full provenance line."""
    meta, frame = result.meta, result.frame
    model = meta.get("model") or {}
    title = f"speedplan: {model.get('model', '?')} on {meta.get('hardware', '?')}"
    facts = [
        ("model", ", ".join(f"{k}={v}" for k, v in model.items() if v not in ("", None))),
        ("hardware", f"{meta.get('hardware', '?')}: {meta.get('hardware_description', '')}"),
        ("tensor parallel", meta.get("tp", 1)),
        ("dtype", meta.get("dtype", "")),
        ("latency from", latency_source(result)),
        ("roofline", f"{float(meta.get('peak_flops_per_s') or 0) / 1e12:,.0f} TFLOP/s achievable, "
                     f"{float(meta.get('bytes_per_s') or 0) / 1e9:,.0f} GB/s, ridge "
                     f"{float(meta.get('ridge_flops_per_byte') or 0):,.0f} FLOP/byte"),
        ("grid", f"{len(frame)} points ({int(frame['feasible'].sum()) if len(frame) else 0} feasible): "
                 f"mechanisms {', '.join(dict.fromkeys(frame['mechanism']))}; B {_values(frame, 'batch')}; "
                 f"D {_values(frame, 'draft_len')}; context {_values(frame, 'context')}"),
        ("created", f"{meta.get('created', '')} by speedplan {meta.get('version', '')}"),
        ("command", meta.get("command", "")),
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
        parts.append(f'<p class="warn">{_e(no_feasible_message(frame))}</p>')
    else:
        parts.append('<p class="note">At each batch size and context: the feasible configuration with the most '
                     'tokens/s per GPU, near-ties going to fewer verified tokens ("none": plain decoding '
                     "wins).</p>")
        parts.append(_html_table(_recommendation_rows(result.best), {"mechanism", "latency from", "verify GEMMs"}))
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
