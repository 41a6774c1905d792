"""Pictures of the coordinator study (like History Matters' Figures 1-4) from the curve tables:
training curves (return, accuracy, cost per episode, cumulative cost; mean ± std over seeds), the
learned coordinator's solver share over training, and the cost-weight sweep on the test split;
`write_figures` writes them with their tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.coordinator.results import curve_tables, sweep_table, test_per_lane
from delegation_lab.coordinator.study import MethodRun
from delegation_lab.pipeline.figures import pyplot, save_figure
from delegation_lab.pipeline.tables import write_csv_atomic

STYLE = {"dqn_map": "C0", "dqn_nomap": "C1", "always_a": "C3", "mgmt_policy": "C2", "random": "0.6", "oracle": "k"}


def _smooth(y: np.ndarray, k: int) -> np.ndarray:
    if k <= 1 or len(y) < k:
        return y
    return np.convolve(y, np.ones(k) / k, mode="valid")


def _plt():
    plt = pyplot()

    return plt


def plot_training(tables: dict[str, pl.DataFrame], study: str, out: Path, smooth: int = 10) -> Path:
    plt = _plt()
    panels = [("return", "return per episode"), ("accuracy", "accuracy"), ("cost", "cost per episode ($)"),
              ("cum_cost", "cumulative cost ($)")]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4), dpi=110)
    for ax, (key, label) in zip(axes, panels, strict=True):
        t = tables[key]
        methods = [c for c in t.columns if c != "episode" and not c.endswith("_std")]
        for m in methods:
            k = 1 if key == "cum_cost" else smooth
            y, s = _smooth(t[m].to_numpy(), k), _smooth(t[f"{m}_std"].to_numpy(), k)
            x = t["episode"].to_numpy()[len(t) - len(y):]
            ax.plot(x, y, color=STYLE.get(m), label=m, lw=1.2)
            ax.fill_between(x, y - s, y + s, color=STYLE.get(m), alpha=0.15, lw=0)
        ax.set_title(label)
        ax.set_xlabel("episode")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{study}: training (mean ± std over seeds; moving average of {smooth} episodes)")
    fig.tight_layout()
    return save_figure(fig, out)


def plot_share(table: pl.DataFrame, study: str, out: Path, smooth: int = 10) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    x = table["episode"].to_numpy()
    for c in [c for c in table.columns if c != "episode" and not c.endswith("_std")]:
        y, s = _smooth(table[c].to_numpy(), smooth), _smooth(table[f"{c}_std"].to_numpy(), smooth)
        xs = x[len(x) - len(y):]
        ax.plot(xs, y, label=f"solver {c}")
        ax.fill_between(xs, y - s, y + s, alpha=0.15, lw=0)
    ax.set_xlabel("episode")
    ax.set_ylabel("share of attempts answered")
    ax.set_title(f"{study}: who answers (learned coordinator, mean ± std over seeds)")
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, out)


def plot_sweep(sweep: pl.DataFrame, baselines: pl.DataFrame, out: Path) -> Path:
    """sweep: study, method, cost_weight, accuracy, cost_per_item_usd; baselines: study, method, accuracy, cost."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=110)
    for (study, method), g in sweep.group_by(["study", "method"], maintain_order=True):
        g = g.sort("cost_weight")
        ax.plot(g["cost_per_item_usd"], g["accuracy"], "o-", label=f"{study}.{method}")
        for w, c, a in zip(g["cost_weight"], g["cost_per_item_usd"], g["accuracy"], strict=True):
            ax.annotate(f"λ={w:g}", (c, a), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for row in baselines.iter_rows(named=True):
        ax.scatter(row["cost_per_item_usd"], row["accuracy"], marker="s" if row["study"] == "management" else "D",
                   facecolors="none" if row["study"] == "delegation" else STYLE.get(row["method"]),
                   edgecolors=STYLE.get(row["method"]), s=50, label=f"{row['study']}.{row['method']}")
    ax.set_xscale("log")
    ax.set_xlabel("cost per item ($, test split)")
    ax.set_ylabel("accuracy (test split)")
    ax.set_title("coordinator: the cost-weight sweep on held-out items")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out)


def write_figures(runs: list[MethodRun], folder: Path, packet_size: int) -> None:
    """Return and cost CSVs for `dvc plots` in `folder` (a column per method), the other curve tables
    beside the PNGs (like the paper's Figures 1-4) in `folder`/figures, and the cost-weight sweep."""
    figures = folder / "figures"
    for env_study in ("management", "delegation"):
        tables = curve_tables(runs, env_study)
        if not tables:  # not run: keep the declared plot files, empty
            for name in ("return", "cost"):
                write_csv_atomic(pl.DataFrame(schema={"episode": pl.Int64, "dqn_map": pl.Float64}),
                                 folder / f"{env_study}_{name}.csv")
            continue
        for name, table in tables.items():
            write_csv_atomic(table, (folder if name in ("return", "cost") else figures) / f"{env_study}_{name}.csv")
        plot_training(tables, env_study, figures / f"{env_study}_training.png")
        if "share" in tables:
            plot_share(tables["share"], env_study, figures / f"{env_study}_solver_share.png")
    sweep = sweep_table(runs, packet_size)
    write_csv_atomic(sweep, folder / "lambda_sweep.csv")
    base_points = pl.DataFrame([
        {"study": r.study, "method": r.method, "accuracy": float(test_per_lane(r.test, packet_size)["accuracy"].mean()),
         "cost_per_item_usd": float(test_per_lane(r.test, packet_size)["cost_per_item"].mean())}
        for r in runs if not r.sweep and r.method in ("always_a", "oracle", "mgmt_policy")
    ], schema={"study": pl.String, "method": pl.String, "accuracy": pl.Float64, "cost_per_item_usd": pl.Float64})
    plot_sweep(sweep, base_points, figures / "lambda_sweep.png")
