"""The frontier chart: cost per item (log) vs accuracy, one legend entry per method grouped under
its study, a colour per study fixed by its name (the same in every project), labelled single models,
highlighted methods each in their own ring style, labels placed so they never overlap, tick labels
on both axes whatever the range, the Pareto front, the oracle and the budget as lines.

The legend sits below the plot and the figure is made tall enough to hold all of it: the plot keeps
the page's full width whatever the number of methods (at 42 models a legend beside it took half),
and no entry is cut off or scrolled away, on the page or in an exported image."""

from __future__ import annotations

import math
import re
import zlib

import plotly.graph_objects as go
import polars as pl

from dashboards.charts import (
    BASELINE_COLORS,
    KIND_MARKER,
    ORACLE_COLOR,
    PALETTE,
    add_points,
    dollar_ticks,
    point_label,
    title_layout,
)

# the project's studies keep these colours in every project; another study's colour follows from its name
STUDY_COLORS = {
    "coordinator": "#1f77b4", "margent": "#2ca02c", "redref": "#d62728", "market": "#9467bd",
    "credit": "#8c564b", "routers": "#17becf", "history_game": "#e377c2", "portfolio": "#bcbd22",
}
STUDY_SYMBOLS = ["circle", "diamond", "pentagon", "hexagon", "cross", "x", "triangle-down", "star-triangle-up",
                 "hourglass", "bowtie", "triangle-left", "triangle-right", "star-square", "circle-cross"]
RINGS = [("circle-open", "#000000"), ("square-open", "#d62728"), ("diamond-open", "#1f77b4"),
         ("triangle-up-open", "#2ca02c"), ("hexagon-open", "#9467bd"), ("star-open", "#ff7f0e")]
# The plot area the label placer and the legend layout assume: no wider than a wide-layout page gives
# the chart in a 1280 px window beside the sidebar (the browser test measures it); a wider page only
# spreads labels and legend columns further apart.
WIDTH_PX, HEIGHT_PX = 640, 560
EXPORT_WIDTH_PX = 1200  # an exported image's width (at least WIDTH_PX: nothing in it overlaps)
LEGEND_LINE_PX, GROUP_GAP_PX, LEGEND_GAP_PX = 20, 10, 16  # a legend line (12 px text); between groups; above the legend
AXIS_PX = 70  # below the plot: the tick labels and the x-axis title
CHAR_PX, LINE_PX = 6.6, 14  # an 11 px label's glyph width and line height
POSITIONS = {  # textposition -> (dx, dy) of the label box's centre from the marker, in units of (box w/2 + 7, box h/2 + 7);
    # diagonal first: clear of the point's own error bars
    "top right": (1, 1), "top left": (-1, 1), "bottom right": (1, -1), "bottom left": (-1, -1),
    "middle right": (1, 0), "middle left": (-1, 0), "top center": (0, 1), "bottom center": (0, -1),
}


OTHER_COLORS = [c for c in PALETTE if c.lower() not in STUDY_COLORS.values()]


def study_color(study: str) -> str:
    """The study's colour: fixed for the project's studies, else a hash of its name (never one of theirs)."""
    return STUDY_COLORS.get(study) or OTHER_COLORS[zlib.crc32(study.encode()) % len(OTHER_COLORS)]


def study_colors(studies: list[str]) -> dict[str, str]:
    """The colour of each study (baselines are black and grey by kind, not here)."""
    return {s: study_color(s) for s in studies if s != "baselines"}


def place_labels(xs: list[float], ys: list[float], texts: list[str], x_range: tuple[float, float],
                 y_range: tuple[float, float]) -> list[str | None]:
    """Per label (in priority order) the first textposition whose box overlaps no box placed before
    it, no marker of another label and stays in the plot; None when none does (the label is left
    out, the hover still names the point). x in log10 units, boxes in the assumed pixel area."""
    sx = WIDTH_PX / max(x_range[1] - x_range[0], 1e-12)
    sy = HEIGHT_PX / max(y_range[1] - y_range[0], 1e-12)
    px = [((x - x_range[0]) * sx, (y - y_range[0]) * sy) for x, y in zip(xs, ys, strict=True)]
    boxes: list[tuple[float, float, float, float]] = [(x - 6, y - 6, x + 6, y + 6) for x, y in px]  # the markers
    out: list[str | None] = []
    for k, ((x, y), text) in enumerate(zip(px, texts, strict=True)):
        w, h = label_width(text), LINE_PX
        chosen = None
        for name, (dx, dy) in POSITIONS.items():
            cx, cy = x + dx * (w / 2 + 7), y + dy * (h / 2 + 7)
            box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
            inside = box[0] >= 0 and box[2] <= WIDTH_PX and box[1] >= 0 and box[3] <= HEIGHT_PX
            if inside and not any(_overlap(box, b) for i, b in enumerate(boxes) if i != k):
                chosen = name
                boxes.append(box)
                break
        out.append(chosen)
    return out


