"""A static picture of the frontier (plots/frontier/frontier.png) for `dvc plots` and MLflow.

One colour per study (the baselines in black and grey), one marker per kind of point, the item-level
bootstrap intervals (`*_ci_low` / `*_ci_high`) as error bars; the Pareto front as a step line with its
points named. The dashboard has the interactive version.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.pipeline.figures import pyplot, save_figure

# `served`: a deployed policy's live decisions (frontier_served), the frontier's own point like the baselines
BASELINE_MARKERS = {"single": "s", "cascade": "^", "mixture": ".", "oracle": "*", "served": "D"}


def _errors(g: pl.DataFrame, value: str, low: str, high: str) -> np.ndarray:
    """Asymmetric error bars [2, n] from an interval (zero where a point has none)."""
    v = g[value].to_numpy()
    lo = g[low].fill_null(np.nan).to_numpy() if low in g.columns else np.full(len(v), np.nan)
    hi = g[high].fill_null(np.nan).to_numpy() if high in g.columns else np.full(len(v), np.nan)
    return np.nan_to_num(np.vstack([v - lo, hi - v]), nan=0.0).clip(min=0.0)


def plot_frontier(table: pl.DataFrame, out: Path, title: str) -> Path:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(9, 6), dpi=120)
    base = table.filter(pl.col("study") == "baselines")
    for kind, marker in BASELINE_MARKERS.items():
        part = base.filter(pl.col("kind") == kind)
        if part.is_empty():
            continue
        color = {"mixture": "0.7", "oracle": "goldenrod", "served": "crimson"}.get(kind, "black")
        ax.scatter(part["cost_per_item_usd"], part["accuracy"], marker=marker, color=color, zorder=3,
                   s={"mixture": 12, "oracle": 220}.get(kind, 55), label=f"baseline: {kind}", edgecolor="black" if kind == "oracle" else None)
        if kind in ("single", "cascade", "served"):
            ax.errorbar(part["cost_per_item_usd"], part["accuracy"], yerr=_errors(part, "accuracy", "accuracy_ci_low", "accuracy_ci_high"),
                        xerr=_errors(part, "cost_per_item_usd", "cost_ci_low", "cost_ci_high"), fmt="none", ecolor=color,
                        elinewidth=0.7, capsize=2, zorder=2)
    studies = table.filter(pl.col("study") != "baselines")
    cmap = plt.get_cmap("tab10")
    for i, ((study,), g) in enumerate(studies.group_by("study", maintain_order=True)):
        ax.errorbar(g["cost_per_item_usd"], g["accuracy"], yerr=_errors(g, "accuracy", "accuracy_ci_low", "accuracy_ci_high"),
                    xerr=_errors(g, "cost_per_item_usd", "cost_ci_low", "cost_ci_high"), fmt="o",
                    markersize=5, color=cmap(i % 10), alpha=0.85, capsize=2, elinewidth=0.8, label=f"study: {study}")
    front = table.filter(pl.col("on_pareto")).sort("cost_per_item_usd")
    ax.step(front["cost_per_item_usd"], front["accuracy"], where="post", color="black", lw=1, label="Pareto front")
    for row in front.iter_rows(named=True):
        name = row["method"] if row["study"] == "baselines" else f"{row['study']}/{row['method']}"
        ax.annotate(name, (row["cost_per_item_usd"], row["accuracy"]), fontsize=6, xytext=(4, -9),
                    textcoords="offset points", color="0.25")
    ax.set_xscale("log")
    ax.set_xlabel("cost per item (US$, log scale)")
    ax.set_ylabel("accuracy (error bars: 95 % item-level bootstrap)")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return save_figure(fig, out)
