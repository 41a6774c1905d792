"""Pictures of the credit study, like SHARP's figures: held-out accuracy per method against the
paper's MuSiQue ablation (Figure 3), held-out accuracy over training with a 95 % band over seeds
(Figure 5), coordination (Figure 6: useful / harmful call shares, planner credit) and the p-sweep
(Figure 7: accuracy, tokens and training time per batch against p); `write_figures` writes them with
their tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.credit.report import PAPER, PAPER_P_SWEEP, curve_tables
from delegation_lab.credit.study import StudyOutcome
from delegation_lab.pipeline.figures import pyplot, save_figure
from delegation_lab.pipeline.tables import write_csv_atomic


def plot_methods(methods: pl.DataFrame, out: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4), dpi=110)
    names = methods["method"].to_list()
    x = np.arange(len(names))
    ax = axes[0]
    ax.bar(x, methods["accuracy"], yerr=methods["accuracy_std"], color="C0", alpha=0.8, label="ours (mean ± std over seeds)")
    paper = [PAPER.get(n, {}).get("accuracy", np.nan) for n in names]
    ax.scatter(x, paper, color="C3", marker="D", zorder=3, label="paper (MuSiQue)")
    lo = np.nanmin(np.r_[methods["accuracy"].to_numpy(), paper]) - 5
    ax.set_ylim(max(0, lo), None)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_title("Accuracy per method (Figure 3)")
    ax.legend(fontsize=8)
    ax = axes[1]
    w = 0.38
    ax.bar(x - w / 2, methods["useful_share"], w, label="useful subagent calls (%)", color="C2")
    ax.bar(x + w / 2, methods["harmful_share"], w, label="harmful calls (%)", color="C3")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_title("Coordination (Figure 6)")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.bar(x, methods["tokens_per_task"], color="C1")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("tokens per question")
    ax.set_title("Inference tokens")
    fig.tight_layout()
    return save_figure(fig, out, bbox_inches="tight")


def plot_stability(curves: pl.DataFrame, n_seeds: int, out: Path, methods: list[str] | None = None) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    it = curves["iteration"].to_numpy()
    names = [c for c in curves.columns if c != "iteration" and not c.endswith("_std")]
    for i, name in enumerate(methods or names):
        if name not in names:
            continue
        y = curves[name].to_numpy()
        half = 1.96 * curves[f"{name}_std"].to_numpy() / np.sqrt(max(n_seeds, 1))
        ax.plot(it, y, color=f"C{i}", label=name)
        ax.fill_between(it, y - half, y + half, color=f"C{i}", alpha=0.15)
    ax.set_xlabel("optimisation step")
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_title("Training stability: mean and 95 % interval over seeds (Figure 5)")
    ax.legend(fontsize=8)
    return save_figure(fig, out, bbox_inches="tight")


def plot_p_sweep(sweep: pl.DataFrame, out: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), dpi=110)
    p = sweep["p"].to_numpy()
    paper_p = np.array([0.0, 1.0])
    for ax, key, label, paper_key in ((axes[0], "accuracy", "held-out accuracy (%)", "accuracy"),
                                      (axes[1], "tokens_per_task", "tokens per question", "tokens_per_task")):
        ax.plot(p, sweep[key], "o-", color="C0", label="ours")
        ax.plot(paper_p, [PAPER_P_SWEEP["p=0"][paper_key], PAPER_P_SWEEP["p=1"][paper_key]], "D--", color="C3",
                label="paper (MuSiQue)")
        ax.set_xlabel("p (share of invocations with Shapley credit)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    ax = axes[2]
    base = sweep["batch_seconds"][0] if sweep.height else 1.0
    ax.plot(p, sweep["batch_seconds"] / base, "o-", color="C0", label="ours: time per batch / time at p = 0")
    ax.plot(paper_p, [1.0, PAPER_P_SWEEP["batch_seconds_ratio_p1_vs_p0"]], "D--", color="C3", label="paper: 684 s -> 1345 s")
    ax.set_xlabel("p")
    ax.set_ylabel("relative training time per batch")
    ax.legend(fontsize=8)
    fig.suptitle("Cost analysis (Figure 7)")
    fig.tight_layout()
    return save_figure(fig, out, bbox_inches="tight")


def write_figures(study: StudyOutcome, folder: Path) -> None:
    """The curve tables (plots/credit/*.csv) and the pictures beside them in `folder`/figures."""
    tables = curve_tables(study)
    for name, table in tables.items():
        write_csv_atomic(table, folder / f"{name}.csv")
    figures = folder / "figures"
    names = study.params.method_names()
    plot_methods(tables["methods"], figures / "methods.png")
    plot_stability(tables["heldout_accuracy"], study.params.seeds, figures / "stability.png",
                   [m for m in ("single", "broadcast", "no_shapley", "sharp") if m in names])
    plot_p_sweep(tables["p_sweep"], figures / "p_sweep.png")
