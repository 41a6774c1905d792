"""Dominance and vs_best_single under the tie tolerances (`evaluation.ties`): a study point equal to a
single solver within 1e-11 dollars ties it; it is not "not dominated, +0.6 vs a cheaper model"."""

from __future__ import annotations

import numpy as np
import polars as pl

from delegation_lab.evaluation import IntervalParams
from delegation_lab.evaluation.params import TieParams
from delegation_lab.frontier.build import build_frontier, dominating_baseline, tying_baseline
from delegation_lab.params.root import FrontierParams
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA, SUMMARY_SCHEMA
from delegation_lab.pipeline.tables import with_outcome_columns

N = 200


def nested(n: int = N, seed: int = 0) -> pl.DataFrame:
    """A right wherever B or C is: no cascade reaches A's accuracy for less (each costs more than A)."""
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    rows = []
    for solver, p, price in [("A", 0.9, 1.0), ("B", 0.3, 0.5), ("C", 0.1, 0.2)]:
        rows += [{"item_id": f"i{k:04d}", "solver": solver, "correct": bool(u[k] < p), "cost_usd": price} for k in range(n)]
    return pl.DataFrame(rows)


def always_a_study(labeled: pl.DataFrame, shave: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A study that answers with A on every item and costs `shave` dollars less per item (a float sum)."""
    a = labeled.filter(pl.col("solver") == "A").sort("item_id")
    outcomes = pl.concat([a.select(
        pl.lit("market").alias("study"), pl.lit("bidders").alias("method"), pl.lit("default").alias("operating_point"),
        pl.lit(seed, dtype=pl.Int64).alias("seed"), pl.lit("test").alias("split"), pl.lit("x").alias("dataset"),
        pl.lit("gold").alias("verifier"), "item_id", pl.col("correct").cast(pl.Float64), pl.col("cost_usd") - shave)
        for seed in (0, 1)]).pipe(with_outcome_columns).select(list(OUTCOME_SCHEMA))
    summaries = pl.DataFrame([
        {"study": "market", "method": "bidders", "seed": seed, "split": "test", "operating_point": "default",
         "accuracy": float(a["correct"].mean()), "cost_per_item_usd": float(a["cost_usd"].mean()) - shave,
         "calls_per_item": 1.0, "return": None, "n_items": a.height, "dataset": "x", "solver_set": "A", "run_id": None,
         "verifier": "gold"} for seed in (0, 1)], schema=SUMMARY_SCHEMA)
    return summaries, outcomes


def test_a_point_equal_to_a_single_solver_ties_it():
    from delegation_lab.evaluation import Verifier

    labeled = nested()
    summaries, outcomes = always_a_study(labeled, 1e-11)
    _, metrics = build_frontier(labeled, summaries, FrontierParams(mixture_points=1, cascade={"seeds": 1}), "x",
                                verifier=Verifier("gold"), outcomes=outcomes, intervals=IntervalParams(resamples=200))
    m = metrics["methods"]["market/bidders"]
    assert m["dominated_by"] is None and m["ties_with"] == "always-A"
    test = m["vs_best_single"]
    assert test["against"] == "always-A"  # not always-B, cheaper by $0.5 and 0.6 less accurate
    assert test["tie"] is True and test["difference"] == 0.0 and test["p_value"] == 1.0


def test_without_tolerance_the_same_point_is_compared_with_a_cheaper_model():
    from delegation_lab.evaluation import Verifier

    labeled = nested()
    summaries, outcomes = always_a_study(labeled, 1e-11)
    _, metrics = build_frontier(labeled, summaries, FrontierParams(mixture_points=1, cascade={"seeds": 1}), "x",
                                verifier=Verifier("gold"), outcomes=outcomes, intervals=IntervalParams(resamples=200),
                                ties=TieParams(cost_usd=0.0, accuracy_items=0.0))
    m = metrics["methods"]["market/bidders"]
    assert m["ties_with"] is None and m["vs_best_single"]["against"] == "always-B"
    assert m["vs_best_single"]["difference"] > 0.5 and m["vs_best_single"]["p_value"] == 0.0


def test_dominance_with_tolerance():
    n, ties = 100, TieParams()  # $1e-9 per item, half an item (0.005 of accuracy on 100 items)
    best = {"cost_per_item_usd": 0.02, "accuracy": 0.80}

    def table(cost: float, acc: float) -> pl.DataFrame:
        return pl.DataFrame({"study": ["baselines"], "method": ["always-X"], "operating_point": ["default"],
                             "kind": ["single"], "cost_per_item_usd": [cost], "accuracy": [acc]})

    # costs 5e-10 more (a tie on cost) and is two items more accurate: dominates
    assert dominating_baseline(best, table(0.02 + 5e-10, 0.82), ties, n) is not None
    # equal within both tolerances: a tie, no domination
    assert dominating_baseline(best, table(0.02 + 5e-10, 0.80), ties, n) is None
    assert tying_baseline(best, table(0.02 + 5e-10, 0.80), ties, n) is not None
    # cheaper by a real margin, accuracy lower by under half an item (float noise of a mean): dominates
    assert dominating_baseline(best, table(0.019, 0.80 - 0.004), ties, n) is not None
    # costs more beyond the tolerance: never dominates, however accurate
    assert dominating_baseline(best, table(0.02 + 2e-9, 0.95), ties, n) is None
    # one item less accurate, even if cheaper: no domination and no tie
    assert dominating_baseline(best, table(0.01, 0.79), ties, n) is None
    assert tying_baseline(best, table(0.01, 0.79), ties, n) is None