def label_width(text: str) -> float:
    """The pixel width of a label as drawn (its markup, e.g. <b>, takes no room)."""
    return CHAR_PX * len(re.sub(r"<[^>]+>", "", text)) + 4


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def frontier_figure(points: pl.DataFrame, *, highlight: list[str] | set[str] = (), title: str = "",
                    band: tuple[float, float] | None = None, costs: tuple[float, float] | None = None,
                    budget: float | None = None) -> go.Figure:
    """The chart of `points` (queries.frontier_points rows with `on_pareto`), zoomed to `band`
    (accuracy) and `costs` (cost per item) when given, the budget as a vertical line inside the range."""
    fig = go.Figure()
    drawn = points.filter(pl.col("cost_per_item_usd") > 0).with_columns(
        pl.struct("study", "method").map_elements(lambda r: point_label(r["study"], r["method"]), return_dtype=pl.String).alias("label"))
    front = drawn.filter(pl.col("on_pareto")).sort("cost_per_item_usd")
    if front.height:
        fig.add_trace(go.Scatter(x=front["cost_per_item_usd"].to_list(), y=front["accuracy"].to_list(), mode="lines",
                                 line={"shape": "hv", "color": "#333", "width": 1.5, "dash": "dash"},
                                 name="Pareto front", hoverinfo="skip", legendrank=1))
    dim = bool(highlight)
    studies = sorted(drawn["study"].unique().to_list(), key=lambda s: (s != "baselines", s))
    for rank, study in enumerate(studies):
        mine = drawn.filter(pl.col("study") == study)
        methods = sorted(mine["method"].unique().to_list())
        for k, method in enumerate(methods):
            g = mine.filter(pl.col("method") == method)
            kind = g["kind"][0]
            symbol, size, opacity = KIND_MARKER.get(kind, ("circle", 10, 0.9))
            if study == "baselines":
                color = BASELINE_COLORS.get(kind, "#222")
                name = "oracle" if kind == "oracle" else method
            else:
                color, name = study_color(study), method
                if kind != "oracle":
                    symbol = STUDY_SYMBOLS[k % len(STUDY_SYMBOLS)]
            if kind == "mixture":  # one legend entry for all random mixtures
                name = "random mixtures"
            add_points(fig, g, name, symbol, size, 0.25 if dim else opacity, color, kind, legendrank=10 + rank)
            fig.data[-1].update(legendgroup=study, legendgrouptitle_text=study,
                                showlegend=not (kind == "mixture" and any(t.name == name and t.showlegend is not False
                                                                         for t in fig.data[:-1])))
    y_range = band or _pad(drawn["accuracy"].to_list() or [0.0, 1.0])
    c_lo, c_hi = costs or ((min(drawn["cost_per_item_usd"]), max(drawn["cost_per_item_usd"])) if drawn.height else (1e-4, 1e-2))
    x_range = cost_axis((c_lo, c_hi), budget)
    _labels(fig, drawn, list(highlight), x_range, y_range)
    oracle = drawn.filter(pl.col("kind") == "oracle")
    if oracle.height:
        fig.add_hline(y=oracle["accuracy"].max(), line={"dash": "dot", "color": ORACLE_COLOR, "width": 1},
                      annotation_text="oracle (upper bound)", annotation_position="top left")
    if budget is not None and budget > 0:
        fig.add_trace(go.Scatter(x=[budget, budget], y=list(y_range), mode="lines", name=f"budget ${budget:.3g}",
                                 line={"color": "#e76f51", "width": 2}, hoverinfo="skip", legendrank=2))
    ticks = dollar_ticks([10 ** x_range[0], 10 ** x_range[1]])
    span = y_range[1] - y_range[0]
    title_dict, top = title_layout(title)
    legends, legend_px = legend_layout(fig, top)
    fig.update_layout(
        height=top + HEIGHT_PX + AXIS_PX + legend_px,
        margin={"l": 80, "r": 10, "t": top, "b": AXIS_PX + legend_px, "autoexpand": False},  # the legends below fit: none pushes
        title=title_dict,
        xaxis={"type": "log", "title": "cost per item (US$, log scale)", "range": list(x_range), **ticks},
        yaxis={"title": "accuracy (error bars: item-level bootstrap interval)", "range": list(y_range),
               "tickformat": ".1%" if span < 0.06 else ".0%"},
        hoverlabel={"align": "left"}, **legends,
    )
    return fig


