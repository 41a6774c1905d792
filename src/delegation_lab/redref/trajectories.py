"""Every delegation step as a trajectory row (DESIGN.md contract): task, depth, agent, sampled theta,
verdict, posterior after the update and tokens; study-specific facts go to `extra` (JSON)."""

from __future__ import annotations

import numpy as np
import polars as pl

from delegation_lab.redref.cached import CachedOutcome
from delegation_lab.redref.engine import SequenceOutcome
from delegation_lab.redref.tasks import TaskPool, Zoo

FORCED = "force_explore"


def _extra(frame: pl.DataFrame, columns: list[str]) -> pl.Expr:
    return pl.struct([pl.col(c).fill_nan(None) if frame.schema[c].is_float() else pl.col(c) for c in columns]).struct.json_encode()


def split_steps(out: SequenceOutcome, zoo: Zoo, pool: TaskPool, seq: np.ndarray, usd_per_mtok: float) -> pl.DataFrame:
    """Rows of the simulated split-knowledge runs, with a `seed` column (the writer partitions on it)."""
    st = out.steps
    if not st or st["seed"].size == 0:
        return pl.DataFrame()
    seed, task, agent = st["seed"].astype(int), st["task"].astype(int), st["agent"].astype(int)
    forced = st["forced"].astype(bool)
    names = np.array(zoo.names + [FORCED])
    alpha, beta = st["alpha"], st["beta"]
    frame = pl.DataFrame({
        "seed": seed, "episode": task, "step": st["depth"].astype(int), "split": "tasks",
        "item_id": np.array(pool.ids)[seq[seed, task]], "action": names[agent],
        "correct": st["improved"].astype(bool), "cost_usd": st["tokens"] * usd_per_mtok / 1e6,
        "reward": st["verdict"], "calls": (~forced).astype(int),
        "theta": np.where(forced, np.nan, st["theta"]), "verdict": st["verdict"], "success_verdict": st["success_verdict"],
        "alpha": alpha, "beta": beta, "mu": alpha / (alpha + beta), "tokens": st["tokens"],
        "judged": st["judged"].astype(bool), "forced": forced,
    })
    frame = frame.with_columns(
        pl.when(pl.col("forced")).then(pl.lit([], dtype=pl.List(pl.String))).otherwise(pl.concat_list([pl.col("action")])).alias("executors"),
        pl.col("reward").fill_nan(None),
        _extra(frame, ["theta", "verdict", "success_verdict", "alpha", "beta", "mu", "tokens", "judged", "forced"]).alias("extra"),
    )
    return frame.select("seed", "episode", "step", "split", "item_id", "action", "executors", "correct", "cost_usd", "reward", "calls", "extra")


def cached_steps(out: CachedOutcome, solvers: list[str], item_ids: list[str], splits: np.ndarray, seq: np.ndarray,
                 points: int, budgets: np.ndarray) -> pl.DataFrame:
    """Rows of a cached-answers run; `seed` and `point` (operating-point index) columns for partitioning."""
    st = out.steps
    if not st or st["row"].size == 0:
        return pl.DataFrame()
    row, t, agent = st["row"].astype(int), st["t"].astype(int), st["agent"].astype(int)
    item = seq[row, t]
    alpha, beta = st["alpha"], st["beta"]
    budget = budgets[row]
    frame = pl.DataFrame({
        "seed": row // points, "point": row % points, "episode": t, "step": st["depth"].astype(int),
        "split": splits[item], "item_id": np.array(item_ids)[item], "action": np.array(solvers)[agent],
        "correct": st["correct"].astype(bool), "cost_usd": st["cost"], "reward": st["verdict"], "calls": np.ones(row.size, int),
        "theta": st["theta"], "verdict": st["verdict"], "alpha": alpha, "beta": beta, "mu": alpha / (alpha + beta),
        "judged": st["judged"].astype(bool), "budget_usd": np.where(np.isinf(budget), np.nan, budget),
    })
    frame = frame.with_columns(
        pl.concat_list([pl.col("action")]).alias("executors"),
        pl.col("reward").fill_nan(None),
        _extra(frame, ["theta", "verdict", "alpha", "beta", "mu", "judged", "budget_usd"]).alias("extra"),
    )
    return frame.select("seed", "point", "episode", "step", "split", "item_id", "action", "executors", "correct", "cost_usd", "reward", "calls", "extra")
