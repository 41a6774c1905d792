"""Plotly figures of the dashboard, built from the small aggregated frames of `queries`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.express as px
import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

# 10 + 24 + 11 distinct colours (D3 would repeat Plotly's first ten under other hex codes)
PALETTE = px.colors.qualitative.Plotly + px.colors.qualitative.Dark24 + px.colors.qualitative.Safe
KIND_ORDER = ["study", "oracle", "single", "cascade", "mixture"]
KIND_MARKER = {  # symbol, size, opacity
    "single": ("square", 11, 0.95),
    "mixture": ("circle", 6, 0.55),
    "cascade": ("triangle-up", 11, 0.95),
    "study": ("circle", 11, 0.95),
    "oracle": ("star", 20, 1.0),
}
EXECUTOR_PALETTE = px.colors.qualitative.Dark2
ORACLE_COLOR = "#f2b705"


def method_colors(methods: list[str], palette: list[str] = PALETTE) -> dict[str, str]:
    """A stable colour per method (the oracle is always gold)."""
    colors, k = {}, 0
    for method in methods:
        if method == "oracle":
            colors[method] = ORACLE_COLOR
        elif method not in colors:
            colors[method] = palette[k % len(palette)]
            k += 1
    return colors


def _rgba(color: str, alpha: float) -> str:
    """'#rrggbb' or 'rgb(r,g,b)' with an alpha."""
    if color.startswith("rgb"):
        r, g, b = (int(float(v)) for v in color[color.index("(") + 1 : color.index(")")].split(",")[:3])
    else:
        color = color.lstrip("#")
        r, g, b = (int(color[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _short_runs(run_ids: str, keep: int = 3) -> str:
    runs = [r for r in run_ids.split(",") if r]
    if not runs:
        return "—"
    shown = ", ".join(runs[:keep])
    return shown + (f" … (+{len(runs) - keep} more)" if len(runs) > keep else "")


BASELINE_COLORS = {"single": "#222222", "cascade": "#555555", "mixture": "#b0b0b0", "oracle": ORACLE_COLOR}


def point_label(study: str, method: str) -> str:
    return method if study in ("baselines", "(none)") else f"{study}/{method}"


def add_points(fig: go.Figure, g: pl.DataFrame, name: str, symbol: str, size: int, opacity: float, color: str,
                kind: str, legendrank: int) -> None:
    custom = [
        [r["method"], r["operating_point"], r["study"], r["n_seeds"], _short_runs(r["run_ids"]), r["kind"],
         interval_text(r, "accuracy", ".4f"), interval_text(r, "cost", ".3g"), r["calls_per_item"], verifier_text(r)]
        for r in g.iter_rows(named=True)
    ]
    acc_err, cost_err = _ci_errors(g, "accuracy", "accuracy"), _ci_errors(g, "cost_per_item_usd", "cost")
    fig.add_trace(go.Scatter(
        x=g["cost_per_item_usd"].to_list(), y=g["accuracy"].to_list(), mode="markers", name=name,
        marker={"symbol": symbol, "size": size, "color": color, "opacity": opacity,
                "line": {"width": 1, "color": "#222"} if kind == "oracle" else {"width": 0}},
        error_x={"type": "data", **cost_err, "visible": kind != "mixture", "thickness": 1, "width": 3},
        error_y={"type": "data", **acc_err, "visible": kind != "mixture", "thickness": 1, "width": 3},
        customdata=custom,
        hovertemplate=(
            "<b>%{customdata[0]}</b> (%{customdata[5]})<br>operating point: %{customdata[1]}"
            "<br>study: %{customdata[2]}<br>accuracy: %{y:.4f} %{customdata[6]}"
            "<br>cost/item: $%{x:.3~g} %{customdata[7]}<br>calls/item: %{customdata[8]:.2f}"
            "<br>verifier: %{customdata[9]}<br>seeds: %{customdata[3]}<br>MLflow runs: %{customdata[4]}<extra></extra>"
        ),
        legendrank=legendrank,
    ))


def verifier_text(row: dict) -> str:
    """The point's verifier and, where its accept decisions rest on it, whether that one is deployable
    (`queries.with_verifier_notes`), e.g. `judge(fp=0.0366,fn=0.0282) — simulated verifier: not deployable`."""
    note = row.get("verifier_note")
    return (row.get("verifier") or "") + (f" — {note}" if note and note != "—" else "")


def interval_text(row: dict, prefix: str, fmt: str) -> str:
    """`[low, high]` of the point's 95 % bootstrap interval, or `(no interval)`."""
    lo, hi = row.get(f"{prefix}_ci_low"), row.get(f"{prefix}_ci_high")
    return "(no interval)" if lo is None or hi is None else f"[{lo:{fmt}}, {hi:{fmt}}]"


