"""The study's plots/market/: the tables for `dvc plots` (`write_plot_tables`) and the PNG pictures
(success and margins vs N, learning curves, clearing prices and subsidies per node, the answers
market on the cost-accuracy plane); `write_figures` writes both."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.pipeline.figures import pyplot, save_figure
from delegation_lab.market.answers import SplitMatrix
from delegation_lab.market.params import MarketParams
from delegation_lab.market.report import group, mean_of, std_of
from delegation_lab.market.study import SweepResult, WorldResult, operating_point
from delegation_lab.pipeline.tables import write_csv_atomic


def _label(protocol: str, bidder: str) -> str:
    return f"{protocol} / {bidder}"


def plot_chain_density(worlds: list[WorldResult], out: Path) -> Path:
    plt = pyplot()
    cells = group([w for w in worlds if w.domain == "chain"])
    pairs: dict[tuple[str, str], list[tuple[int, list[WorldResult]]]] = defaultdict(list)
    for (p, b, n), ws in cells.items():
        pairs[(p, b)].append((n, ws))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), dpi=110)
    for (p, b), items in sorted(pairs.items()):
        items.sort()
        ns = [n for n, _ in items]
        style = "-" if p == "first_price" else "--"
        axes[0].errorbar(ns, [mean_of(w.final["success"] for w in ws) for _, ws in items],
                         yerr=[std_of(w.final["success"] for w in ws) for _, ws in items], fmt="o" + style, capsize=3, label=_label(p, b))
        axes[1].plot(ns, [mean_of(w.final["margin"] for w in ws) or 0.0 for _, ws in items], "o" + style, label=_label(p, b))
        axes[2].plot(ns, [mean_of(w.final["subsidy"] for w in ws) for _, ws in items], "o" + style, label=_label(p, b))
    for ax, title in zip(axes, ["task success (final rounds)", "mean winner margin U ($ per auction won)", "platform subsidy ($ per task)"], strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({n for (_, _, n) in cells}))
        ax.get_xaxis().set_major_formatter(plt.ScalarFormatter())
        ax.set_xlabel("agents per edge N")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(-0.05, 1.05)
    axes[0].legend(fontsize=7)
    fig.suptitle("Chain translation: monopsony (N = 1) vs imperfect competition (N > 1)")
    fig.tight_layout()
    return save_figure(fig, out)


def plot_chain_curves(worlds: list[WorldResult], out: Path, smooth: int = 10) -> Path:
    plt = pyplot()
    cells = group([w for w in worlds if w.domain == "chain"])
    pairs = sorted({(p, b) for (p, b, _) in cells})
    cols = min(4, len(pairs))
    rows = int(np.ceil(len(pairs) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), dpi=100, squeeze=False)
    for ax, (p, b) in zip(axes.flat, pairs, strict=False):
        for n in sorted(n for (pp, bb, n) in cells if (pp, bb) == (p, b)):
            ws = cells[(p, b, n)]
            ax.plot(smooth_curve(nanmean_rows(np.vstack([w.curves["success"] for w in ws])), smooth), label=f"N={n}")
        ax.set_title(_label(p, b), fontsize=9)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(pairs):]:
        ax.axis("off")
    fig.suptitle("Task success per round (mean over seeds)")
    fig.tight_layout()
    return save_figure(fig, out)


def plot_chain_prices(worlds: list[WorldResult], out: Path, languages: list[str]) -> Path:
    """Clearing price (what the buyer paid) and subsidy at each node, per protocol / bidder and N."""
    plt = pyplot()
    cells = group([w for w in worlds if w.domain == "chain"])
    keys = sorted(cells)
    nodes = [lang for lang in languages if any(lang in w.final["price"] for ws in cells.values() for w in ws)]
    if not nodes or not keys:
        nodes = nodes or ["-"]
    price = np.array([[mean_of(w.final["price"].get(n) for w in cells[k]) or 0.0 for n in nodes] for k in keys])
    subsidy = np.array([[mean_of(w.final["subsidy_at"].get(n) for w in cells[k]) or 0.0 for n in nodes] for k in keys])
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.32 * len(keys) + 2), dpi=110)
    for ax, data, title in ((axes[0], price, "clearing price paid by the buyer ($)"), (axes[1], subsidy, "platform subsidy per auction ($)")):
        im = ax.imshow(data, aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(nodes)), nodes)
        ax.set_yticks(range(len(keys)), [f"{p} / {b} / N={n}" for p, b, n in keys], fontsize=7)
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                ax.text(j, i, f"{data[i, j]:.2f}", ha="center", va="center", fontsize=6, color="w" if data[i, j] < data.max() * 0.6 else "k")
        ax.set_title(title, fontsize=10)
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    return save_figure(fig, out)


def plot_answers_frontier(worlds: list[WorldResult], out: Path, references: pl.DataFrame | None = None) -> Path:
    """The answers market's operating points (one per terminal reward) on cost vs accuracy, with the
    single solvers on the same test items as references."""
    plt = pyplot()
    by_method: dict[str, list[tuple[float, float, float, str]]] = defaultdict(list)
    for (p, b, m), ws in group([w for w in worlds if w.domain == "answers"]).items():
        by_method[f"{p}-{b}"].append((m, mean_of(w.final["cost_per_item"] for w in ws), mean_of(w.final["accuracy"] for w in ws), operating_point(m)))
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    for method, points in sorted(by_method.items()):
        points.sort()
        ax.plot([c for _, c, _, _ in points], [a for _, _, a, _ in points], "o-", label=method, alpha=0.85)
    if references is not None and references.height:
        for row in references.iter_rows(named=True):
            ax.plot(row["cost_per_item_usd"], row["accuracy"], "ks", markersize=7)
            ax.annotate(row["method"], (row["cost_per_item_usd"], row["accuracy"]), fontsize=7, xytext=(4, -10), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("solver cost per item (US$, log scale)")
    ax.set_ylabel("accuracy (test split)")
    ax.set_title("Market over cached solver answers: one point per terminal reward")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return save_figure(fig, out)


def smooth_curve(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or values.size < window:
        return values
    kernel = np.ones(window) / window
    valid = ~np.isnan(values)
    num = np.convolve(np.where(valid, values, 0.0), kernel, mode="valid")
    den = np.convolve(valid.astype(float), kernel, mode="valid")
    with np.errstate(invalid="ignore"):
        return np.concatenate([np.full(window - 1, np.nan), num / den])


def nanmean_rows(stacked: np.ndarray) -> np.ndarray:
    """Column means over seeds ignoring NaN (NaN where every seed is NaN)."""
    count = (~np.isnan(stacked)).sum(0)
    total = np.where(np.isnan(stacked), 0.0, stacked).sum(0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def write_plot_tables(worlds: list[WorldResult], folder: Path, smooth: int = 10) -> list[Path]:
    """The figures of plots/market/: chain success and margin vs N, chain learning curves, answers frontier and curves."""
    written: list[Path] = []
    chain = group([w for w in worlds if w.domain == "chain" and w.group == "main"])
    by_pair: dict[tuple[str, str], list[tuple[int, list[WorldResult]]]] = defaultdict(list)
    for (protocol, bidder, density), ws in chain.items():
        by_pair[(protocol, bidder)].append((density, ws))
        curves = {key: smooth_curve(nanmean_rows(np.vstack([w.curves[key] for w in ws])), smooth) for key in ("success", "margin", "subsidy", "alive", "route_cost")}
        frame = pl.DataFrame({"round": np.arange(len(curves["success"])), **{k: v.astype(float) for k, v in curves.items()}}).fill_nan(None)
        written.append(write_csv_atomic(frame, folder / "chain_curves" / f"{protocol}-{bidder}-N{density}.csv"))
    for (protocol, bidder), items in by_pair.items():
        items.sort()
        finals = [[w.final | {"bankruptcies": float(len(w.bankrupt_agents))} for w in ws] for _, ws in items]
        density = [d for d, _ in items]
        success = pl.DataFrame({"N": density, "success": [mean_of(f["success"] for f in fs) for fs in finals], "success_std": [std_of(f["success"] for f in fs) for fs in finals]})
        margin = pl.DataFrame(
            {"N": density, "margin": [mean_of(f["margin"] for f in fs) for fs in finals], "bankruptcies": [mean_of(f["bankruptcies"] for f in fs) for fs in finals]},
            schema={"N": pl.Int64, "margin": pl.Float64, "bankruptcies": pl.Float64},
        )
        written.append(write_csv_atomic(success, folder / "chain_success" / f"{protocol}-{bidder}.csv"))
        written.append(write_csv_atomic(margin, folder / "chain_margin" / f"{protocol}-{bidder}.csv"))
    answers = [w for w in worlds if w.domain == "answers"]
    if answers:
        rows = []
        for (protocol, bidder, multiple), ws in group(answers).items():
            rows.append(
                {
                    "method": f"{protocol}-{bidder}",
                    "operating_point": operating_point(multiple),
                    "reward_usd": ws[0].reward_usd,
                    "cost_per_item_usd": mean_of(w.final["cost_per_item"] for w in ws),
                    "accuracy": mean_of(w.final["accuracy"] for w in ws),
                    "calls_per_item": mean_of(w.final["calls_per_item"] for w in ws),
                }
            )
        written.append(write_csv_atomic(pl.DataFrame(rows).sort(["method", "reward_usd"]), folder / "answers_frontier.csv"))
        by_method: dict[str, list[WorldResult]] = defaultdict(list)
        for w in answers:
            by_method[w.cell].append(w)
        for method, ws in by_method.items():
            stacked = np.vstack([w.curves["success"] for w in ws])
            frame = pl.DataFrame({"round": np.arange(stacked.shape[1]), "success": smooth_curve(stacked.mean(0), smooth).astype(float)}).fill_nan(None)
            written.append(write_csv_atomic(frame, folder / "answers_curves" / f"{method}.csv"))
    return written


def single_solver_points(matrices: dict[str, SplitMatrix], solvers: list[str]) -> pl.DataFrame:
    """Each solver alone on the test split: the answers frontier's references."""
    test = matrices["test"]
    return pl.DataFrame(
        {
            "method": [f"always-{s}" for s in solvers],
            "accuracy": test.correct.float().mean(0).tolist(),
            "cost_per_item_usd": test.cost.mean(0).tolist(),
        }
    )


def write_figures(chain: SweepResult, answers: SweepResult, folder: Path, params: MarketParams,
                  matrices: dict[str, SplitMatrix] | None, solvers: list[str]) -> list[Path]:
    """The plot tables and the pictures of both sweeps; returns the pictures (MLflow artifacts)."""
    write_plot_tables(chain.worlds + answers.worlds, folder)
    pictures = []
    density_sweep = [w for w in chain.worlds if w.group == "main"]
    if density_sweep:
        pictures += [
            plot_chain_density(density_sweep, folder / "chain_density.png"),
            plot_chain_curves(density_sweep, folder / "chain_curves.png"),
            plot_chain_prices(density_sweep, folder / "chain_prices.png", params.chain.graph.languages()),
        ]
    if answers.worlds:
        pictures.append(plot_answers_frontier(answers.worlds, folder / "answers_frontier.png",
                                              single_solver_points(matrices, solvers)))
    return pictures
