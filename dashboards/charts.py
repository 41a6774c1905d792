"""Plotly figures of the dashboard, built from the small aggregated frames of `queries`."""

from __future__ import annotations

import math

import numpy as np
import plotly.express as px
import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

PALETTE = px.colors.qualitative.Plotly + px.colors.qualitative.D3 + px.colors.qualitative.Dark24
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


def frontier_figure(points: pl.DataFrame) -> go.Figure:
    """Cost per item (log x) vs accuracy: one colour per method, marker by kind, the item-level
    bootstrap intervals as error bars, the Pareto front as a step line, the oracle as a gold star."""
    fig = go.Figure()
    drawn = points.filter(pl.col("cost_per_item_usd") > 0)
    order = sorted(
        drawn.select("method", "kind", "study").unique(maintain_order=True).iter_rows(),
        key=lambda r: (KIND_ORDER.index(r[1]) if r[1] in KIND_ORDER else 0, r[2], r[0]),
    )
    colors = method_colors([m for m, _, _ in order])
    front = drawn.filter(pl.col("on_pareto")).sort("cost_per_item_usd")
    if front.height:
        fig.add_trace(go.Scatter(
            x=front["cost_per_item_usd"].to_list(), y=front["accuracy"].to_list(), mode="lines",
            line={"shape": "hv", "color": "#333", "width": 1.5, "dash": "dash"},
            name="Pareto front", hoverinfo="skip", legendrank=1,
        ))
    seen: set[tuple[str, str]] = set()
    for method, kind, study in order:
        if (method, study) in seen:
            continue
        seen.add((method, study))
        g = drawn.filter((pl.col("method") == method) & (pl.col("study") == study))
        symbol, size, opacity = KIND_MARKER.get(kind, ("circle", 10, 0.9))
        label = method if study in ("baselines", "(none)") else f"{study}/{method}"
        custom = [
            [r["method"], r["operating_point"], r["study"], r["n_seeds"], _short_runs(r["run_ids"]), r["kind"],
             _interval(r, "accuracy", ".4f"), _interval(r, "cost", ".3g"), r["calls_per_item"], r.get("verifier", "")]
            for r in g.iter_rows(named=True)
        ]
        acc_err, cost_err = _ci_errors(g, "accuracy", "accuracy"), _ci_errors(g, "cost_per_item_usd", "cost")
        fig.add_trace(go.Scatter(
            x=g["cost_per_item_usd"].to_list(), y=g["accuracy"].to_list(), mode="markers", name=label,
            marker={"symbol": symbol, "size": size, "color": colors[method], "opacity": opacity,
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
            legendrank=2 if kind == "oracle" else 10 + KIND_ORDER.index(kind) if kind in KIND_ORDER else 100,
        ))
    oracle = drawn.filter(pl.col("kind") == "oracle")
    if oracle.height:
        fig.add_hline(y=oracle["accuracy"].max(), line={"dash": "dot", "color": ORACLE_COLOR, "width": 1},
                      annotation_text="oracle (upper bound)", annotation_position="top left")
    fig.update_layout(
        height=620, margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"type": "log", "title": "cost per item (US$, log scale)", **dollar_ticks(drawn["cost_per_item_usd"].to_list())},
        yaxis={"title": "accuracy", "tickformat": ".0%"},
        legend={"title": {"text": "method"}, "itemsizing": "constant"},
        hoverlabel={"align": "left"},
    )
    return fig


def _interval(row: dict, prefix: str, fmt: str) -> str:
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
    range, decades only over a wide one."""
    positive = [c for c in costs if c > 0]
    if not positive:
        return {}
    lo, hi = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    steps = (1, 2, 5) if hi - lo <= 4 else (1,)
    values = [m * 10.0**e for e in range(lo, hi + 1) for m in steps]
    values = [v for v in values if min(positive) / 2.5 <= v <= max(positive) * 2.5]
    labels = ["$" + np.format_float_positional(v, precision=12, trim="-") for v in values]
    return {"tickvals": values, "ticktext": labels}


CURVE_PANELS = [
    ("return", "return per episode (sum of reward)", ""),
    ("accuracy", "accuracy per episode (mean correct)", ".0%"),
    ("cost", "cost per episode (US$)", "$.2~g"),
]


def learning_curve_figure(curves: pl.DataFrame) -> go.Figure:
    """Three panels (return, accuracy, cost per episode): mean over seeds, band = ± 1 std."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t, _ in CURVE_PANELS], horizontal_spacing=0.07)
    methods = curves["method"].unique(maintain_order=True).to_list()
    colors = method_colors(methods)
    for col, (metric, _, fmt) in enumerate(CURVE_PANELS, start=1):
        for method in methods:
            g = curves.filter(pl.col("method") == method).sort("episode")
            x = g["episode"].to_list()
            mean, std = g[f"{metric}_mean"].to_list(), g[f"{metric}_std"].to_list()
            lo = [m - s for m, s in zip(mean, std, strict=True)]
            hi = [m + s for m, s in zip(mean, std, strict=True)]
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
    fig.update_layout(height=420, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"orientation": "h", "y": -0.2, "title": {"text": "method"}})
    return fig


def executor_mix_figure(mix: pl.DataFrame) -> go.Figure:
    """One panel per method: share of steps asking each executor, over training."""
    methods = mix["method"].unique(maintain_order=True).to_list()
    executors = sorted(mix["executor"].unique().to_list())
    colors = method_colors(executors, EXECUTOR_PALETTE)  # not the methods' colours: another meaning
    dashes = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]  # overlapping shares stay visible
    cols = min(len(methods), 3) or 1
    rows = math.ceil(len(methods) / cols) or 1
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=methods, shared_yaxes=True,
                        vertical_spacing=0.18 if rows > 1 else 0.1, horizontal_spacing=0.05)
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
    fig.update_layout(height=300 * rows + 60, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"title": {"text": "executor"}})
    return fig


def _shown(fig: go.Figure) -> set[str]:
    return {t.name for t in fig.data if t.showlegend}


def paper_figure(table: pl.DataFrame) -> go.Figure:
    """Relative difference of ours from the paper, per numeric metric (0 = reproduced exactly)."""
    rows = table.filter(pl.col("relative difference %").is_not_null())
    rel = rows["relative difference %"].to_list()
    fig = go.Figure(go.Bar(
        x=rel, y=rows["metric"].to_list(), orientation="h",
        marker={"color": ["#2a9d8f" if abs(v) <= 5 else "#e76f51" if abs(v) > 20 else "#e9c46a" for v in rel]},
        customdata=list(zip(rows["paper"].to_list(), rows["ours"].to_list(), strict=True)),
        hovertemplate="<b>%{y}</b><br>paper %{customdata[0]:.4g}<br>ours %{customdata[1]:.4g}"
                      "<br>difference %{x:+.1f}%<extra></extra>",
    ))
    fig.add_vline(x=0, line={"color": "#333", "width": 1})
    fig.update_layout(
        height=max(220, 34 * rows.height + 90), margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": "(ours − paper) / |paper|, %", "ticksuffix": "%", "zeroline": False},
        yaxis={"autorange": "reversed"},
    )
    return fig
