"""Frontier aggregation over 10 M trajectory rows: DuckDB over hive-partitioned Parquet vs pandas.

Writes 4 methods x 10 seeds x 7,813 episodes x 32 steps (10,000,640 rows) with the project's
TrajectoryWriter, then computes the frontier's per-method numbers (per seed: accuracy = mean
correct, cost and calls per item = sums / count of distinct items; then mean and std over seeds)
once through DuckDB (the views of delegation_lab.pipeline.store.connect) and once with pandas (pyarrow reads
the same files, groupby). Prints both times, their ratio and the largest difference between the two
results (must be ~0).
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.store import TrajectoryWriter, connect

ROWS = 10_000_000
METHODS = ["dqn_map", "thompson", "auction_vickrey", "margent_manager"]
SEEDS = 10
STEPS = 32  # decision steps per episode
ITEMS_PER_EPISODE = 16  # each item takes two steps (ask, then accept or escalate); every
# (method, seed) evaluates the same 125,008 held-out items once, as a frontier point does
STUDY = "bench"
EXECUTORS = [["C"], ["B"], ["A"], ["C", "B"], ["C", "A"], ["B", "A"]]
EXECUTOR_COST = np.array([0.00003, 0.0004, 0.0019, 0.00043, 0.00193, 0.0023])
EXTRA = ['{"q": 0.1}', '{"q": 0.4, "bid": 0.002}', '{"posterior": [3, 2]}', '{"shapley": {"A": 0.5}}']

DUCKDB_SQL = """
WITH per_seed AS (
    SELECT study, method, seed,
           avg(CAST(correct AS DOUBLE)) AS accuracy,
           sum(cost_usd) AS cost, sum(calls) AS calls, count(DISTINCT item_id) AS n_items
    FROM trajectories
    GROUP BY study, method, seed
)
SELECT study, method,
       avg(accuracy) AS accuracy, stddev_samp(accuracy) AS accuracy_std,
       avg(cost / n_items) AS cost_per_item_usd, stddev_samp(cost / n_items) AS cost_std,
       avg(calls / n_items) AS calls_per_item, count(*) AS n_seeds
