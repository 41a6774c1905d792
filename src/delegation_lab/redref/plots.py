"""Plot data (CSV for `dvc plots`) and PNG figures of the study."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from delegation_lab.evaluation.statistics import DDOF
from delegation_lab.pipeline.figures import pyplot, save_figure
from delegation_lab.redref.bandit import SweepResult
from delegation_lab.redref.engine import SequenceOutcome
from delegation_lab.redref.params import RedrefParams
from delegation_lab.pipeline.tables import write_csv_atomic


def rq1_frame(metrics: dict[str, Any]) -> pl.DataFrame:
    rows = []
    for key in ("tokens_ratio", "calls_ratio", "time_ratio"):
        rows.append({"variant": "redref", "metric": key, "value": metrics[key], "low": metrics[f"{key}_ci"][0],
                     "high": metrics[f"{key}_ci"][1], "paper": metrics["paper"][key]})
        variants = {f"redref_{name}": block for name, block in metrics.get("ablation", {}).items()}
        variants.update({f"redref_{name}": metrics[name] for name in ("single_verdict", "task_conditional") if name in metrics})
        for name, block in variants.items():
            rows.append({"variant": name, "metric": key, "value": block[key], "low": block[f"{key}_ci"][0],
                         "high": block[f"{key}_ci"][1], "paper": None})
    return pl.DataFrame(rows, schema_overrides={"paper": pl.Float64})


def plot_rq1(frame: pl.DataFrame, out: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    variants = frame["variant"].unique(maintain_order=True).to_list()
    metrics = frame["metric"].unique(maintain_order=True).to_list()
    width = 0.8 / (len(variants) + 1)
    for v_i, variant in enumerate(variants):
        part = frame.filter(pl.col("variant") == variant)
        x = np.arange(len(metrics)) + v_i * width
        val = part["value"].to_numpy()
        ax.bar(x, val, width, yerr=[val - part["low"].to_numpy(), part["high"].to_numpy() - val], capsize=3, label=variant)
    paper = frame.filter(pl.col("variant") == "redref")["paper"].to_numpy()
    ax.bar(np.arange(len(metrics)) + len(variants) * width, paper, width, color="0.75", label="paper (REDEREF)")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(metrics)) + width * len(variants) / 2, [m.replace("_ratio", "") for m in metrics])
    ax.set_ylabel("ratio to random delegation (lower is better)")
    ax.set_title("RQ1: efficiency at matched success (95 % bootstrap CI)")
    ax.legend(fontsize=7)
    return save_figure(fig, out, tight_layout=True)


def belief_frame(outcome: SequenceOutcome, agent: int, control: SequenceOutcome | None = None) -> pl.DataFrame:
    b = outcome.belief_start[:, :, agent]
    data = {"task": np.arange(b.shape[1]), "belief_median": np.median(b, axis=0), "belief_mean": b.mean(axis=0),
            "belief_q25": np.quantile(b, 0.25, axis=0), "belief_q75": np.quantile(b, 0.75, axis=0)}
    if control is not None:
        data["control_mean"] = control.belief_start[:, :, agent].mean(axis=0)
    return pl.DataFrame(data)


def plot_belief(frame: pl.DataFrame, out: Path, title: str, marker: int | None = None) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.fill_between(frame["task"], frame["belief_q25"], frame["belief_q75"], alpha=0.25, label="inter-quartile range")
    ax.plot(frame["task"], frame["belief_median"], label="median over seeds")
    if "control_mean" in frame.columns:
        ax.plot(frame["task"], frame["belief_mean"], label="impaired (mean)")
        ax.plot(frame["task"], frame["control_mean"], ls="--", label="healthy control (mean)")
    if marker is not None:
        ax.axvline(marker, color="red", lw=0.8, label="impairment starts")
    ax.set_xlabel("task in sequence")
    ax.set_ylabel("posterior mean at task start")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return save_figure(fig, out, tight_layout=True)


def judge_noise_frame(sweep: SweepResult) -> pl.DataFrame:
    mean = sweep.regret.mean(axis=1)
    i1 = int(np.argmax(sweep.deltas))
    return pl.DataFrame({
        "delta": sweep.deltas, "inv_delta": 1.0 / sweep.deltas, "regret": mean,
        "regret_sd": sweep.regret.std(axis=1, ddof=DDOF), "bound": sweep.bound(),
        "scaled_from_best_judge": mean[i1] * sweep.deltas[i1] / sweep.deltas,
    })


def plot_judge_noise(frame: pl.DataFrame, out: Path, horizon: int) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ax.plot(frame["inv_delta"], frame["regret"], "o-", label=f"measured R(T={horizon})")
    ax.plot(frame["inv_delta"], frame["scaled_from_best_judge"], "--", label="R(best judge) x delta_best / delta")
    ax.plot(frame["inv_delta"], frame["bound"], ":", label="sqrt(N T log T) / delta (Theorem 3.1 rate)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("1 / delta  (delta = 1 - eps_FP - eps_FN)")
    ax.set_ylabel("true pseudo-regret")
    ax.set_title("Judge noise: Thompson-sampling regret vs judge discrimination")
    ax.legend(fontsize=7)
    return save_figure(fig, out, tight_layout=True)


def cached_frame(summary_rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not summary_rows:
        return pl.DataFrame(schema={"method": pl.String, "operating_point": pl.String, "cost_per_item_usd": pl.Float64,
                                    "accuracy": pl.Float64, "accuracy_sd": pl.Float64, "calls_per_item": pl.Float64})
    return (
        pl.DataFrame(summary_rows)
        .group_by(["method", "operating_point"], maintain_order=True)
        .agg(pl.col("cost_per_item_usd").mean(), pl.col("accuracy").mean(), pl.col("accuracy").std().alias("accuracy_sd"),
             pl.col("calls_per_item").mean())
    )


def plot_cached(frame: pl.DataFrame, singles: dict[str, tuple[float, float]], out: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    for (method,), g in frame.group_by("method", maintain_order=True):
        g = g.sort("cost_per_item_usd")
        ax.errorbar(g["cost_per_item_usd"], g["accuracy"], yerr=g["accuracy_sd"], fmt="o-", capsize=2, label=method)
        for r in g.iter_rows(named=True):
            ax.annotate(r["operating_point"], (r["cost_per_item_usd"], r["accuracy"]), xytext=(4, -8),
                        textcoords="offset points", fontsize=6, alpha=0.7)
    for name, (cost, acc) in singles.items():
        ax.plot(cost, acc, "s", color="black")
        ax.annotate(f"always-{name}", (cost, acc), xytext=(6, 4), textcoords="offset points", fontsize=7)
    if frame.is_empty():
        ax.text(0.5, 0.5, "routing on cached answers is disabled (redref.cached.enabled: false)", ha="center", transform=ax.transAxes)
    else:
        ax.set_xscale("log")
    ax.set_xlabel("cost per item (US$, log scale)")
    ax.set_ylabel("accuracy (test split)")
    ax.set_title("REDEREF routing on cached answers, budgets B as operating points")
    if not frame.is_empty():
        ax.legend(fontsize=7, loc="center left")
    return save_figure(fig, out, tight_layout=True)


def write_all(folder: Path, frames: dict[str, pl.DataFrame]) -> None:
    for name, frame in frames.items():
        write_csv_atomic(frame, folder / f"{name}.csv")


def write_figures(folder: Path, frames: dict[str, pl.DataFrame], singles: dict[str, tuple[float, float]],
                  params: RedrefParams) -> None:
    """Every plot's CSV and PNG: RQ1 efficiency, the RQ2 / RQ3 beliefs, judge noise, the cached frontier."""
    write_all(folder, frames)
    plot_rq1(frames["rq1_efficiency"], folder / "rq1_efficiency.png")
    plot_belief(frames["rq2_belief"], folder / "rq2_belief.png", f"RQ2: belief in the {params.rq2.expert} expert over its tasks")
    plot_belief(frames["rq3_belief"], folder / "rq3_belief.png",
                f"RQ3: belief in the {params.rq3.impaired} agent, impaired after task {params.rq3.impair_after}",
                marker=params.rq3.impair_after)
    plot_judge_noise(frames["judge_noise"], folder / "judge_noise.png", params.judge_noise.horizon)
    plot_cached(frames["cached_frontier"], singles, folder / "cached_frontier.png")
