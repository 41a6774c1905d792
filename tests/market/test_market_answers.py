"""Domain 2: the market over cached solver answers, on small synthetic label tables."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import torch

from delegation_lab.errors import InputError
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.pipeline.layout import Layout
from delegation_lab.market.answers import AnswersDomain, solver_matrices
from delegation_lab.market.engine import Market
from delegation_lab.market.params import AnswersParams, MarketParams
from delegation_lab.market.report import answers_metrics, outcome_rows, summary_rows
from delegation_lab.market.study import run_answers
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA
from delegation_lab.pipeline.store import write_summaries


def labeled(n_train: int = 400, n_test: int = 200, seed: int = 0) -> pl.DataFrame:
    """Three solvers: `good` always right and dear, `mid` right on easy items, `bad` never right and cheap."""
    rng = np.random.default_rng(seed)
    rows = []
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            d = int(rng.integers(1, 5))
            item = f"{split}{i:04d}"
            for solver, correct, cost in (("good", True, 2e-3), ("mid", d <= 2, 5e-4), ("bad", False, 1e-5)):
                rows.append({"solver": solver, "item_id": item, "split": split, "difficulty": d, "correct": correct, "cost_usd": cost})
    return pl.DataFrame(rows)


SOLVERS = ["good", "mid", "bad"]
GOLD = Verifier("gold")


def test_missing_solver_or_incomplete_labels_are_clear_errors():
    with pytest.raises(InputError, match=r"market.answers.solvers: no labeled answers for \['X'\]"):
        solver_matrices(labeled(20, 10), ["good", "X"])
    broken = labeled(20, 10).filter(~((pl.col("solver") == "mid") & (pl.col("item_id") == "test0003")))
    with pytest.raises(InputError, match="answers are missing"):
        solver_matrices(broken, SOLVERS)


def test_candidates_exclude_solvers_that_already_answered_and_the_verifier_sends_wrong_answers_back():
    matrices, n_buckets = solver_matrices(labeled(20, 10), SOLVERS)
    ap = AnswersParams(verifier={"enabled": True, "max_solves": 3})
    domain = AnswersDomain(matrices, n_buckets, SOLVERS, ap, ["first_price"], [0], GOLD)
    domain.begin("train", 0)
    state = domain.start(0, 4, torch.Generator())
    bad = SOLVERS.index("bad")
    cost, done, ok = domain.act(state, torch.full((domain.cells.__len__(), 4), bad), torch.ones(len(domain.cells), 4, dtype=torch.bool))
    assert not done.any() and not ok.any() and torch.allclose(cost, torch.full_like(cost, 1e-5))  # wrong -> rejected
    agents, valid = domain.candidates(state)
    assert not valid[..., bad].any() and valid[..., SOLVERS.index("good")].all()
    cost, done, ok = domain.act(state, torch.full((len(domain.cells), 4), SOLVERS.index("good")), torch.ones(len(domain.cells), 4, dtype=torch.bool))
    assert done.all() and ok.all() and domain.holds_success(state).all()


def test_market_learns_a_cascade_when_the_reward_pays_for_it():
    """With a perfect verifier the market should answer cheap-first and escalate: near-perfect
    accuracy at far less than always asking the dear solver."""
    params = MarketParams.model_validate(
        {
            "seeds": 2,
            "protocols": ["first_price", "second_price"],
            "bidders": ["mirror_descent", "truthful"],
            "answers": {
                "reward_multiples": [20.0],
                "epochs": 3,
                "items_per_round": 40,
                "verifier": {"max_solves": 3},
            },
            "chain": {"enabled": False},
        },
        strict=False,
    )
    matrices, n_buckets = solver_matrices(labeled(), SOLVERS)
    result = run_answers(params, matrices, n_buckets, SOLVERS, GOLD)
    metrics = answers_metrics(result.worlds)
    for protocol, bidder in (("first_price", "mirror_descent"), ("second_price", "truthful")):
        cell = metrics[protocol][bidder]["R20x"]
        assert cell["accuracy"] > 0.95, (protocol, bidder, cell)
        assert cell["cost_per_item"] < 1.5e-3  # always-good costs 2e-3
        assert 1.0 <= cell["calls_per_item"] <= 3.0
        assert cell["accuracy_ci"][0] <= cell["accuracy"] <= cell["accuracy_ci"][1] and cell["accuracy_ci"][0] < cell["accuracy_ci"][1] + 1e-12
        assert cell["cost_per_item_ci"][0] <= cell["cost_per_item"] <= cell["cost_per_item_ci"][1]
        assert cell["verifier"] == "gold"
    assert metrics["second_price"]["truthful"]["R20x"]["subsidy"] >= 0
    assert metrics["first_price"]["mirror_descent"]["R20x"]["subsidy"] == 0
    # test rows: one per item, learning off
    frame = result.trajectories[("first_price-mirror_descent@R20x", 0)]
    test = frame.filter(pl.col("split") == "test")
    assert test.filter(pl.col("step") == 0).height == 200
    extra = json.loads(test["extra"][0])
    assert extra["seller"] == "consumer" and extra["place"] == "solve1"


def test_summary_rows_fit_the_platform_contract(tmp_path):
    params = MarketParams.model_validate(
        {"seeds": 2, "protocols": ["first_price"], "bidders": ["mirror_descent"],
         "answers": {"reward_multiples": [1.0, 10.0], "epochs": 1, "items_per_round": 100}, "chain": {"enabled": False}},
        strict=False,
    )
    matrices, n_buckets = solver_matrices(labeled(200, 100), SOLVERS)
    judge = Verifier("judge", 0.1, 0.1)
    result = run_answers(params, matrices, n_buckets, SOLVERS, judge)
    rows = summary_rows(result.worlds, {("first_price-mirror_descent", 0): "run-a"}, "synthetic", SOLVERS)
    path = write_summaries(Layout(tmp_path), "market", rows)
    table = pl.read_parquet(path)
    assert set(table["verifier"]) == {judge.name}
    # item-level outcomes: for every summary row, its items, whose means are the row's accuracy and cost
    outcomes = pl.read_parquet(write_outcomes(Layout(tmp_path), "market", outcome_rows(result.worlds, "synthetic")))
    per_row = outcomes.group_by("method", "operating_point", "seed").agg(
        pl.col("correct").mean().alias("acc"), pl.col("cost_usd").mean().alias("cost"), pl.len().alias("n"))
    joined = table.join(per_row, on=["method", "operating_point", "seed"], how="inner")
    assert joined.height == table.height
    assert (joined["n"] == joined["n_items"]).all()
    assert np.allclose(joined["acc"], joined["accuracy"]) and np.allclose(joined["cost"], joined["cost_per_item_usd"], rtol=1e-5)
    assert list(table.columns) == list(SUMMARY_SCHEMA) and table.height == 4
    assert set(table["operating_point"]) == {"R1x", "R10x"} and set(table["split"]) == {"test"}
    runs = pl.read_parquet(Layout(tmp_path).runs("market"))  # run ids live in the run index, not the summaries
    assert runs["seed"].to_list() == [0, 0] and runs["run_id"].to_list() == ["run-a", "run-a"]
    assert ((table["accuracy"] >= 0) & (table["accuracy"] <= 1)).all() and (table["n_items"] == 100).all()


def test_without_verifier_every_item_is_answered_once():
    params = MarketParams.model_validate(
        {"seeds": 1, "protocols": ["ccv"], "bidders": ["truthful"], "chain": {"enabled": False},
         "answers": {"reward_multiples": [5.0], "epochs": 1, "items_per_round": 50, "verifier": {"enabled": False}}},
        strict=False,
    )
    matrices, n_buckets = solver_matrices(labeled(100, 50), SOLVERS)
    domain = AnswersDomain(matrices, n_buckets, SOLVERS, params.answers, ["ccv"], [0], GOLD)
    market = Market(domain, domain.worlds(), "truthful", params)
    domain.begin("test", 0)
    log = market.play(0, 50, 0.0, 0.0)
    assert len(log.steps) <= 1 and float(log.calls.max()) <= 1.0