def legend_layout(fig: go.Figure, top: float) -> tuple[dict[str, dict], float]:
    """The legend's layout below the plot (one column, methods grouped under their study's title)
    and the pixels it takes below the x axis: its entries and group titles, one line each. (One
    column: the plotly.js Streamlit ships draws one legend, and a horizontal one lays its groups out
    side by side past the figure's edge.)"""
    entries = sum(1 for t in fig.data if t.showlegend is not False and t.name is not None and t.name != "labels")
    groups = len({t.legendgroup for t in fig.data if t.legendgroup and t.showlegend is not False})
    # the legend's title, each entry, each group's title and the gap after each group
    below = LEGEND_GAP_PX + LEGEND_LINE_PX * (1 + entries + groups) + GROUP_GAP_PX * groups if entries else 0.0
    total = top + HEIGHT_PX + AXIS_PX + below
    # x in the plot's width (paper), y in the figure's height (container: paper y stops at -2 plot heights)
    return {"legend": {"x": 0, "xanchor": "left", "xref": "paper", "yref": "container", "y": 1 - (top + HEIGHT_PX + AXIS_PX) / total,
                       "yanchor": "top", "orientation": "v", "itemsizing": "constant", "groupclick": "toggleitem",
                       "bgcolor": "rgba(0,0,0,0)", "font": {"size": 12}, "title": {"text": "method (by study)"},
                       "tracegroupgap": GROUP_GAP_PX,
                       "maxheight": max(below, 31)}}, below  # in pixels: a legend below the plot may otherwise take only half the figure, and scroll


def cost_axis(costs: tuple[float, float], budget: float | None) -> tuple[float, float]:
    """The log10 x-range: the cost range, widened to hold the budget (its line is always drawn, so a
    zoom never leaves the legend naming a line that is off the chart), padded."""
    lo, hi = costs
    if budget is not None and budget > 0:
        lo, hi = min(lo, budget), max(hi, budget)
    return math.log10(lo) - 0.12, math.log10(hi) + 0.12


def _pad(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = max(0.03 * (hi - lo), 0.005)
    return lo - pad, hi + pad


def _labels(fig: go.Figure, drawn: pl.DataFrame, highlight: list[str], x_range: tuple, y_range: tuple) -> None:
    """Rings on the highlighted methods (a style each), then one text trace naming them and the single
    models, placed without overlaps; highlighted names first, so they win a crowded spot."""
    texts, xs, ys = [], [], []
    for k, label in enumerate(highlight):
        g = drawn.filter(pl.col("label") == label)
        if g.is_empty():
            continue
        symbol, color = RINGS[k % len(RINGS)]
        fig.add_trace(go.Scatter(x=g["cost_per_item_usd"].to_list(), y=g["accuracy"].to_list(), mode="markers",
                                 name=f"highlighted: {label}", hoverinfo="skip", legendrank=3,
                                 marker={"symbol": symbol, "size": 20, "color": color, "line": {"width": 2.5, "color": color}}))
        for op, x, y in g.select("operating_point", "cost_per_item_usd", "accuracy").iter_rows():
            texts.append(label if op == "default" else f"{label} @ {op}")
            xs.append(x)
            ys.append(y)
    for label, x, y in drawn.filter(pl.col("kind") == "single").select("label", "cost_per_item_usd", "accuracy").iter_rows():
        if label not in highlight:
            texts.append(f"<b>{label.removeprefix('always-')}</b>")
            xs.append(x)
            ys.append(y)
    in_view = [y_range[0] <= y <= y_range[1] and x_range[0] <= math.log10(x) <= x_range[1] for x, y in zip(xs, ys, strict=True)]
    keep = [i for i, v in enumerate(in_view) if v]
    where = place_labels([math.log10(xs[i]) for i in keep], [ys[i] for i in keep], [texts[i] for i in keep], x_range, y_range)
    placed = [(i, w) for i, w in zip(keep, where, strict=True) if w is not None]
    if placed:
        fig.add_trace(go.Scatter(x=[xs[i] for i, _ in placed], y=[ys[i] for i, _ in placed], mode="text",
                                 text=[texts[i] for i, _ in placed], textposition=[w for _, w in placed],
                                 textfont={"size": 11, "color": "#111"}, name="labels", showlegend=False,
                                 hoverinfo="skip", cliponaxis=False))
    # the page's caption says how many labels were left out; an export is at least as wide as the layout assumes
    fig.layout.meta = {"labels_left_out": len(texts) - len(placed), "export_width": EXPORT_WIDTH_PX}
