"""The frontier's baselines write item-level outcomes in the studies' contract, so the dashboard's
Compare page pairs any two frontier points (e.g. a cascade with a study's method)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from dashboards import paired
from delegation_lab.params.root import FrontierParams
from delegation_lab.evaluation import IntervalParams
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.frontier.build import BASELINES, build_frontier, frontier_with_outcomes
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA, SUMMARY_SCHEMA
from delegation_lab.pipeline.tables import read_outcomes

ITEMS = [f"i{k:02d}" for k in range(40)]


def labeled() -> pl.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for solver, (acc, cost) in {"A": (0.9, 3.0), "B": (0.7, 1.0), "C": (0.4, 0.1)}.items():
        rows += [{"item_id": i, "solver": solver, "correct": bool(rng.random() < acc), "cost_usd": cost} for i in ITEMS]
    return pl.DataFrame(rows)


def study_outcomes() -> pl.DataFrame:
    return pl.DataFrame([{"study": "s", "method": "m", "operating_point": "lambda=10", "seed": seed, "split": "test",
                          "dataset": "x", "verifier": "judge", "item_id": i, "correct": float(k % 3 != seed),
                          "cost_usd": 0.5} for seed in (0, 1) for k, i in enumerate(ITEMS)], schema=OUTCOME_SCHEMA)


def test_baseline_outcomes_reproduce_every_baseline_point(tmp_path) -> None:
    params = FrontierParams(mixture_points=2, cascade={"seeds": 3})
    empty = pl.DataFrame(schema=SUMMARY_SCHEMA)
    table, metrics, outcomes = frontier_with_outcomes(labeled(), empty, params, "x")
    alone, alone_metrics = build_frontier(labeled(), empty, params, "x")
    assert table.equals(alone) and metrics == alone_metrics  # the same frontier, with or without the outcomes
    assert outcomes.schema == pl.Schema(OUTCOME_SCHEMA)
    assert set(outcomes["study"]) == {BASELINES} and set(outcomes["split"]) == {params.split}
    baselines = table.filter(pl.col("study") == BASELINES)
    assert outcomes.select("method", "operating_point").unique().height == baselines.height
    per_point = outcomes.group_by("method", "operating_point").agg(
        pl.col("correct").mean().alias("acc"), pl.col("cost_usd").mean().alias("cost"), pl.col("seed").n_unique().alias("seeds"),
        pl.len().alias("rows"))
    both = baselines.join(per_point, on=["method", "operating_point"])
    assert both.height == baselines.height
    assert both["acc"].to_numpy() == pytest.approx(both["accuracy"].to_numpy())
    assert both["cost"].to_numpy() == pytest.approx(both["cost_per_item_usd"].to_numpy())
    assert (both["rows"] == both["seeds"] * len(ITEMS)).all()
    assert both.filter(pl.col("kind") == "cascade")["seeds"].to_list() == [3] * both.filter(pl.col("kind") == "cascade").height
    write_outcomes(Layout(tmp_path), BASELINES, outcomes)  # the contract's checks: no duplicate key, one study
    assert read_outcomes(Layout(tmp_path)).height == outcomes.height


def test_compare_pairs_a_cascade_with_a_study_point() -> None:
    params = FrontierParams(mixture_points=1, cascade={"seeds": 2})
    _, _, outcomes = frontier_with_outcomes(labeled(), pl.DataFrame(schema=SUMMARY_SCHEMA), params, "x")
    cascade = outcomes.filter(pl.col("method") == "cascade:B>A")
    assert cascade.height == 2 * len(ITEMS)
    result = paired.compare(cascade, study_outcomes(), IntervalParams(resamples=200))
    assert result is not None and result.n_items == len(ITEMS)
    acc = result.summary.row(0, named=True)
    assert acc["A − B"] == pytest.approx(cascade["correct"].mean() - study_outcomes()["correct"].mean())
    assert acc["low"] <= acc["A − B"] <= acc["high"]
