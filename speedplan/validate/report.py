"""The validation report: parity plots (predicted against measured step time, AL, speedup),
best D against B predicted and measured on one chart, and the error table."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

COLORS = {"none": "#777777", "ngram": "#1f77b4", "draft-model": "#2ca02c", "eagle": "#d62728", "eagle-tree": "#9467bd"}


def _figure(w: float, h: float):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=90)


def _caption(fig, caption: str, width_in: float) -> float:
    """The provenance caption, wrapped to the figure's width (it had been cut off at "measured: spe");
    returns the share of the figure's height it takes, for the axes to start above it."""
    import textwrap

    lines = textwrap.wrap(caption, width=int(width_in * 17)) or [""]
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, color="#555555", va="bottom")
    return min(0.5, (0.35 + 0.13 * len(lines)) / fig.get_figheight())


def _parity(table: pd.DataFrame, out: Path, caption: str) -> None:
    fig = _figure(12, 4.5)
    panels = [("t_step", "step time (ms)", 1e3, table), ("acceptance_length", "AL (tokens/step)", 1, table[table.draft_len > 0]),
              ("speedup", "speedup", 1, table[table.draft_len > 0])]
    for i, (col, label, scale, rows) in enumerate(panels):
        ax = fig.add_subplot(1, 3, i + 1)
        for mech, g in rows.groupby("mechanism"):
            ax.scatter(g[f"meas_{col}"] * scale, g[f"pred_{col}"] * scale, s=14, label=mech,
                       color=COLORS.get(mech.split(":")[0], "#333333"))
        if not rows.empty:
            lo = min(rows[f"meas_{col}"].min(), rows[f"pred_{col}"].min()) * scale * 0.9
            hi = max(rows[f"meas_{col}"].max(), rows[f"pred_{col}"].max()) * scale * 1.1
            ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
            ax.plot([lo, hi], [lo * 1.1, hi * 1.1], color="grey", lw=0.5, ls="--")
            ax.plot([lo, hi], [lo * 0.9, hi * 0.9], color="grey", lw=0.5, ls="--")
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted {label}")
        if i == 0:
            ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=_caption(fig, caption, 12) + 0.08, wspace=0.3)
    fig.savefig(out)


def _best_d(table: pd.DataFrame, out: Path, caption: str) -> None:
    from matplotlib.ticker import MaxNLocator

    from speedplan.validate.run import picked_row

    fig = _figure(9, 4.5)
    ax = fig.add_subplot(1, 1, 1)
    for mech in [m for m in table.mechanism.unique() if m != "none"]:
        g = table[table.mechanism.isin([mech, "none"])]
        for kind, style in (("pred", "-"), ("meas", "--")):
            if kind == "pred":  # what the planner picks from its predictions (its tie rule, as regret reads it)
                best = pd.DataFrame([b.iloc[picked_row(b.pred_tokens_per_s, b.verify_tokens)]
                                     for _, b in g.groupby("batch")]).sort_values("batch")
            else:  # the measured best
                best = g.loc[g.groupby("batch")["meas_tokens_per_s"].idxmax()].sort_values("batch")
            ax.plot(best.batch, best.draft_len, style, marker="o", ms=4,
                    color=COLORS.get(mech.split(":")[0], "#333333"), label=f"{mech} {'predicted' if kind == 'pred' else 'measured'}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size B")
    ax.set_ylabel("best D")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # D is a whole number of tokens
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the lines, not over them
    fig.subplots_adjust(left=0.08, right=0.66, bottom=_caption(fig, caption, 9) + 0.1)
    fig.savefig(out)


def _shown(value: float) -> str:
    """A term's value as the table prints it: a fit that ended at its bound of 0 reads 0, not 1.156e-09."""
    return "0" if abs(value) < 1e-6 else f"{value:.4g}"


