"""The portfolio page's data and chart: metrics/portfolio.json (stage `portfolio`) as tables and an
accuracy-vs-cost figure per k, with the chosen models named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import polars as pl

from dashboards.charts import ORACLE_COLOR, PALETTE, dollar_ticks
from delegation_lab.evaluation.verifier import NOT_DEPLOYABLE


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


def k_range_text(metrics: dict[str, Any]) -> str:
    """`k = 1 .. 3 of 3 models`: max_k capped at the number of models (no portfolio has more)."""
    top = min(int(metrics["max_k"]), int(metrics["solvers"]))
    return f"k = 1 .. {top} of {metrics['solvers']} models" if top > 1 else f"k = 1 of {metrics['solvers']} model(s)"


def best_single_label(metrics: dict[str, Any]) -> str:
    """The best single model's metric label, naming the split it was chosen on (the Frontier's best
    single is the most accurate on the report split, so the two may differ)."""
    return f"Best single model: {metrics['best_single']['model']} (chosen on {metrics['select_split']})"


def cost_delta(of_best_single_cost: float | None) -> tuple[str | None, str]:
    """(st.metric delta text, its arrow) for a portfolio's cost as a fraction of the best single
    model's: an up-arrow only for a cost increase, a down-arrow for a reduction, none for equal or
    unknown (shown with delta_color="inverse": cheaper is good)."""
    if of_best_single_cost is None:
        return None, "off"
    change = of_best_single_cost - 1
    arrow = "off" if round(change, 2) == 0 else "up" if change > 0 else "down"
    return f"{change:+.0%} cost vs the best single model ({of_best_single_cost:.0%} of it)", arrow


def verifier_note(metrics: dict[str, Any]) -> str | None:
    """Why the verifier the cascades rest on is not deployable (`simulated verifier: not
    deployable`), or None when it is deployable or the file does not say."""
    described = metrics.get("verifier") or {}
    if described.get("deployable") is not False:
        return None
    kind = described.get("kind")
    return NOT_DEPLOYABLE.get(kind, f"{kind} verifier: not deployable")


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
