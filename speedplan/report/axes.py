"""Axes furniture for the report's figures, drawn cheaply (`report.figures` draws the figures).

Text is the costliest matplotlib artist here, so the provenance caption is drawn once and
pasted into each figure as pixels, and tick labels, grid lines and keys are plain texts and one
line collection instead of matplotlib `Tick` objects (about 1 ms each) and `Legend` layout.
Axes are placed in inches (no `tight_layout`, which measures every artist). matplotlib is
imported inside the functions, never at module import.
"""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

import numpy as np

DPI = 90
CAPTION_WIDTH_IN = 7.3  # the caption is wrapped to fit the narrowest figure
FONT = 7.5  # points, tick labels and keys
NO_FEASIBLE = "no feasible configuration: every grid point is infeasible"

def canvas(width_in: float, height_in: float, caption: str):
    """A Figure on an Agg canvas with the provenance caption pasted at the bottom."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    FigureCanvasAgg(fig)
    fig.figimage(caption_pixels(caption), xo=4, yo=3, zorder=10)
    return fig


def figure_with_axes(width_in: float, height_in: float, caption: str, left_in: float = 0.8, right_in: float = 2.0,
            top_in: float = 0.45, below_in: float = 0.55):
    """`_canvas` plus the main axes placed in inches. Returns (figure, axes, inches below the axes)."""
    fig = canvas(width_in, height_in, caption)
    bottom_in = caption_pixels(caption).shape[0] / DPI + below_in
    ax = fig.add_axes((left_in / width_in, bottom_in / height_in, 1 - (left_in + right_in) / width_in,
                       1 - (bottom_in + top_in) / height_in))
    return fig, ax, bottom_in


@functools.lru_cache(maxsize=4)
def caption_pixels(caption: str) -> np.ndarray:
    """The caption as an RGBA image, drawn once and pasted into every figure: its ~270 glyphs
    cost as much to draw as a whole small axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lines = textwrap.wrap(caption, width=int(CAPTION_WIDTH_IN * 17)) or [""]
    fig = Figure(figsize=(CAPTION_WIDTH_IN, 0.06 + 0.125 * len(lines)), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    fig.text(0.0, 0.5, "\n".join(lines), fontsize=7, color="#333333", va="center", ha="left")
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba()).copy()
    pixels.flags.writeable = False
    return pixels


def warm_up() -> None:
    """Pay matplotlib's one-off costs (font files, glyph caches, first Agg draw) now: a worker
    calls this while waiting for its job (`speedplan.entry`)."""
    fig = canvas(2.0, 1.0, "")
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    for size in (FONT, 9, 10):
        ax.text(0.5, 0.5, "0123456789 BDk.=→ " + "".join(map(chr, range(65, 91))), fontsize=size)
    fig.canvas.draw()


def save_png(fig, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, format="png", pil_kwargs={"compress_level": 1})
    return path


def set_title(ax, text: str) -> None:
    # an explicit y skips matplotlib's title auto-placement, which measures every tick label
    ax.set_title(text, fontsize=10, y=1.01)


def rows_of(cols: dict, *names: str):
    """Rows of the named columns (a dict of arrays) as plain tuples."""
    return zip(*(np.asarray(cols[n]).tolist() for n in names))


def take_rows(cols: dict, index) -> dict:
    """The rows `index` (a slice or index array) of a dict of column arrays."""
    return {n: np.asarray(v)[index] for n, v in cols.items()}


def offset_transform(ax, base, dx_pt: float, dy_pt: float):
    """`base` transform shifted by a fixed number of points (for labels beside the axes)."""
    from matplotlib.transforms import ScaledTranslation

    return base + ScaledTranslation(dx_pt / 72, dy_pt / 72, ax.get_figure().dpi_scale_trans)


def thin(values, most: int = 12, linear: bool = False) -> list[int]:
    """Indices of at most `most` of the sorted batch sizes `values` to label or draw: all of
    them when few; else the first, the last and the powers of two between (on a log axis) or
    the multiples of a round step (`linear`: columns one batch size apart), spread evenly when
    those are too many, or evenly spaced ones when they are too few (`--batch 1-256` would
    otherwise print 256 overlapping labels)."""
    n = len(values)
    if n <= most:
        return list(range(n))
    if linear:
        step = nice_step((float(values[-1]) - float(values[0])) / max(most - 2, 1))
        keep = sorted({0, *(i for i, v in enumerate(values) if float(v) % step == 0)})
    else:
        keep = sorted({0, n - 1, *(i for i, v in enumerate(values) if float(v).is_integer() and int(v) & (int(v) - 1) == 0)})
    if len(keep) < min(4, most):
        keep = sorted({round(j * (n - 1) / (most - 1)) for j in range(most)})
    if len(keep) > most:
        keep = sorted({keep[round(j * (len(keep) - 1) / (most - 1))] for j in range(most)})
    return keep


def tick_labels(ax, which: str, ticks, labels, grid: bool = True) -> None:
    """Tick labels as plain texts beside the axis, with light grid lines as one collection;
    matplotlib's own axis is hidden (its Tick objects cost about a millisecond each)."""
    from matplotlib.collections import LineCollection
    from matplotlib.ticker import NullLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(NullLocator())
    axis.set_minor_locator(NullLocator())
    axis.set_visible(False)
    base = ax.get_xaxis_transform() if which == "x" else ax.get_yaxis_transform()
    if which == "x":
        shifted = offset_transform(ax, base, 0, -3)
        for t, label in zip(ticks, labels):
            ax.text(t, 0, label, transform=shifted, ha="center", va="top", fontsize=FONT)
    else:
        shifted = offset_transform(ax, base, -3, 0)
        for t, label in zip(ticks, labels):
            ax.text(0, t, label, transform=shifted, ha="right", va="center", fontsize=FONT)
    if grid and len(ticks):
        segments = [[(t, 0), (t, 1)] if which == "x" else [(0, t), (1, t)] for t in ticks]
        ax.add_collection(LineCollection(segments, transform=base, colors="#e4e4e4", linewidths=0.8, zorder=0),
                          autolim=False)