def _ci_errors(g: pl.DataFrame, value: str, prefix: str) -> dict:
    """Plotly's asymmetric error arrays from the interval columns (zero where a point has none)."""
    if f"{prefix}_ci_low" not in g.columns:
        return {"array": [0.0] * g.height}
    v = g[value].to_list()
    lo = [x if x is not None else y for x, y in zip(g[f"{prefix}_ci_low"].to_list(), v, strict=True)]
    hi = [x if x is not None else y for x, y in zip(g[f"{prefix}_ci_high"].to_list(), v, strict=True)]
    return {"array": [max(0.0, h - y) for h, y in zip(hi, v, strict=True)],
            "arrayminus": [max(0.0, y - low) for low, y in zip(lo, v, strict=True)], "symmetric": False}


def dollar_ticks(costs: list[float]) -> dict:
    """Tick values and "$0.0002"-style labels for a log cost axis: 1-2-5 per decade over a narrow
    range, decades only over a wide one; where fewer than two of those fall inside the costs' range
    (a range within one decade), every digit, then evenly spaced round values: every axis keeps
    labelled ticks."""
    positive = [c for c in costs if c > 0]
    if not positive:
        return {}
    c_lo, c_hi = min(positive), max(positive)
    lo, hi = math.floor(math.log10(c_lo)), math.ceil(math.log10(c_hi))
    values: list[float] = []
    for steps in ((1, 2, 5) if hi - lo <= 4 else (1,), tuple(range(1, 10))):
        grid = [m * 10.0**e for e in range(lo, hi + 1) for m in steps]
        if sum(c_lo <= v <= c_hi for v in grid) >= 2:
            values = [v for v in grid if c_lo / 2.5 <= v <= c_hi * 2.5]
            break
    if not values:  # a range narrower than one digit step: round values evenly spaced in log
        values = sorted({float(f"{v:.2g}") for v in np.geomspace(c_lo, c_hi, 4)} | {float(f"{c_lo:.3g}"), float(f"{c_hi:.3g}")})
    labels = ["$" + np.format_float_positional(v, precision=12, trim="-") for v in values]
    return {"tickvals": values, "ticktext": labels}


CURVE_PANELS = [
    ("return", "return per episode (sum of reward)", ""),
    ("accuracy", "accuracy per episode (mean correct)", ".0%"),
    ("cost", "cost per episode (US$)", "$.2~g"),
]


BOUNDS = {"accuracy": (0.0, 1.0), "cost": (0.0, math.inf)}  # what a per-episode mean can be


def curve_panels(curves: pl.DataFrame) -> list[tuple[str, str, str]]:
    """The panels a study's curves can fill: a metric whose values are all null (a study whose steps
    record no `correct` or `cost_usd`, e.g. history_game) gets no panel."""
    return [p for p in CURVE_PANELS if f"{p[0]}_mean" in curves.columns and curves[f"{p[0]}_mean"].null_count() < curves.height]


