"""The Frontier page's solver picker: which models take part. The singles of the chosen solvers,
every cascade, router or study point whose `solver_set` lies within them, and the oracle recomputed
on them from the singles' item-level outcomes (results/outcomes/baselines.parquet). With many models
(42 in the many-model benchmarks) the default subset is the singles' own Pareto set plus the best
single, so the first view stays readable. Streamlit-free, so tests call the same code."""

from __future__ import annotations

import numpy as np
import polars as pl

from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.evaluation.statistics import ItemBootstrap
from delegation_lab.frontier.build import pareto_mask
from delegation_lab.frontier.baselines import oracle_items

MANY = 8  # more solvers than this: the default subset is the singles' Pareto set and the best single


def solvers(points: pl.DataFrame) -> list[str]:
    """The solvers of the frontier's single-solver points, sorted."""
    return sorted(points.filter(pl.col("kind") == "single")["solver_set"].unique().to_list())


def default_subset(points: pl.DataFrame) -> list[str]:
    """Every solver when there are few; else the singles on their own Pareto front plus the most
    accurate single (the cheaper of ties)."""
    singles = points.filter(pl.col("kind") == "single").sort(["cost_per_item_usd", "accuracy"], descending=[False, True])
    if singles.height <= MANY:
        return solvers(points)
    front = pareto_mask(singles["cost_per_item_usd"].to_numpy(), singles["accuracy"].to_numpy())
    best = singles.sort(["accuracy", "cost_per_item_usd"], descending=[True, False])["solver_set"][0]
    return sorted(set(singles.filter(pl.Series(front))["solver_set"].to_list()) | {best})


def within(points: pl.DataFrame, subset: list[str]) -> pl.DataFrame:
    """Points whose solver set lies within `subset` (oracles left out: `subset_oracle` replaces them;
    points with no solver set, e.g. an environment study's, too)."""
    chosen = set(subset)
    keep = [kind != "oracle" and bool(s) and set(s.split(",")) <= chosen
            for kind, s in points.select("kind", "solver_set").iter_rows()]
    return points.filter(pl.Series(keep, dtype=pl.Boolean))


def subset_oracle(singles: dict[str, pl.DataFrame], intervals: IntervalParams) -> dict | None:
    """The oracle over the chosen solvers (name -> the single's outcomes: seed, item_id, correct,
    cost_usd), computed by the frontier stage's own `oracle_items`: per item, correct when any
    chosen solver is, at the cheapest correct one's cost (the cheapest cost when none is), on the
    items every chosen single scored; with its item-bootstrap intervals. None without outcomes."""
    if not singles or any(rows.is_empty() for rows in singles.values()):
        return None
    per_item = [rows.group_by("item_id").agg(pl.col("correct").mean().alias(f"c{k}"), pl.col("cost_usd").mean().alias(f"k{k}"))
                for k, rows in enumerate(singles.values())]
    wide = per_item[0]
    for frame in per_item[1:]:
        wide = wide.join(frame, on="item_id", how="inner")
    if wide.is_empty():
        return None
    wide = wide.sort("item_id")
    n = len(singles)
    correct = wide.select([f"c{k}" for k in range(n)]).to_numpy() >= 0.5  # singles are deterministic: 0 or 1
    cost = wide.select([f"k{k}" for k in range(n)]).to_numpy().astype(float)
    any_right, oracle_cost = oracle_items(correct, cost)
    boot = ItemBootstrap(wide.height, intervals.resamples, intervals.confidence, intervals.seed)
    (a_lo, a_hi), (c_lo, c_hi) = boot.interval(any_right * 1.0), boot.interval(oracle_cost)
    return {"accuracy": float(any_right.mean()), "cost_per_item_usd": float(oracle_cost.mean()),
            "accuracy_ci_low": a_lo, "accuracy_ci_high": a_hi, "cost_ci_low": c_lo, "cost_ci_high": c_hi,
            "solver_set": ",".join(sorted(singles)), "n_items": wide.height}


def with_oracle(points: pl.DataFrame, template: pl.DataFrame, oracle: dict | None) -> pl.DataFrame:
    """`points` plus the subset's oracle: the frontier's oracle row `template` with its numbers
    replaced (no spread over seeds, no MLflow run: it is computed here)."""
    if oracle is None or template.is_empty():
        return points
    values = {**{k: v for k, v in oracle.items() if k != "n_items"}, "accuracy_std": 0.0, "cost_std": 0.0, "run_ids": ""}
    row = template.head(1).with_columns(pl.lit(v, dtype=template.schema[c]).alias(c) for c, v in values.items() if c in template.columns)
    return pl.concat([points, row.select(points.columns)], how="vertical")
