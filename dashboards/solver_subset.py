"""The Frontier page's solver picker: which models take part. The singles of the chosen solvers,
every cascade, router or study point whose `solver_set` lies within them, and the oracle recomputed
on them from the singles' item-level outcomes (results/outcomes/baselines.parquet).

A study point that chose among every solver (a router trained on all 42 models) lies within no
smaller subset; the page can keep those points whatever the subset (`chose_among_all`, on by
default with many models): they are results of runs on the whole pool, not of the subset. With
many models the default subset is then the solvers the rest of the headline rests on: those of the
Pareto set over every solver and of each method's best point, leaving out the points kept anyway,
so the first view drops the solvers no answer needs and keeps the answer (the budget winner is the
one with every solver). Streamlit-free, so tests call the same code."""

from __future__ import annotations

import polars as pl

from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.evaluation.statistics import ItemBootstrap
from delegation_lab.frontier.build import pareto_mask
from delegation_lab.frontier.baselines import oracle_items
from dashboards.frontier_points import point_name

MANY = 8  # more solvers than this: the default subset is the solvers of the front and of each method's best point


def solvers(points: pl.DataFrame) -> list[str]:
    """The solvers of the frontier's single-solver points, sorted."""
    return sorted(points.filter(pl.col("kind") == "single")["solver_set"].unique().to_list())


def chose_among_all(points: pl.DataFrame, models: list[str]) -> pl.Series:
    """Per point: a study point (router, coordinator, ...) whose solver set holds every solver."""
    every = set(models)
    return pl.Series([kind == "study" and bool(s) and set(s.split(",")) >= every
                      for kind, s in points.select("kind", "solver_set").iter_rows()], dtype=pl.Boolean)


def keeps_whole_pool(models: list[str]) -> bool:
    """The default of keeping the points that chose among every solver: with many solvers."""
    return len(models) > MANY


def default_subset(points: pl.DataFrame) -> list[str]:
    """Every solver when there are few; else the solvers `default_reasons` names."""
    if len(solvers(points)) <= MANY:
        return solvers(points)
    return sorted(default_reasons(points))


def default_reasons(points: pl.DataFrame) -> dict[str, list[str]]:
    """solver -> the points that put it in the many-model default subset: every point of the Pareto
    set over all solvers (equal points alike, so the budget's winner, always on that front, stays
    whatever its tie-break), and each method's most accurate point (the cheaper of ties) so that
    every study keeps its best; the baselines' methods are one per solver or pair, so there each
    kind (single, cascade) counts as one method. Random mixtures and oracles count only on the front
    (an oracle never: the page recomputes it); points naming no solver cannot be kept by any subset."""
    usable = points.filter((pl.col("kind") != "oracle") & (pl.col("solver_set").fill_null("") != ""))
    if keeps_whole_pool(solvers(points)):  # the page keeps these whatever the subset: they need no solver in it
        usable = usable.filter(~chose_among_all(usable, solvers(points)))
    if usable.is_empty():
        return {}
    front = pareto_mask(usable["cost_per_item_usd"].to_numpy(), usable["accuracy"].to_numpy())
    front_values = set(usable.filter(pl.Series(front)).select("cost_per_item_usd", "accuracy").iter_rows())
    on_front = usable.filter(pl.Series([v in front_values for v in usable.select("cost_per_item_usd", "accuracy").iter_rows()]))
    method = pl.when(pl.col("study") == "baselines").then(pl.col("kind")).otherwise(pl.col("method"))
    best = (usable.filter(pl.col("kind") != "mixture").with_columns(method.alias("_method"))
            .sort(["accuracy", "cost_per_item_usd", "study", "method"], descending=[True, False, False, False])
            .unique(["study", "_method"], keep="first", maintain_order=True))
    reasons: dict[str, list[str]] = {}
    for why, rows in (("on the Pareto set over all solvers", on_front), ("best point of its method", best)):
        for row in rows.iter_rows(named=True):
            for solver in row["solver_set"].split(","):
                reasons.setdefault(solver, []).append(f"{point_name(row)} ({why})")
    return reasons


def reasons_text(reasons: dict[str, list[str]]) -> str:
    """The caption line: each solver and the first point that puts it in (how many more)."""
    return "; ".join(f"`{s}`: {why[0]}" + (f" and {len(why) - 1} more" if len(why) > 1 else "")
                     for s, why in sorted(reasons.items()))


def within(points: pl.DataFrame, subset: list[str], whole_pool: list[str] | None = None) -> pl.DataFrame:
    """Points whose solver set lies within `subset` (oracles left out: `subset_oracle` replaces them;
    points with no solver set, e.g. an environment study's, too), and with `whole_pool` (every
    solver) the study points that chose among all of it."""
    chosen = set(subset)
    keep = [kind != "oracle" and bool(s) and set(s.split(",")) <= chosen
            for kind, s in points.select("kind", "solver_set").iter_rows()]
    if whole_pool:
        keep = [k or a for k, a in zip(keep, chose_among_all(points, whole_pool).to_list(), strict=True)]
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