def _engine_table(summary: dict) -> str:
    """The speedplan-runtime engine profile validation fitted: each term, its value and source."""
    engine = summary.get("engine") or {}
    rows = "".join(f"<tr><td style='text-align:left'>{html.escape(n)}</td><td>{_shown(t['value'])}</td>"
                   f"<td style='text-align:left'>{html.escape(t.get('unit', ''))}</td>"
                   f"<td style='text-align:left'>{html.escape(t['source'])}</td></tr>"
                   for n, t in (engine.get("terms") or {}).items())
    fit = engine.get("fit") or {}
    note = (f"<p>Median |residual| on the calibration runs {100 * fit['median_abs_residual']:.1f}%"
            + (f", {fit.get('cross_validation', 'leave-one-out')} {100 * fit['loo_median_error']:.1f}%"
               if fit.get("loo_median_error") is not None else "")
            + ".</p>") if fit.get("median_abs_residual") is not None else ""
    return f"<table><tr><th>term</th><th>value</th><th>unit</th><th>source</th></tr>{rows}</table>{note}"


def write_validation_report(table: pd.DataFrame, summary: dict, out_dir: Path) -> Path:
    profile = ("this CPU, measured by this run (profile/)" if summary.get("profile_measured")
               else summary.get("hardware", "?"))
    caption = (f"latency: {summary.get('cost_origin', '?')} profile of {profile}; "
               f"engine: speedplan-runtime profile fitted on the calibration prompts; acceptance: fitted on the "
               f"calibration prompts; measured: speedplan.runtime on the evaluation prompts")
    _parity(table, out_dir / "parity.png", caption)
    _best_d(table, out_dir / "best_draft_len.png", caption)
    pct = lambda x: "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{100 * x:.1f}%"
    errors = [("step time", summary["step_time_median_error"], summary["step_time_p90_error"], "≤ 5% / ≤ 12%"),
              ("AL", summary["al_median_error"], summary["al_p90_error"], "≤ 5% median"),
              ("speedup", summary["speedup_median_error"], summary["speedup_p90_error"], "≤ 8% median")]
    err_rows = "".join(f"<tr><td>{n}</td><td>{pct(m)}</td><td>{pct(p)}</td><td>{t}</td></tr>" for n, m, p, t in errors)
    regret_rows = "".join(f"<tr><td>{b}</td><td>{pct(r)}</td></tr>" for b, r in summary["regret_per_batch"].items())
    cols = ["mechanism", "batch", "draft_len", "pred_t_step", "meas_t_step", "pred_acceptance_length",
            "meas_acceptance_length", "pred_speedup", "meas_speedup"]
    body = table[cols].to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0)
    page = f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>speedplan validation</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse;font-size:.85em}}td,th{{padding:.2em .6em;border-bottom:1px solid #eee;text-align:right}}
img{{max-width:100%}}</style></head><body>
<h1>speedplan validate: predicted against measured</h1>
<p>{html.escape(caption)}. Created {html.escape(str(summary.get('created')))}, {summary.get('points')} points,
{summary.get('wall_s')} s.</p>
<h2>Engine terms fitted on the calibration prompts</h2>{_engine_table(summary)}
<h2>Errors |pred − meas| / meas</h2><table><tr><th>quantity</th><th>median</th><th>p90</th><th>target</th></tr>{err_rows}</table>
<h2>Regret per batch size</h2><p>1 − measured speedup of the planner's pick / best measured speedup at that B (each speedup against the plain run timed right before it, so drift between points cancels; summary.json keeps the same from measured tokens/s as regret_per_batch_unpaired).</p>
<table><tr><th>B</th><th>regret</th></tr>{regret_rows}</table>
<h2>Parity</h2><img src="parity.png" alt="parity plots"><h2>Best D against B</h2><img src="best_draft_len.png" alt="best D">
<h2>Every point</h2>{body}
<p><a href="validation.csv">validation.csv</a> · <a href="summary.json">summary.json</a></p></body></html>"""
    path = out_dir / "report.html"
    path.write_text(page)
    return path
