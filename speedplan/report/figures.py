"""The report's PNG figures, drawn cheaply: Agg canvas, one `Figure` each, few artists.

`speedplan sweep` must finish in about a second as a whole process, so drawing is budgeted
like a hot path (measured with benchmarks/bench_report.py):
- matplotlib is imported inside the drawing functions, never at module import;
- `matplotlib.figure.Figure` + `FigureCanvasAgg`, no pyplot, 90 dpi, and the cheap axes
  furniture of `report_axes` (captions as pixels, ticks and keys as plain texts);
- heatmaps are one `imshow` per panel, bars one polygon collection per component, and
  scatter clouds are subsampled past `MAX_SCATTER_POINTS` per mechanism.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from speedplan.report.axes import (CAPTION_WIDTH_IN, DPI, FONT, NO_FEASIBLE, axis_titles, canvas, caption_pixels, empty_note,
                          figure_with_axes, linear_ticks, log_axes, nice_step, place_labels, rows_of, save_png, set_title,
                          side_key, take_rows, thin, tick_labels)

MAX_SCATTER_POINTS = 1500  # per mechanism in pareto.png; beyond this the cloud is subsampled
BREAKDOWN_BARS = 16  # step_breakdown.png draws at most this many batch sizes (schedule.csv has them all)

MECHANISM_COLORS = {
    "none": "#555555",
    "ngram": "#2ca02c",
    "draft-model": "#9467bd",
    "eagle": "#1f77b4",
    "eagle-tree": "#17becf",
    "eagle3": "#bcbd22",
    "eagle3-tree": "#e377c2",
    "mtp": "#ff7f0e",
    "medusa": "#d62728",
}

EXTRA_COLORS = ("#8c564b", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d")

# Stacked step-time components: (label, frame columns summed, colour).
BREAKDOWN = (
    ("GEMM", ("t_gemm_s",), "#1f77b4"),
    ("attention (+tree mask)", ("t_attention_s", "t_tree_mask_s"), "#ff7f0e"),
    ("communication", ("t_comm_s",), "#9467bd"),
    ("elementwise", ("t_elementwise_s",), "#8c564b"),
    ("drafting", ("t_draft_s",), "#2ca02c"),
    ("sampling, launches,\ndrafting loop", ("t_sample_s", "t_launch_s", "t_draft_host_s"), "#bcbd22"),
    ("exposed host work", ("t_host_exposed_s",), "#7f7f7f"),
)

FIGURES = {
    "pareto": "pareto.png",
    "heatmap": "speedup_heatmap.png",
    "best_d": "best_draft_len.png",
    "breakdown": "step_breakdown.png",
    "roofline": "roofline.png",
}


def color(mechanism: str) -> str:
    """Colour of a mechanism label ("draft-model:llama-3.2-1b" takes draft-model's)."""
    name = str(mechanism).split(":")[0]
    if name in MECHANISM_COLORS:
        return MECHANISM_COLORS[name]
    import zlib  # a mechanism added as one file: a colour of its own, the same in every figure (it was black)

    return EXTRA_COLORS[zlib.crc32(name.encode()) % len(EXTRA_COLORS)]


@dataclass
class FigureSet:
    """What the five figures draw, as plain arrays (`report_data.figure_set` builds it from
    the sweep): one dict of keyword arguments per figure function, and the titles."""

    pareto: dict
    heatmap: dict
    best_d: dict
    breakdown: dict
    roofline: dict
    titles: dict = field(default_factory=dict)


# --- figures ---------------------------------------------------------------------------------


def pareto_figure(clouds: list, span: tuple, front: dict, path: Path, caption: str, title: str) -> Path:
    """Throughput per GPU against speed per user: every feasible point faint, frontier bold.

    clouds: (mechanism, tokens/s/user, tokens/s/GPU) per mechanism, subsampled; span: the
    (user, GPU) [min, max] of every feasible point; front: the frontier's columns sorted by
    tokens/s/user."""
    fig, ax, _ = figure_with_axes(7.5, 5.0, caption)
    set_title(ax, title)
    if not clouds:
        empty_note(ax)
        return save_png(fig, path)
    entries = []
    for mech, user, gpu in clouds:
        ax.scatter(user, gpu, s=9, alpha=0.3, color=color(mech), linewidths=0)
        entries.append(("●", color(mech), mech))
    n_front = len(front["tokens_per_s_per_user"])
    if n_front:
        ax.plot(front["tokens_per_s_per_user"], front["tokens_per_s_per_gpu"], color="black", lw=1.2, zorder=3)
        ax.scatter(front["tokens_per_s_per_user"], front["tokens_per_s_per_gpu"], s=30, zorder=4,
                   color=[color(m) for m in front["mechanism"]], edgecolors="black", linewidths=0.8)
        entries.append(("—", "black", "Pareto frontier"))
    # room on the right: the frontier's labels go above-right of it, where no point can be
    log_axes(ax, span[0], span[1], x_room=2.2)
    if n_front:
        labelled = take_rows(front, slice(None, None, max(1, -(-n_front // 7))))
        rows = list(rows_of(labelled, "tokens_per_s_per_user", "tokens_per_s_per_gpu", "batch", "mechanism",
                            "draft_len"))[::-1]  # fastest per user first: the frontier's ends keep their labels
        place_labels(ax, [r[0] for r in rows], [r[1] for r in rows], [f"B={b} {m} D={d}" for _, _, b, m, d in rows],
                     keep=(0, len(rows) - 1))
    axis_titles(ax, "tokens/s per user (faster for each user →)", "tokens/s per GPU")
    side_key(ax, entries, "faint: every feasible point")
    return save_png(fig, path)


def heatmap_figure(grids: dict, stars: dict, tolerance: float, path: Path, caption: str, title: str) -> Path:
    """Speedup over plain decoding on a B × D grid, one panel per mechanism, infeasible grey.
    grids: mechanism -> (batches, draft lengths, speedup[D, B] with NaN where infeasible);
    stars: mechanism -> per batch the row of the pick (-1: none), as `data.starred_rows` says.

    All panels and the colour bar are drawn on one hidden axes whose data units are inches of
    the figure: a matplotlib axes costs ~10 ms to build and draw, five of them half the figure."""
    from matplotlib import colormaps
    from matplotlib.collections import LineCollection
    from matplotlib.colors import TwoSlopeNorm

    mechanisms = list(grids)
    ncols = 2 if len(mechanisms) == 4 else min(3, max(1, len(mechanisms)))
    nrows = max(1, -(-len(mechanisms) // ncols))
    panel_w, panel_h = 3.3, 2.45  # inches per panel slot, labels included
    natural = panel_w * ncols + 1.3
    bottom_in = caption_pixels(caption).shape[0] / DPI + 0.35
    # one panel: as wide as the caption and title; as tall as the panels above a caption of any length (a long one
    # had pushed the top panels' names into the subtitle)
    w, h = max(natural, CAPTION_WIDTH_IN + 0.2), panel_h * nrows + max(1.1, bottom_in + 0.3)
    x0 = (w - natural) / 2  # the panels and the colour bar centred in the extra width
    fig = canvas(w, h, caption)
    board = fig.add_axes((0, 0, 1, 1))
    board.set_axis_off()
    board.set_autoscale_on(False)
    board.set_xlim(0, w)
    board.set_ylim(0, h)
    text = functools.partial(board.text, fontsize=FONT)
    text(w / 2, h - 0.1, title, fontsize=10, ha="center", va="top")
    text(w / 2, h - 0.3, "grey: infeasible;  ★: best D per B (the fewest verified tokens within "
         f"{tolerance:.0%} of the fastest), where it beats plain decoding", ha="center", va="top",
         color="#444444")
    shown = np.concatenate([g[2].ravel() for g in grids.values()] or [np.zeros(0)])
    shown = shown[np.isfinite(shown)]
    if not mechanisms:
        text(w / 2, h / 2, "no speculative mechanism in the sweep", fontsize=10, ha="center", color="#a00000")
    elif not len(shown):
        text(w / 2, h - 0.45, NO_FEASIBLE, fontsize=9, ha="center", va="top", color="#a00000")
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(float(shown.min()) if len(shown) else 0.9, 0.95),
                        vmax=max(float(shown.max()) if len(shown) else 1.1, 1.05))
    cmap = colormaps["RdYlGn"].with_extremes(bad="#c8c8c8")
    frames, marks = [], []
    pw, ph = panel_w - 0.8, panel_h - 0.78  # the cell area of a panel
    panels = list(grids.values())
    for i, (mech, (batches, drafts, values)) in enumerate(grids.items()):
        r, c = divmod(i, ncols)
        # axes shared like subplots(sharex, sharey): B labelled only where no panel below has
        # the same batches, D only where no panel to the left has the same draft lengths
        label_b = i + ncols >= len(panels) or list(panels[i + ncols][0]) != list(batches)
        label_d = c == 0 or list(panels[i - 1][1]) != list(drafts)
        x, y = x0 + 0.6 + c * panel_w, bottom_in + (nrows - 1 - r) * panel_h + 0.3
        cw, ch = pw / len(batches), ph / len(drafts)
        board.imshow(np.ma.masked_invalid(values), extent=(x, x + pw, y, y + ph), aspect="auto", origin="lower",
                     cmap=cmap, norm=norm, interpolation="nearest")
        frames.append([(x, y), (x + pw, y), (x + pw, y + ph), (x, y + ph), (x, y)])
        marks += [(x + (j + 0.5) * cw, y + (k + 0.5) * ch) for j, k in enumerate(stars[mech]) if k >= 0]
        if label_b:
            for j in thin(list(batches), max(2, int(pw / 0.27)), linear=True):  # labels >= ~0.27 in apart
                text(x + (j + 0.5) * cw, y - 0.04, str(batches[j]), ha="center", va="top")
            text(x + pw / 2, y - 0.2, "batch B", fontsize=8.5, ha="center", va="top")
        if label_d:
            for k, d in enumerate(drafts):
                text(x - 0.05, y + (k + 0.5) * ch, str(d), ha="right", va="center")
            text(x - 0.22, y + ph / 2, "draft length D", fontsize=8.5, ha="right", va="center", rotation=90)
        text(x + pw / 2, y + ph + 0.05, mech, fontsize=9, ha="center", va="bottom", color=color(mech))
    if marks:
        board.scatter(*zip(*marks), marker="*", s=45, color="black", linewidths=0, zorder=3)
    # colour bar, linear in speedup, with ticks at round values and at 1 (plain decoding)
    lo, hi = float(norm.vmin), float(norm.vmax)
    bx, by0, by1 = x0 + natural - 0.95, bottom_in + 0.3, h - 0.75
    board.imshow(norm(np.linspace(lo, hi, 256))[:, None], extent=(bx, bx + 0.15, by0, by1), aspect="auto",
                 origin="lower", cmap=cmap, vmin=0, vmax=1)
    frames.append([(bx, by0), (bx + 0.15, by0), (bx + 0.15, by1), (bx, by1), (bx, by0)])
    board.add_collection(LineCollection(frames, colors="black", linewidths=0.8), autolim=False)
    step = nice_step((hi - lo) / 6)
    ticks = sorted({1.0, *np.round(np.arange(np.ceil(lo / step) * step, hi + 1e-9, step), 6)})
    for v in [v for v in ticks if v == 1.0 or abs(v - 1.0) > step / 2]:
        text(bx + 0.2, by0 + (v - lo) / (hi - lo) * (by1 - by0), f"{v:g}", ha="left", va="center")
    text(bx + 0.55, (by0 + by1) / 2, "speedup vs plain decoding", fontsize=8, rotation=90, ha="left", va="center")
    return save_png(fig, path)


def best_d_figure(schedules: dict, pick: dict, batches: list, top: int, path: Path, caption: str,
                  title: str) -> Path:
    """Best draft length against batch size per mechanism (the planner's non-increasing
    schedule, and the pointwise optimum where it differs), and the overall pick.

    schedules: mechanism -> columns batch, draft_len, pointwise_draft_len; pick: the overall
    pick's batch, draft_len, mechanism; batches: every feasible batch; top: the largest D."""
    fig, ax, _ = figure_with_axes(7.5, 4.6, caption, right_in=2.1)
    set_title(ax, title)
    if not batches:
        empty_note(ax)
        return save_png(fig, path)
    entries = []
    dense = len(batches) > 24  # markers at every batch would merge into a bar: lines only, picks thinned
    for i, (mech, schedule) in enumerate(schedules.items()):
        nudge = 0.07 * (i - (len(schedules) - 1) / 2)  # keeps overlapping lines apart
        ax.plot(schedule["batch"], schedule["draft_len"] + nudge, marker=None if dense else "o", ms=3.5, lw=1.3,
                color=color(mech))
        off = schedule["pointwise_draft_len"] != schedule["draft_len"]
        ax.scatter(schedule["batch"][off], schedule["pointwise_draft_len"][off] + nudge, s=16, marker="x",
                   color=color(mech), linewidths=1)
        entries.append(("—", color(mech), mech))
    entries.append(("✕", "#444444", "pointwise best D,\n   where it differs"))
    if len(pick["batch"]):
        ax.plot(pick["batch"], pick["draft_len"], color="black", lw=2.5, alpha=0.3, zorder=2)
        at = thin(list(pick["batch"]), 24) if dense else slice(None)
        ax.scatter(np.asarray(pick["batch"])[at], np.asarray(pick["draft_len"])[at], s=70, marker="s", zorder=3,
                   facecolors="none", edgecolors=[color(m) for m in np.asarray(pick["mechanism"])[at]], linewidths=1.8)
        entries.append(("□", "#444444", "overall pick (edge:\n   its mechanism)"))
    ax.set_xscale("log", base=2)
    ax.set_xlim(batches[0] / 1.3, batches[-1] * 1.3)
    ax.set_ylim(-0.5, top + 0.5)
    labelled = [batches[i] for i in thin(batches, 14)]
    tick_labels(ax, "x", labelled, [str(b) for b in labelled])
    tick_labels(ax, "y", range(top + 1), [str(d) for d in range(top + 1)])
    axis_titles(ax, "batch size B (concurrent sequences)", "draft length D", y_pad_pt=18)
    side_key(ax, entries, "lines: D schedule per\nmechanism (non-increasing)")
    return save_png(fig, path)


def breakdown_figure(pick: dict, components: dict, path: Path, caption: str, title: str) -> Path:
    """Stacked step time (ms) of the picked configuration at each batch size.

    pick: batch, mechanism, draft_len, t_plain_s (seconds) sorted by batch; components: label of
    `BREAKDOWN` -> seconds per pick."""
    from matplotlib.collections import PolyCollection

    shown = thin(list(pick["batch"]), BREAKDOWN_BARS)  # one bar per batch size, at most BREAKDOWN_BARS
    if len(shown) < len(pick["batch"]):
        title += f" ({len(shown)} of {len(pick['batch'])} batch sizes)"
        pick = {k: np.asarray(v)[shown] for k, v in pick.items()}
        components = {k: np.asarray(v)[shown] for k, v in components.items()}
    n = len(pick["batch"])
    names = {m: _bar_name(m) for m in dict.fromkeys(pick["mechanism"])}  # "draft-model:\nllama-3.2-1b": bars 0.85 in apart
    tall = max((v.count("\n") for v in names.values()), default=0)
    fig, ax, _ = figure_with_axes(max(7.5, 0.85 * n + 2.8), 5.0, caption, below_in=0.7 + 0.14 * tall)
    set_title(ax, title)
    if not n:
        empty_note(ax)
        return save_png(fig, path)
    x = np.arange(n, dtype=float)
    base = np.zeros(n)
    entries = []
    for label, columns, col in BREAKDOWN:
        top = base + np.asarray(components[label], dtype=float) * 1e3
        boxes = [[(xi - 0.35, b0), (xi - 0.35, b1), (xi + 0.35, b1), (xi + 0.35, b0)]
                 for xi, b0, b1 in zip(x, base, top)]
        ax.add_collection(PolyCollection(boxes, facecolors=col, edgecolors="none"), autolim=False)
        entries.append(("■", col, label))
        base = top
    t_plain_ms = np.asarray(pick["t_plain_s"], dtype=float) * 1e3
    ax.scatter(x, t_plain_ms, marker="_", s=300, color="black", linewidths=1.5, zorder=3)
    entries.append(("—", "black", "plain decoding step"))
    y_max = 1.08 * max(base.max(), t_plain_ms.max())
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, y_max)
    labels = [f"B={b}\n{names[m]}\nD={d}" for b, m, d in rows_of(pick, "batch", "mechanism", "draft_len")]
    tick_labels(ax, "x", x, labels, grid=False)
    ticks = linear_ticks(y_max)
    tick_labels(ax, "y", ticks, [f"{t:g}" for t in ticks])
    axis_titles(ax, "", "time per target step (ms)", y_pad_pt=24)
    side_key(ax, entries[::-1])
    return save_png(fig, path)


def _bar_name(mechanism: str, width: int = 13) -> str:
    """A mechanism's name under a bar of the step breakdown: split after its ':' ("draft-model:" / "llama-3.2-1b"),
    each line cut to `width` characters ("…"): long names ran into their neighbours'."""
    head, colon, rest = str(mechanism).partition(":")
    return "\n".join(line if len(line) <= width else line[:width - 1] + "…" for line in [head + colon, rest] if line)


def roofline_figure(plain: dict, pick: dict, peak: float, bandwidth: float, ridge: float, path: Path,
                    caption: str, title: str) -> Path:
    """Verify-step linear layers on the roofline: achieved FLOP/s against FLOP per byte.

    plain: gemm_flops_per_byte, gemm_flops_per_s, batch of feasible plain decoding;
    pick: the same plus mechanism, running (the requests a step runs: the batch, or an engine's cap on
    a speculative step) and verify_tokens for the picked configurations; peak (FLOP/s),
    bandwidth (bytes/s) and ridge (FLOP/byte) of the hardware."""
    fig, ax, _ = figure_with_axes(7.5, 5.0, caption)
    set_title(ax, title)
    xs = np.concatenate([np.asarray(plain["gemm_flops_per_byte"], float), np.asarray(pick["gemm_flops_per_byte"], float)])
    ys = np.concatenate([np.asarray(plain["gemm_flops_per_s"], float), np.asarray(pick["gemm_flops_per_s"], float)])
    has_plain, has_pick = len(plain["batch"]) > 0, len(pick["batch"]) > 0
    entries = []
    if peak > 0 and bandwidth > 0:
        roof_x = np.array([min([ridge / 20, *(xs / 2)]), ridge, max([ridge * 8, *(xs * 2)])])
        roof_y = np.minimum(peak, bandwidth * roof_x)
        ax.plot(roof_x, roof_y, color="black", lw=1.5)
        ax.axvline(ridge, color="#888888", ls="--", lw=1)
        # at the foot of the ridge line: the picks crowd its top, where the roof bends
        ax.annotate(f"ridge {ridge:,.0f} FLOP/byte", (ridge, 0.0), xycoords=ax.get_xaxis_transform(), xytext=(4, 4),
                    textcoords="offset points", fontsize=7.5, color="#444444")
        xs, ys = np.concatenate([xs, roof_x]), np.concatenate([ys, roof_y])
        entries.append(("—", "black", "achievable roof"))
    if has_plain:
        ax.scatter(plain["gemm_flops_per_byte"], plain["gemm_flops_per_s"], s=22, marker="o", color="#888888", zorder=3)
        for x, y, b in rows_of(plain, "gemm_flops_per_byte", "gemm_flops_per_s", "batch"):
            ax.annotate(str(b), (x, y), xytext=(4, -9),
                        textcoords="offset points", fontsize=6.5, color="#555555")
        entries.append(("●", "#888888", "plain decoding (D=0),\n   label: B"))
    if has_pick:
        ax.scatter(pick["gemm_flops_per_byte"], pick["gemm_flops_per_s"], s=34, marker="D", zorder=4,
                   color=[color(m) for m in pick["mechanism"]], edgecolors="black", linewidths=0.6)
        groups: list[list] = []  # picks within 0.1 decade of each other share one label ("112, 130")
        # the GEMMs' tokens: the requests the step runs (R, below B where an engine caps speculative
        # steps: SGLang's 48) times the tokens each verifies
        for x, y, b, n in rows_of(pick, "gemm_flops_per_byte", "gemm_flops_per_s", "running", "verify_tokens"):
            near = next((g for g in groups if abs(np.log10(g[0] / x)) < 0.1 and abs(np.log10(g[1] / y)) < 0.1), None)
            if near is None:
                groups.append([x, y, [int(round(b * n))]])
            else:
                near[2].append(int(round(b * n)))
        for x, y, tokens in groups:
            ax.annotate(", ".join(map(str, sorted(set(tokens)))), (x, y), xytext=(-4, 4),
                        textcoords="offset points", fontsize=6.5, ha="right")
        entries.append(("◆", "#333333", "picked config (colour:\n   mechanism), label: tokens\n"
                                        "   verified R·(1+D), tree R·(N+1)\n   (R: requests a step runs)"))
    if not (has_plain or has_pick):
        empty_note(ax, y=0.25)
    log_axes(ax, xs, ys)
    axis_titles(ax, "arithmetic intensity of the verify GEMMs (FLOP/byte)", "achieved FLOP/s", y_pad_pt=28)
    side_key(ax, entries)
    return save_png(fig, path)


def draw_figures(figures: FigureSet, out_dir: Path, caption: str, names=tuple(FIGURES)) -> list[Path]:
    """Draw the figures `names` (default all five) of `figures` into out_dir, one after
    another in this process; return their paths."""
    draw = {"pareto": pareto_figure, "heatmap": heatmap_figure, "best_d": best_d_figure,
            "breakdown": breakdown_figure, "roofline": roofline_figure}
    paths = []
    with warnings.catch_warnings():  # a model folder named in emoji: a box in the title, not a line on stderr
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        for n in names:
            paths.append(draw[n](**getattr(figures, n), path=Path(out_dir) / FIGURES[n], caption=caption,
                                 title=figures.titles.get(n, "")))
    return paths


def figure_paths(out_dir: Path) -> list[Path]:
    """Where `draw_figures` writes its PNGs, in its order."""
    return [Path(out_dir) / name for name in FIGURES.values()]