def learning_curve_figure(curves: pl.DataFrame) -> go.Figure:
    """One panel per recorded metric (return, accuracy, cost per episode): mean over seeds, band = ± 1 std."""
    panels = curve_panels(curves) or CURVE_PANELS[:1]
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[t for _, t, _ in panels], horizontal_spacing=0.07)
    methods = curves["method"].unique(maintain_order=True).to_list()
    colors = method_colors(methods)
    for col, (metric, _, fmt) in enumerate(panels, start=1):
        for method in methods:
            g = curves.filter((pl.col("method") == method) & pl.col(f"{metric}_mean").is_not_null()).sort("episode")
            x = g["episode"].to_list()
            mean, std = g[f"{metric}_mean"].to_list(), g[f"{metric}_std"].fill_null(0.0).to_list()
            floor, ceiling = BOUNDS.get(metric, (-math.inf, math.inf))  # a band never past what is possible
            lo = [max(floor, m - s) for m, s in zip(mean, std, strict=True)]
            hi = [min(ceiling, m + s) for m, s in zip(mean, std, strict=True)]
            fig.add_trace(go.Scatter(
                x=x + x[::-1], y=hi + lo[::-1], mode="lines", fill="toself", fillcolor=_rgba(colors[method], 0.18),
                line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=method,
            ), row=1, col=col)
            fig.add_trace(go.Scatter(
                x=x, y=mean, mode="lines", name=method, legendgroup=method, showlegend=col == 1,
                line={"color": colors[method], "width": 2},
                customdata=list(zip(std, g["n_seeds"].to_list(), strict=True)),
                hovertemplate=f"<b>{method}</b><br>episode %{{x}}<br>mean %{{y:.4g}} ± %{{customdata[0]:.3g}}"
                              "<br>seeds: %{customdata[1]}<extra></extra>",
            ), row=1, col=col)
        fig.update_xaxes(title_text="episode", row=1, col=col)
        if fmt:
            fig.update_yaxes(tickformat=fmt, row=1, col=col)
    fig.update_layout(height=420 + 18 * (len(methods) // 6), margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"orientation": "h", "y": -0.2, "title": {"text": "method"}})
    return fig


PANEL_PX = 260  # height of one executor-mix panel
GAP_PX = 70  # room between panel rows for the titles and the x-axis label


def executor_mix_figure(mix: pl.DataFrame) -> go.Figure:
    """One panel per method: share of steps asking each executor, over training. The figure grows
    with the number of methods and the spacing between rows is a fixed number of pixels, so any
    number of panels fits (plotly needs spacing < 1 / (rows - 1))."""
    methods = mix["method"].unique(maintain_order=True).to_list()
    executors = sorted(mix["executor"].unique().to_list())
    colors = method_colors(executors, EXECUTOR_PALETTE)  # not the methods' colours: another meaning
    dashes = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]  # overlapping shares stay visible
    cols = min(len(methods), 3) or 1
    rows = math.ceil(len(methods) / cols) or 1
    height = PANEL_PX * rows + GAP_PX * (rows - 1) + 80
    spacing = GAP_PX / height if rows > 1 else 0.0
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=methods, shared_yaxes=True,
                        vertical_spacing=spacing, horizontal_spacing=0.05)
    for k, method in enumerate(methods):
        r, c = divmod(k, cols)
        for executor in executors:
            g = mix.filter((pl.col("method") == method) & (pl.col("executor") == executor)).sort("episode")
            if g.is_empty():
                continue
            fig.add_trace(go.Scatter(
                x=g["episode"].to_list(), y=g["share"].to_list(), mode="lines", name=executor,
                legendgroup=executor, showlegend=executor not in _shown(fig),
                line={"color": colors[executor], "width": 2.5, "dash": dashes[executors.index(executor) % len(dashes)]},
                hovertemplate=f"<b>{method}</b> asks <b>{executor}</b><br>episode %{{x}}: %{{y:.1%}} of steps<extra></extra>",
            ), row=r + 1, col=c + 1)
        fig.update_xaxes(title_text="episode", row=r + 1, col=c + 1)
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05])
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"title": {"text": "executor"}})
    return fig


def _shown(fig: go.Figure) -> set[str]:
    return {t.name for t in fig.data if t.showlegend}


PROVENANCE_COLORS = {"computed": "#1f77b4", "calibrated": "#ff7f0e", "setting": "#9e9e9e", "paper's value, not fitted": "#6d4c41"}
SYMLOG_TICKS = [0, 1, 5, 20, 100, 1000, 10000]  # percent