FROM per_seed
GROUP BY study, method
ORDER BY study, method
"""
COLUMNS = ["accuracy", "accuracy_std", "cost_per_item_usd", "cost_std", "calls_per_item"]


def episodes_per_seed(rows: int = ROWS) -> int:
    return math.ceil(rows / (len(METHODS) * SEEDS * STEPS))


@functools.cache
def item_names(n: int) -> pl.Series:
    return pl.Series("item_id", [f"it{k:07d}" for k in range(n)])


def synthetic_steps(method_index: int, seed: int, episodes: int) -> pl.DataFrame:
    """One (method, seed) partition: random items, executors, correctness and costs."""
    rng = np.random.default_rng([method_index, seed])
    n = episodes * STEPS
    step = np.tile(np.arange(STEPS), episodes)
    episode = np.repeat(np.arange(episodes), STEPS)
    item = np.repeat(np.arange(episodes * ITEMS_PER_EPISODE), STEPS // ITEMS_PER_EPISODE)
    who = rng.integers(0, len(EXECUTORS), size=n)
    skill = 0.55 + 0.1 * method_index
    correct = rng.random(n) < np.clip(skill + 0.1 * (who % 3), 0, 0.98)
    cost = EXECUTOR_COST[who] * rng.uniform(0.8, 1.2, size=n)
    item_ids = item_names(episodes * ITEMS_PER_EPISODE).gather(item)
    executors = pl.Series("executors", EXECUTORS, dtype=pl.List(pl.String)).gather(who)
    actions = pl.Series("action", ["ask:" + "+".join(e) for e in EXECUTORS]).gather(who)
    return pl.DataFrame({
        "episode": episode, "step": step, "split": pl.repeat("train", n, eager=True), "item_id": item_ids,
        "action": actions, "executors": executors, "correct": correct, "cost_usd": cost,
        "reward": correct.astype(float) - 100 * cost, "calls": np.array([len(e) for e in EXECUTORS])[who],
        "extra": pl.Series("extra", EXTRA).gather(rng.integers(0, len(EXTRA), size=n)),
    })


def write(layout: Layout, episodes: int) -> tuple[int, float, float]:
    """(rows, seconds generating, seconds in TrajectoryWriter)."""
    t_gen = t_write = 0.0
    rows = 0
    with TrajectoryWriter(layout, STUDY, flush_rows=300_000) as writer:
        for m, method in enumerate(METHODS):
            for seed in range(SEEDS):
                t = time.perf_counter()
                frame = synthetic_steps(m, seed, episodes)
                t_gen += time.perf_counter() - t
                t = time.perf_counter()
                writer.add(method, seed, frame)
                t_write += time.perf_counter() - t
                rows += frame.height
        t = time.perf_counter()
    t_write += time.perf_counter() - t  # the commit (partition swap)
    return rows, t_gen, t_write


def frontier_duckdb(layout: Layout) -> pd.DataFrame:
    con = connect(layout)
    try:
        return con.sql(DUCKDB_SQL).pl().to_pandas()
    finally:
        con.close()


def frontier_pandas(layout: Layout) -> pd.DataFrame:
    df = pd.read_parquet(
        layout.trajectories_dir,
        columns=["study", "method", "seed", "episode", "item_id", "correct", "cost_usd", "calls"],
    )
    keys = ["study", "method", "seed"]
    g = df.groupby(keys, observed=True)
    n_items = g["item_id"].nunique()
    per_seed = pd.DataFrame({
        "accuracy": g["correct"].mean(),
        "cost_per_item_usd": g["cost_usd"].sum() / n_items,
        "calls_per_item": g["calls"].sum() / n_items,
    }).reset_index()
    out = per_seed.groupby(["study", "method"], observed=True).agg(
        accuracy=("accuracy", "mean"), accuracy_std=("accuracy", "std"),
        cost_per_item_usd=("cost_per_item_usd", "mean"), cost_std=("cost_per_item_usd", "std"),
        calls_per_item=("calls_per_item", "mean"), n_seeds=("seed", "nunique"),
    ).reset_index()
    out[["study", "method"]] = out[["study", "method"]].astype(str)
    return out.sort_values(["study", "method"]).reset_index(drop=True)


def main() -> None:
    episodes = episodes_per_seed()
    with tempfile.TemporaryDirectory(prefix="bench-frontier-") as tmp:
        layout = Layout(Path(tmp))
        rows, t_gen, t_write = write(layout, episodes)
        size_mb = sum(p.stat().st_size for p in layout.trajectories_dir.rglob("*.parquet")) / 1e6
        print(f"trajectories: {rows:,} rows ({len(METHODS)} methods x {SEEDS} seeds x {episodes:,} episodes x {STEPS} steps), "
              f"{size_mb:,.0f} MB Parquet; generated in {t_gen:.1f} s, TrajectoryWriter {t_write:.1f} s "
              f"({rows / t_write / 1e6:.1f} M rows/s)")

        duck_times = []
        for _ in range(3):
            t = time.perf_counter()
            duck = frontier_duckdb(layout)
            duck_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        pand = frontier_pandas(layout)
        t_pandas = time.perf_counter() - t

    t_duck = min(duck_times)
    merged = duck.merge(pand, on=["study", "method"], suffixes=("_duckdb", "_pandas"))
    assert len(merged) == len(duck) == len(pand) == len(METHODS), (len(duck), len(pand))
    worst = max(float(np.max(np.abs(merged[f"{c}_duckdb"] - merged[f"{c}_pandas"]) / np.maximum(np.abs(merged[f"{c}_pandas"]), 1e-12)))
                for c in COLUMNS)
    seeds_equal = bool((merged["n_seeds_duckdb"] == merged["n_seeds_pandas"]).all())
    print(duck[["method", "accuracy", "accuracy_std", "cost_per_item_usd", "calls_per_item", "n_seeds"]].to_string(index=False))
    print(f"DuckDB: {t_duck:.2f} s (best of 3; first {duck_times[0]:.2f} s); pandas: {t_pandas:.2f} s; "
          f"pandas / DuckDB = {t_pandas / t_duck:.1f}x  [{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}: "
          "other processes slow both]")
    print(f"same numbers: largest relative difference {worst:.1e}, n_seeds equal: {seeds_equal}")
    if worst > 1e-9 or not seeds_equal:
        raise SystemExit("DuckDB and pandas disagree")


if __name__ == "__main__":
    main()
