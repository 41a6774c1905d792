"""A static picture of the frontier (plots/frontier/frontier.png) for `dvc plots` and MLflow.

One colour per study (the baselines in black and grey), one marker per kind of point, the item-level
bootstrap intervals (`*_ci_low` / `*_ci_high`) as error bars; the Pareto front as a step line with its
points named. The dashboard has the interactive version.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.frontier.gap import closest_first
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


GAP_COLORS = {"routing": "tab:blue", "verifier": "tab:red", "routing_or_verifier": "0.6",
              "answer_premium_usd": "tab:purple", "escalations_usd": "tab:orange", "checks_usd": "tab:green", "unsplit_usd": "0.6"}
GAP_KINDS = ("single", "cascade", "study")  # mixtures lie between two singles: their bars add nothing


def _stacked(ax, y: np.ndarray, entries: list[dict], parts: tuple[str, ...], total: str) -> None:
    """Horizontal bars of `parts` stacked from 0 (negative parts leftwards), the total with its interval."""
    right, left = np.zeros(len(entries)), np.zeros(len(entries))
    for part in parts:
        v = np.array([e.get(part, np.nan) for e in entries], dtype=float)
        if np.isnan(v).all():
            continue
        v = np.nan_to_num(v)
        start = np.where(v >= 0, right, left)
        ax.barh(y, v, left=start, color=GAP_COLORS[part], height=0.7, label=part.removesuffix("_usd").replace("_", " "))
        right, left = right + v.clip(min=0), left + v.clip(max=0)
    t = np.array([e[total] for e in entries])
    lo, hi = np.array([e[f"{total}_ci"] for e in entries]).T
    ax.errorbar(t, y, xerr=np.vstack([t - lo, hi - t]).clip(min=0), fmt="o", color="black", markersize=3, capsize=2,
                elinewidth=0.8, label="total (95 % interval)")
    ax.axvline(0, color="black", lw=0.6)
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=7, loc="best")


def plot_oracle_gap(gap: dict, out: Path, title: str, top: int = 30) -> Path:
    """The oracle-gap chart (the frontier stage writes it beside frontier.png): the `top` methods
    closest to the oracle (singles, cascades, study methods), left their accuracy gap split into routing / verifier, right their extra dollars per item
    split into the answer's premium, escalations and checks (frontier/gap.py); grey where the study
    records no split."""
    plt = pyplot()

    chosen = closest_first(gap, GAP_KINDS, top)
    n = max(len(chosen), 1)
    fig, (acc_ax, cost_ax) = plt.subplots(1, 2, figsize=(13, 1.2 + 0.28 * n), dpi=120, sharey=True)
    y = np.arange(len(chosen))[::-1]
    entries = [m for _, m in chosen]
    if entries:
        _stacked(acc_ax, y, entries, ("routing", "verifier", "routing_or_verifier"), "accuracy_gap")
        # a study that records no answer / check costs: its cost gap as one grey bar, as its accuracy's
        costs = [e if "checks_usd" in e else {**e, "unsplit_usd": e["cost_gap_usd"]} for e in entries]
        _stacked(cost_ax, y, costs, ("answer_premium_usd", "escalations_usd", "checks_usd", "unsplit_usd"), "cost_gap_usd")
    acc_ax.set_yticks(y, [k for k, _ in chosen], fontsize=7)
    acc_ax.set_xlabel("accuracy below the oracle's (fraction of items)")
    cost_ax.set_xlabel("US$ per item above the oracle's")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out)