def symlog(percent: float) -> float:
    """A symmetric-log position for a relative difference in percent: linear near 0, log beyond,
    so a +8,800 % row does not flatten the ± 5 % ones."""
    return math.copysign(math.log10(1 + abs(percent)), percent)


def paper_figure(table: pl.DataFrame) -> go.Figure:
    """Relative difference of ours from the paper for the charted (comparable) rows, coloured by
    provenance (computed / calibrated / setting), on a symmetric-log axis with the ± 5 % band
    shaded; each bar says its value."""
    rows = table.filter(pl.col("charted"))
    rel = rows["relative difference %"].to_list()
    provenance = rows["provenance"].to_list()
    fig = go.Figure()
    fig.add_vrect(x0=symlog(-5), x1=symlog(5), fillcolor="#2a9d8f", opacity=0.12, line_width=0)
    for kind in PROVENANCE_COLORS:
        idx = [i for i, p in enumerate(provenance) if p == kind]
        if not idx:
            continue
        fig.add_trace(go.Bar(
            x=[symlog(rel[i]) for i in idx], y=[rows["metric"][i] for i in idx], orientation="h", name=kind,
            marker={"color": PROVENANCE_COLORS[kind]}, text=[f"{rel[i]:+.1f}%" for i in idx], textposition="outside",
            cliponaxis=False,
            customdata=[[rows["paper"][i], rows["ours"][i], rel[i]] for i in idx],
            hovertemplate="<b>%{y}</b><br>paper %{customdata[0]:.4g}<br>ours %{customdata[1]:.4g}"
                          "<br>difference %{customdata[2]:+.1f}%<extra>" + kind + "</extra>",
        ))
    fig.add_vline(x=0, line={"color": "#333", "width": 1})
    reach = max([abs(v) for v in rel] + [20.0])
    ticks = [t for t in SYMLOG_TICKS if t <= reach * 1.5]
    values = sorted({symlog(-t) for t in ticks} | {symlog(t) for t in ticks})
    labels = [f"{math.copysign(10 ** abs(v) - 1, v):+.0f}%" if v else "0" for v in values]
    fig.update_layout(
        height=max(220, 26 * rows.height + 110), margin={"l": 10, "r": 40, "t": 30, "b": 10}, barmode="overlay",
        showlegend=True,
        xaxis={"title": "(ours − paper) / |paper|, % (symmetric-log axis; shaded: within 5 %)", "zeroline": False,
               "tickvals": values, "ticktext": labels, "range": [symlog(-reach) * 1.15, symlog(reach) * 1.15]},
        yaxis={"autorange": "reversed", "categoryorder": "array", "categoryarray": rows["metric"].to_list()},
        legend={"title": {"text": "provenance"}, "orientation": "h", "y": 1.02, "yanchor": "bottom"},
    )
    return fig


TITLE_LINE_PX = 21  # one line of a chart's 14 px title (the view it shows, `view_line.title`)


def title_layout(text: str, top: float = 30) -> tuple[dict[str, Any] | None, float]:
    """(Plotly's title, the top margin that holds it): every line of `text` (`<br>`-separated) in the
    figure's own top margin, `top` pixels plus a line each, so a title never runs over the plot."""
    if not text:
        return None, top
    return ({"text": text, "x": 0.01, "xanchor": "left", "yref": "container", "y": 1, "yanchor": "top",
             "pad": {"t": 10}, "font": {"size": 14}}, top + TITLE_LINE_PX * (text.count("<br>") + 1))


def plot_config(name: str, fmt: str = "svg", width: int | None = None, height: float | None = None) -> dict:
    """Plotly's config: the camera button downloads the figure as `fmt` (svg or png) named `name`; at
    `width` x `height` pixels when given (a figure laid out for a size exports at that size, whatever
    the window: nothing in it is cut off), else at the size shown."""
    size = {"width": width, "height": height} if width and height else {}
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": name, "scale": 2 if fmt == "png" else 1, **size}}
