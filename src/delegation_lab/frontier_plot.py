"""A static picture of the frontier (plots/frontier/frontier.png) for `dvc plots` and MLflow."""

from __future__ import annotations

from pathlib import Path

import polars as pl

KIND_STYLE = {"single": ("s", 70), "mixture": (".", 14), "cascade": ("^", 45), "oracle": ("*", 180), "study": ("o", 45)}


def plot_frontier(table: pl.DataFrame, out: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    for kind, (marker, size) in KIND_STYLE.items():
        part = table.filter(pl.col("kind") == kind)
        if part.is_empty():
            continue
        for (method,), g in part.group_by("method", maintain_order=True):
            label = method if kind != "mixture" else None
            ax.errorbar(g["cost_per_item_usd"], g["accuracy"], yerr=g["accuracy_std"], xerr=g["cost_std"],
                        fmt=marker, markersize=size ** 0.5, alpha=0.5 if kind == "mixture" else 0.9,
                        color="0.6" if kind == "mixture" else None, label=label, capsize=2)
    front = table.filter(pl.col("on_pareto")).sort("cost_per_item_usd")
    ax.step(front["cost_per_item_usd"], front["accuracy"], where="post", color="black", lw=1, label="Pareto front")
    ax.set_xscale("log")
    ax.set_xlabel("cost per item (US$, log scale)")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(out)
    return out
