"""The portfolio page's data and chart: metrics/portfolio.json (stage `portfolio`) as tables and an
accuracy-vs-cost figure per k, with the chosen models named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import polars as pl

from dashboards.charts import ORACLE_COLOR, PALETTE, dollar_ticks


def arrangement_label(p: dict[str, Any]) -> str:
    """As `delegation_lab.portfolio.selection.arrangement_label` (which imports the routers' torch): 'cascade:
    a > b' (cheap first), 'router knn lambda=0.1: a | b', 'single: a'."""
    if p["arrangement"] == "router":
        return f"router {p.get('router', '?')} lambda={p['knob']:g}: {' | '.join(p['models'])}"
    return f"{p['arrangement']}: {' > '.join(p['models'])}"


def load_portfolio(path: Path) -> dict[str, Any] | None:
    """metrics/portfolio.json, or None when absent, unreadable or not a portfolio."""
    try:
        metrics = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return metrics if isinstance(metrics, dict) and metrics.get("portfolios") else None


def _row(k: str, p: dict[str, Any]) -> dict[str, Any]:
    (alo, ahi), (clo, chi) = p["accuracy_ci"], p["cost_ci"]
    return {"k": int(k), "arrangement": p["arrangement"], "models": arrangement_label(p).split(": ", 1)[1],
            "knob": p.get("knob"), "accuracy": p["accuracy"], "accuracy_ci_low": alo, "accuracy_ci_high": ahi,
            "cost_per_item_usd": p["cost_per_item_usd"], "cost_ci_low": clo, "cost_ci_high": chi,
            "of_oracle_accuracy": p["of_oracle_accuracy"], "of_best_single_cost": p["of_best_single_cost"],
            "select_accuracy": p["select_accuracy"], "candidates": p.get("candidates")}


def chosen_table(metrics: dict[str, Any]) -> pl.DataFrame:
    """One row per k: the portfolio chosen on the selection split, measured on the report split."""
    return pl.DataFrame([_row(k, p) for k, p in metrics["portfolios"].items()])


def arrangements_table(metrics: dict[str, Any]) -> pl.DataFrame:
    """Per k, the most accurate (on the selection split) of each arrangement; older files without
    `by_arrangement` give the chosen one."""
    rows = [_row(k, a) for k, p in metrics["portfolios"].items() for a in p.get("by_arrangement", {k: p}).values()]
    return pl.DataFrame(rows).sort("k", "arrangement")


def portfolio_figure(metrics: dict[str, Any]) -> go.Figure:
    """Cost per item (log x) vs accuracy on the report split: per k (one colour) its front on the
    selection split as small points and its chosen portfolio as a large one with intervals; the
    oracle of all models as a dotted line."""
    fig = go.Figure()
    costs: list[float] = []
    for i, (k, p) in enumerate(metrics["portfolios"].items()):
        color = PALETTE[i % len(PALETTE)]
        front = [f for f in p["front"] if f["cost_per_item_usd"] > 0]
        costs += [f["cost_per_item_usd"] for f in front] + [p["cost_per_item_usd"]]
        fig.add_trace(go.Scatter(
            x=[f["cost_per_item_usd"] for f in front], y=[f["accuracy"] for f in front], mode="markers",
            marker={"size": 6, "color": color, "opacity": 0.45}, name=f"k={k} front", legendgroup=k, showlegend=False,
            text=[arrangement_label(f) for f in front], hovertemplate="%{text}<br>accuracy %{y:.3f}<br>$%{x:.3g}/item<extra>k=" + k + "</extra>",
        ))
        (alo, ahi), (clo, chi) = p["accuracy_ci"], p["cost_ci"]
        fig.add_trace(go.Scatter(
            x=[p["cost_per_item_usd"]], y=[p["accuracy"]], mode="markers+text", text=[f"k={k}"], textposition="top right",
            marker={"size": 14, "color": color, "line": {"width": 1, "color": "#000"}}, name=f"k={k} {arrangement_label(p)}",
            legendgroup=k, error_y={"type": "data", "symmetric": False, "array": [ahi - p["accuracy"]], "arrayminus": [p["accuracy"] - alo]},
            error_x={"type": "data", "symmetric": False, "array": [chi - p["cost_per_item_usd"]], "arrayminus": [p["cost_per_item_usd"] - clo]},
            hovertemplate=f"k={k} {arrangement_label(p)}<br>accuracy %{{y:.3f}} [{alo:.3f}, {ahi:.3f}]"
                          f"<br>$%{{x:.3g}}/item [{clo:.3g}, {chi:.3g}]<extra></extra>",
        ))
    oracle = metrics["oracle"]["accuracy"]
    fig.add_hline(y=oracle, line={"dash": "dot", "color": ORACLE_COLOR, "width": 1},
                  annotation_text=f"oracle of all {metrics['solvers']} models", annotation_position="top left")
    fig.update_layout(
        height=640, margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"type": "log", "title": "cost per item (US$, log scale)", **dollar_ticks(costs)},
        yaxis={"title": f"accuracy on {metrics['split']} (error bars: item bootstrap)", "tickformat": ".1%"},
        legend={"title": {"text": "chosen per k (small: its front)"}, "orientation": "h", "y": -0.15, "yanchor": "top"},
        hoverlabel={"align": "left"},
    )
    return fig
