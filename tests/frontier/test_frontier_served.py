"""The deployed policies' live rows on the served dataset's frontier (`frontier_served`): accuracy is
the label of the answer each request actually got (matched by solver, item and request hash), cost is
the journal's, repeated conversations are one item, and nothing changes without them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest

from delegation_lab.params.root import FrontierParams
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.frontier.build import BASELINES, DEFAULT_VERIFIER, frontier_with_outcomes
from delegation_lab.frontier.served import served_points
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA
from delegation_lab.serve.journal import DECISIONS_SCHEMA

ITEMS = [f"i{k:02d}" for k in range(30)]


def labeled() -> pl.DataFrame:
    rng = np.random.default_rng(5)
    rows = []
    for solver, (acc, cost) in {"A": (0.9, 3.0), "B": (0.6, 1.0)}.items():
        rows += [{"item_id": i, "solver": solver, "request_hash": f"h-{solver}-{i}", "correct": bool(rng.random() < acc),
                  "cost_usd": cost} for i in ITEMS]
    return pl.DataFrame(rows)


def decision(n: int, model: str, item: str, called: list[str], cost: float, *, status: int = 200, stale: bool = False) -> dict:
    return {"request_id": f"r{n}", "created_at": datetime(2026, 1, 1, tzinfo=UTC), "model": model,
            "policy": model.split(":")[0], "item_id": item, "question": item, "gold": None,
            "answered_by": called[-1] if status == 200 else None, "called": called,
            "request_hashes": [f"h-{s}-{item}" + ("-old" if stale else "") for s in called], "cost_usd": cost,
            "tokens_in": 1, "tokens_out": 1, "latency_s": 0.1, "status": status, "error": None, "decision": "{}"}


def decisions() -> pl.DataFrame:
    rows = [decision(k, "cascade:B>A", i, ["B", "A"] if k % 2 else ["B"], 4.0 if k % 2 else 1.0) for k, i in enumerate(ITEMS[:20])]
    rows += [decision(100, "cascade:B>A", ITEMS[1], ["B"], 1.0)]  # the same conversation again, answered by B this time
    rows += [decision(200 + k, "solver:A", i, ["A"], 3.0) for k, i in enumerate(ITEMS[10:])]
    rows += [decision(300, "solver:A", ITEMS[0], ["A"], 3.0, status=502),  # failed: no answer to grade
             decision(301, "solver:A", ITEMS[1], ["A"], 3.0, stale=True),  # an answer the label stage never graded
             decision(302, "solver:A", "elsewhere", ["A"], 3.0)]  # an item not on the frontier split
    return pl.DataFrame(rows, schema=DECISIONS_SCHEMA)


def test_served_rows_are_the_labels_of_the_answers_given_and_the_journal_costs(tmp_path) -> None:
    lab = labeled()
    correct = {(r["solver"], r["item_id"]): float(r["correct"]) for r in lab.iter_rows(named=True)}
    served = served_points(decisions(), lab, "served", "test", DEFAULT_VERIFIER.name)  # the frontier's main verifier set
    rows = {r["method"]: r for r in served.points.iter_rows(named=True)}
    assert set(rows) == {"served:cascade:B>A", "served:solver:A"}
    assert {r["kind"] for r in rows.values()} == {"served"}
    # the cascade: item i01 was asked twice (answered by A, then by B): one item, the mean of the two
    cascade = {i: correct[("A" if k % 2 else "B", i)] for k, i in enumerate(ITEMS[:20])}
    cascade[ITEMS[1]] = (correct[("A", ITEMS[1])] + correct[("B", ITEMS[1])]) / 2
    assert rows["served:cascade:B>A"]["accuracy"] == pytest.approx(np.mean(list(cascade.values())))
    cost = [4.0 if k % 2 else 1.0 for k in range(20)]
    cost[1] = 2.5
    assert rows["served:cascade:B>A"]["cost_per_item_usd"] == pytest.approx(np.mean(cost))
    assert rows["served:cascade:B>A"]["solver_set"] == "A,B"
    assert rows["served:solver:A"]["accuracy"] == pytest.approx(np.mean([correct[("A", i)] for i in ITEMS[10:]]))
    assert rows["served:solver:A"]["cost_per_item_usd"] == pytest.approx(3.0)
    assert served.report == {"requests_answered": 43, "requests_on_split": 42, "requests_graded": 41,
                             "requests_without_label": 1, "policies": {"served:cascade:B>A": 21, "served:solver:A": 20}}
    assert served.outcomes.filter(pl.col("method") == "served:cascade:B>A").height == 20

    params = FrontierParams(mixture_points=1)
    empty = pl.DataFrame(schema=SUMMARY_SCHEMA)
    table, metrics, outcomes = frontier_with_outcomes(lab, empty, params, "served", served=served)
    bare, bare_metrics, bare_outcomes = frontier_with_outcomes(lab, empty, params, "served")
    mine = table.filter(pl.col("kind") == "served")
    assert mine.height == 2 and mine["accuracy_ci_low"].is_not_null().all()
    assert (mine["accuracy_ci_low"] <= mine["accuracy"]).all() and (mine["accuracy"] <= mine["accuracy_ci_high"]).all()
    assert (mine["cost_ci_low"] <= mine["cost_per_item_usd"]).all()
    # every other row as without them, but the Pareto marks the served rows may take
    assert table.filter(pl.col("kind") != "served").drop("on_pareto").equals(bare.drop("on_pareto"))
    assert metrics["methods"]["served:solver:A"]["kind"] == "served" and "dominated_by" in metrics["methods"]["served:solver:A"]
    assert outcomes.filter(pl.col("method").str.starts_with("served:")).height == 20 + 20
    assert outcomes.height == bare_outcomes.height + 40
    write_outcomes(Layout(tmp_path), BASELINES, outcomes)  # the outcome contract holds with them


def test_no_decisions_no_rows() -> None:
    served = served_points(pl.DataFrame(schema=DECISIONS_SCHEMA), labeled(), "served", "test", "agreement")
    assert served.points.is_empty() and served.outcomes.is_empty() and served.report["requests_answered"] == 0