def axis_titles(ax, xlabel: str, ylabel: str, x_pad_pt: float = 15, y_pad_pt: float = 32) -> None:
    """Axis titles at fixed offsets (ax.set_xlabel would measure the tick labels to place itself)."""
    ax.text(0.5, 0, xlabel, transform=offset_transform(ax, ax.transAxes, 0, -x_pad_pt), ha="center", va="top", fontsize=9)
    ax.text(0, 0.5, ylabel, transform=offset_transform(ax, ax.transAxes, -y_pad_pt, 0), ha="right", va="center",
            fontsize=9, rotation=90)


def side_key(ax, entries, title: str = "") -> None:
    """A legend right of the axes: one coloured text per entry, e.g. ("●", "#1f77b4", "eagle")."""
    lines = ([(title, "#333333")] if title else []) + [(f"{sym} {label}", col) for sym, col, label in entries]
    offset = 0
    for text, col in lines:
        ax.text(1.03, 1.0, text, transform=offset_transform(ax, ax.transAxes, 0, -offset), ha="left", va="top",
                fontsize=FONT, color=col)
        offset += 11 * (text.count("\n") + 1) + 2


def log_tick_values(lo: float, hi: float) -> list[float]:
    """1-2-5 (or 1-3, or decade) values between lo and hi, at most 8."""
    decades = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
    for mults in ((1, 2, 5), (1, 3), (1,)):
        ticks = [m * 10.0**d for d in decades for m in mults if lo <= m * 10.0**d <= hi]
        if len(ticks) <= 8:
            return ticks
    return ticks[:: -(-len(ticks) // 8)]


def short_number(value: float) -> str:
    """12000 -> "12k", 3e14 -> "300T"."""
    for scale, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def log_axes(ax, xs, ys, x_room: float = 1.3) -> None:
    """Log-log axes spanning the data with a margin (x_room: factor past the largest x),
    plain-number tick labels."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    xs, ys = xs[np.isfinite(xs) & (xs > 0)], ys[np.isfinite(ys) & (ys > 0)]
    ax.set_xscale("log")
    ax.set_yscale("log")
    if not (len(xs) and len(ys)):
        return
    (x0, x1), (y0, y1) = (xs.min() / 1.3, xs.max() * x_room), (ys.min() / 1.5, ys.max() * 1.5)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    for which, (lo, hi) in (("x", (x0, x1)), ("y", (y0, y1))):
        ticks = log_tick_values(lo, hi)
        tick_labels(ax, which, ticks, [short_number(t) for t in ticks])


def empty_note(ax, text: str = NO_FEASIBLE, y: float = 0.5) -> None:
    ax.text(0.5, y, textwrap.fill(text, 40), transform=ax.transAxes, ha="center", va="center",
            fontsize=10, color="#a00000", bbox=dict(facecolor="white", edgecolor="none"))
    tick_labels(ax, "x", [], [])
    tick_labels(ax, "y", [], [])


def nice_step(raw: float) -> float:
    """The 1-2-2.5-5 × 10^k step nearest to raw."""
    return float(min((m * 10 ** np.floor(np.log10(raw)) for m in (1, 2, 2.5, 5, 10)), key=lambda s: abs(s - raw)))


def linear_ticks(hi: float) -> np.ndarray:
    """About five round ticks from 0 to hi."""
    return np.arange(0, hi + 1e-12, nice_step(hi / 5))


# Where a point's label may go, in points from it (dx, dy, horizontal alignment): above-right first.
LABEL_SPOTS = ((5, 2, "left"), (5, -10, "left"), (-5, 2, "right"), (-5, -10, "right"))


def place_labels(ax, xs, ys, texts, fontsize: float = 6.5, keep=()) -> int:
    """Annotate each (x, y) with its text at the first of LABEL_SPOTS where the label's box
    (estimated: 0.6 em a character, 1.2 em high) stays inside the axes and overlaps no label placed
    before it; a label
    with no free spot is left out unless its index is in `keep`, which then takes the first spot.
    Call after the axes' limits are set. Returns how many labels were left out."""
    to_pt = 72 / ax.figure.dpi  # display pixels to points
    edge = [v * to_pt for v in ax.bbox.extents]  # the axes' left, bottom, right, top: labels stay inside
    boxes, left_out = [], 0
    for i, (x, y, text) in enumerate(zip(xs, ys, texts)):
        px, py = (v * to_pt for v in ax.transData.transform((x, y)))
        width, height = 0.6 * fontsize * len(text), 1.2 * fontsize
        for dx, dy, ha in LABEL_SPOTS:
            x0 = px + dx - (width if ha == "right" else 0)
            box = (x0, py + dy, x0 + width, py + dy + height)
            inside = edge[0] <= box[0] and box[2] <= edge[2] and edge[1] <= box[1] and box[3] <= edge[3]
            if inside and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes):
                break
        else:
            if i not in keep:
                left_out += 1
                continue
            dx, dy, ha = LABEL_SPOTS[0]
            x0 = px + dx
            box = (x0, py + dy, x0 + width, py + dy + height)
        boxes.append(box)
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, va="bottom", ha=ha)
    return left_out
