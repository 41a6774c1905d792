"""`market.workers`: the (domain, bidder) markets in a pool of spawned processes give exactly the
numbers, curves and trajectories of the single-process path, in the same order."""

from __future__ import annotations

import numpy as np

from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.market.answers import solver_matrices
from delegation_lab.market.params import MarketParams
from delegation_lab.market.study import market_parts, run_answers, run_chain, run_markets

from tests.market.test_market_answers import SOLVERS, labeled

SMALL = {
    "seeds": 2,
    "protocols": ["first_price", "ccv"],
    "bidders": ["mirror_descent", "thompson", "truthful"],
    "chain": {"densities": [1, 2], "rounds": 30, "tasks_per_round": 4, "final_rounds": 10,
              "spread_sweep": {"spreads": [0.0, 0.5]}, "other_reading": {"densities": [2]}},
    "answers": {"reward_multiples": [1.0, 10.0], "epochs": 1, "items_per_round": 50},
    "trajectories": {"train_every": 5},
}


def _same(a, b) -> None:
    assert [(w.domain, w.cell, w.seed, w.group, w.multiple, w.cost_spread, w.reading) for w in a.worlds] == \
        [(w.domain, w.cell, w.seed, w.group, w.multiple, w.cost_spread, w.reading) for w in b.worlds]
    for x, y in zip(a.worlds, b.worlds, strict=True):
        assert x.final == y.final and x.bankrupt_agents == y.bankrupt_agents and x.centralised_cost == y.centralised_cost
        assert x.curves.keys() == y.curves.keys()
        for k in x.curves:
            np.testing.assert_array_equal(x.curves[k], y.curves[k])
        for k in x.items:
            np.testing.assert_array_equal(x.items[k], y.items[k])
    assert list(a.trajectories) == list(b.trajectories)
    for key, frame in a.trajectories.items():
        assert frame.equals(b.trajectories[key]), key
    assert a.seconds.keys() == b.seconds.keys() and a.rounds == b.rounds


def test_two_workers_give_the_single_process_results():
    params = MarketParams.model_validate(SMALL, strict=False)
    matrices, n_buckets = solver_matrices(labeled(150, 60), SOLVERS)
    judge = Verifier("judge", 0.1, 0.1)
    chain, answers = run_chain(params), run_answers(params, matrices, n_buckets, SOLVERS, judge)
    arrived = []
    pooled_chain, pooled_answers = run_markets(params, matrices, n_buckets, SOLVERS, judge, 2, on_part=arrived.append)
    _same(chain, pooled_chain)
    _same(answers, pooled_answers)
    # every market reached `on_part` once, in this process
    assert len(arrived) == len(market_parts(params, True)) == 2 * 3
    assert sorted(w.cell for part in arrived for w in part.worlds) == sorted(w.cell for w in chain.worlds + answers.worlds)


def test_parts_cover_each_bidder_once_per_domain():
    params = MarketParams.model_validate(SMALL, strict=False)
    parts = market_parts(params, True)
    assert [p[:2] for p in parts] == [("chain", "mirror_descent"), ("chain", "thompson"), ("chain", "truthful"),
                                      ("answers", "truthful"), ("answers", "thompson"), ("answers", "mirror_descent")]
    assert dict((b, p) for d, b, p in parts if d == "chain")["truthful"] == ["first_price", "ccv"]
    assert [p[0] for p in market_parts(params, False)] == ["chain"] * 3
    off = MarketParams.model_validate({**SMALL, "chain": {"enabled": False}}, strict=False)
    assert [p[0] for p in market_parts(off, True)] == ["answers"] * 3
