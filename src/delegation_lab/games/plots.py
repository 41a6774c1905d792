"""The `history_game` figures: IQL learning curves without and with money (Figure 5) and the
equilibrium value sets of each game (history-dependent, Markov, favoured)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from delegation_lab.pipeline.figures import pyplot, save_figure


def plot_curves(curves: dict[str, pl.DataFrame], out: Path, title: str) -> Path:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    labels = {"no_transfer": "IQL", "transfer": "IQL with money transfer"}
    for cond, frame in curves.items():
        x, y, s = frame["episode"].to_numpy(), frame["return"].to_numpy(), frame["return_std"].to_numpy()
        ax.plot(x, y, lw=1, label=labels.get(cond, cond))
        ax.fill_between(x, y - s, y + s, alpha=0.2)
    ax.set_xlabel("training episode")
    ax.set_ylabel("episodic environmental return (per agent)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="center right")
    fig.tight_layout()
    return save_figure(fig, out)


def plot_equilibria(frame: pl.DataFrame, out: Path) -> Path:
    plt = pyplot()

    games = frame["game"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, max(1, len(games)), figsize=(5 * max(1, len(games)), 4.2), dpi=120, squeeze=False)
    style = {"history": ("o", 110, "none", "C0"), "markov": ("s", 40, None, "C1"), "favoured": ("*", 160, None, "C3")}
    for ax, name in zip(axes[0], games, strict=False):
        part = frame.filter(pl.col("game") == name)
        players = part["players"][0].split(",")
        for kind, (marker, size, face, color) in style.items():
            g = part.filter(pl.col("kind") == kind)
            if g.height:
                ax.scatter(g["v1"], g["v2"], marker=marker, s=size, facecolors=face or color, edgecolors=color,
                           label={"history": "history-dependent SPE", "markov": "Markov perfect", "favoured": "favoured (Alg. 1)"}[kind])
        ax.set_xlabel(f"V[{players[0]}]")
        ax.set_ylabel(f"V[{players[1]}]" if len(players) > 1 else "")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out)
