"""Routers as a portfolio arrangement (`delegation_lab.portfolio.routers`): one kNN fit on all models
routes any k-set exactly as a kNN router fitted on those k models; a router is chosen on out-of-fold
routing of the selection split and wins where it is cheaper than the cascade at the same accuracy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from delegation_lab.params.root import PortfolioParams
from delegation_lab.errors import ConfigError
from delegation_lab.portfolio.selection import build_portfolio
from delegation_lab.portfolio.report import portfolio_table
from delegation_lab.portfolio.routers import fit_predict
from delegation_lab.routers import build_router
from delegation_lab.routers.base import Inputs
from delegation_lab.routers.params import KnnParams

from tests.portfolio.test_portfolio import GOLD, params, table

EXACT_KNN = KnnParams(k=3, search_dim=4, cells=0)


def with_knn(p, **portfolio):
    routers = p.routers.model_copy(update={"knn": EXACT_KNN})
    return p.model_copy(update={"routers": routers, "portfolio": PortfolioParams(**{"max_k": 3, **portfolio})})


def embeddings(noise: float = 0.05) -> pl.DataFrame:
    """Items 0-9 of each split near one direction, 10-19 near another: the split `a` / `b` are right on."""
    rng = np.random.default_rng(0)
    rows = []
    for split in ("train", "test"):
        for i in range(20):
            v = np.zeros(8)
            v[0 if i < 10 else 1] = 1.0
            v += noise * rng.standard_normal(8)
            rows.append({"item_id": f"{split}{i:02d}", "vector": (v / np.linalg.norm(v)).tolist()})
    return pl.DataFrame(rows)


def test_one_fit_on_all_models_routes_a_k_set_as_a_router_fitted_on_it():
    rng = np.random.default_rng(1)
    n, s = 80, 5
    x = rng.standard_normal((n, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    correct, cost = rng.random((n, s)) < rng.random(s), rng.random((n, s)) * rng.uniform(1, 30, s)
    solvers = [f"m{j}" for j in range(s)]
    from delegation_lab.frontier.baselines import SolverMatrix

    m = SolverMatrix(solvers, correct, cost)
    p = with_knn(params())
    fit, new = np.arange(60), x[60:]
    pred = fit_predict(p, x, m, fit, new)
    for members in [(0, 3), (1, 2, 4), (4, 0, 2, 1)]:
        cols = list(members)
        alone = build_router("knn", p.routers, [solvers[c] for c in cols])
        alone.fit(Inputs(x[fit], np.zeros((0, 0))), correct[fit][:, cols], cost[fit][:, cols], p.routers.seed)
        for lam in (0.0, 0.2, 1.6):
            chosen, _, _ = alone.route(Inputs(new, np.zeros((0, 0))), lam)
            assert pred.route(members, lam).tolist() == np.asarray(cols)[chosen].tolist(), (members, lam)


def test_a_router_wins_where_it_is_as_accurate_as_the_cascade_and_cheaper():
    out = build_portfolio(table(), with_knn(params()), GOLD, embeddings())
    two = out["portfolios"]["2"]
    # a is right on the first half, b on the second; the embedding tells them apart: routing pays
    # a or b once (mean 3.0), the cascade a > b pays a always and b on half (3.5)
    assert two["arrangement"] == "router" and sorted(two["models"]) == ["a", "b"]
    assert two["accuracy"] == pytest.approx(1.0) and two["cost_per_item_usd"] == pytest.approx(3.0)
    assert two["router"] == "knn" and two["knob"] in out["router"]["knobs"]
    cascade = two["by_arrangement"]["cascade"]
    assert cascade["models"] == ["a", "b"] and cascade["cost_per_item_usd"] == pytest.approx(3.5)
    assert two["candidates"] == cascade["candidates"] + two["by_arrangement"]["router"]["candidates"]
    assert "router knn lambda=" in portfolio_table(out)
    assert "router" not in out["portfolios"]["1"]["by_arrangement"]


def test_routers_are_chosen_without_the_reported_split():
    chosen = build_portfolio(table(), with_knn(params()), GOLD, embeddings())["portfolios"]
    flipped = build_portfolio(table(flip_test=True), with_knn(params()), GOLD, embeddings())["portfolios"]
    for k in chosen:
        assert (flipped[k]["models"], flipped[k]["arrangement"], flipped[k].get("knob")) == \
            (chosen[k]["models"], chosen[k]["arrangement"], chosen[k].get("knob"))
        assert flipped[k]["select_accuracy"] == chosen[k]["select_accuracy"]
    assert flipped["2"]["accuracy"] == pytest.approx(0.0)  # routed to the model that is now wrong there


def test_no_router_and_missing_embeddings():
    plain = build_portfolio(table(), with_knn(params(), router=None), GOLD, embeddings())
    assert plain["router"] is None and all(p["arrangement"] != "router" for p in plain["portfolios"].values())
    assert set(plain["portfolios"]["2"]["by_arrangement"]) == {"cascade"}
    no_test = embeddings().filter(pl.col("item_id").str.starts_with("train"))
    with pytest.raises(ConfigError, match="portfolio.router: 20 item.* split 'test' have no embedding.*embed.splits"):
        build_portfolio(table(), with_knn(params()), GOLD, no_test)
