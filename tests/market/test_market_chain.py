"""Domain 1 (chain translation): params validation, the graph, and the paper's claims at small scale."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import yaml

from delegation_lab.params.root import parse_params
from delegation_lab.errors import ConfigError
from delegation_lab.market.chain import ChainDomain
from delegation_lab.market.params import ChainParams, MarketParams, market_cells
from delegation_lab.market.report import chain_metrics
from delegation_lab.market.study import run_chain
from delegation_lab.reporting.paper import paper_vs_ours

from tests.conftest import REPO

RAW = yaml.safe_load((REPO / "params.yaml").read_text())


def problems(mutate) -> list[str]:
    raw = copy.deepcopy(RAW)
    mutate(raw["market"])
    with pytest.raises(ConfigError) as err:
        parse_params(raw)
    return err.value.problems


@pytest.mark.parametrize(
    ("mutate", "key", "words"),
    [
        (
            lambda m: m["chain"]["graph"].update(edges=[e for e in m["chain"]["graph"]["edges"] if e["dst"] != "Ko"]),
            "market.chain.graph",
            "'Ko' is unreachable from the source 'Fr'",
        ),
        (lambda m: m["chain"]["graph"]["edges"][1].update(cost=-0.01), "market.chain.graph.edges.1.cost", "greater than or equal to 0"),
        (lambda m: m["chain"].update(densities=[0, 2]), "market.chain.densities.0", "greater than or equal to 1"),
        (lambda m: m.update(protocols=["first_price", "dutch"]), "market.protocols.1", "'first_price', 'second_price' or 'ccv'"),
        (lambda m: m.update(bidders=["mirror_descent", "greedy"]), "market.bidders.1", "'mirror_descent'"),
        (lambda m: m["chain"]["graph"]["edges"].append({"src": "Fr", "dst": "Sp", "cost": 0.2}), "market.chain.graph", "duplicate edge Fr->Sp"),
        (lambda m: m["chain"].update(max_steps=2), "market.chain", "max_steps (2) is below the 3 hops from 'Fr' to 'Ja'"),
        (lambda m: m.update(protocols=["ccv"], bidders=["ppo"]), "market", "no cell runs"),
    ],
)
def test_bad_market_params_name_the_key(mutate, key, words):
    found = problems(mutate)
    assert any(p.startswith(key) and words in p for p in found), found


def test_cells_pair_shading_bidders_with_first_price_and_truthful_with_every_protocol():
    cells = market_cells(["first_price", "second_price", "ccv"], ["mirror_descent", "truthful"])
    assert cells == [("first_price", "mirror_descent"), ("first_price", "truthful"), ("second_price", "truthful"), ("ccv", "truthful")]


def test_default_graph_has_the_papers_routes_and_monopsonies():
    domain = ChainDomain(ChainParams(densities=[1, 3]), ["first_price"], [0])
    assert domain.optimal_route_cost() == pytest.approx({"Ko": 0.04, "Ja": 0.04})
    # agents of each edge: N of them, costs spread from c to c (1 + cost_spread)
    fr_en = [a for a, n in enumerate(domain.agent_names) if n.startswith("Fr>En")]
    costs = domain.agent_cost[:, fr_en]
    assert costs[0].tolist()[:1] == pytest.approx([0.5]) and not domain.exists[0, fr_en[1]]
    assert costs[1].tolist() == pytest.approx([0.5, 0.55, 0.6])
    # candidates: at Sp only Sp->En agents (a structural monopsony when N = 1)
    state = domain.start(0, 3, torch.Generator().manual_seed(0))
    state.node[:] = domain.lang_index["Sp"]
    agents, valid = domain.candidates(state)
    names = {domain.agent_names[a] for a, v in zip(agents[0, 0].tolist(), valid[0, 0].tolist(), strict=True) if v}
    assert names == {"Sp>En#0"}
    assert domain.features(state).shape == (2, 3, 128)  # 64-dim task + 64-dim language embedding


@pytest.fixture(scope="module")
def mini_sweep():
    params = MarketParams.model_validate(
        {
            "seeds": 2,
            "protocols": ["first_price", "second_price", "ccv"],
            "bidders": ["mirror_descent", "truthful"],
            "chain": {"densities": [1, 2]},  # default rounds: the collapse takes the full run
            "answers": {"enabled": False},
        },
        strict=False,
    )
    result = run_chain(params, record_every=50)
    return params, result, chain_metrics(result.worlds)


def test_monopsony_collapses_ccv_and_first_price_and_vickrey_needs_a_subsidy(mini_sweep):
    _, _, m = mini_sweep
    assert m["ccv"]["truthful"]["N1"]["success"] < 0.2 and m["ccv"]["truthful"]["N1"]["subsidy"] == 0.0
    assert m["first_price"]["mirror_descent"]["N1"]["success"] < 0.5
    vickrey = m["second_price"]["truthful"]["N1"]
    assert vickrey["success"] > 0.9 and vickrey["subsidy"] > 0.5 and vickrey["subsidy_at"]["Sp"] > 0.5
    assert m["second_price"]["truthful"]["N1"]["price"]["Sp"] == pytest.approx(0.0, abs=0.02)  # the monopsonist pays the floor


def test_imperfect_competition_restores_the_cheap_route_with_positive_margins(mini_sweep):
    _, _, m = mini_sweep
    md = m["first_price"]["mirror_descent"]["N2"]
    assert md["success"] > 0.8 and md["margin"] > 0 and md["subsidy"] == 0.0
    assert 0.04 <= md["route_cost"] < 0.05  # Fr->Sp->En->Ko at $0.04, up to 20 % dearer clones
    assert md["optimal_route"] > 0.9  # at the edges' base costs, tasks take a cheapest route
    assert m["ccv"]["truthful"]["N2"]["success"] > 0.8
    assert abs(m["first_price"]["truthful"]["N2"]["margin"]) < 0.02  # truthful 1st-price: zero profit


def test_metrics_layout_and_paper_pairing(mini_sweep):
    params, result, m = mini_sweep
    for protocol, bidder in market_cells(list(params.protocols), list(params.bidders)):
        for n in (1, 2):
            cell = m[protocol][bidder][f"N{n}"]
            assert {"success", "route_cost", "margin", "bankruptcies", "subsidy"} <= set(cell)
    rows = {r["metric"]: r for r in paper_vs_ours({"chain": m})}
    assert rows["chain.first_price.mirror_descent.N2.route_cost"]["paper"] == 0.04
    assert rows["chain.first_price.mirror_descent.N2.route_cost"]["ours"] == m["first_price"]["mirror_descent"]["N2"]["route_cost"]
    assert rows["chain.second_price.truthful.N1.subsidy_at.Sp"]["paper"] == 0.88
    assert rows["chain.ccv.truthful.N1.success"]["ours"] is not None


def test_trajectory_rows_describe_each_auction(mini_sweep):
    _, result, _ = mini_sweep
    frame = result.trajectories[("chain-first_price-mirror_descent-N2", 0)]
    import json

    assert frame["step"].min() == 0 and set(frame["split"].unique()) == {"train"}
    extra = [json.loads(e) for e in frame["extra"].head(200)]
    assert {"place", "seller", "bids", "b1", "b2", "paid", "seller_received", "subsidy", "utility"} <= set(extra[0])
    first = [e for e in extra if e["seller"] == "consumer"]
    assert first and all(e["place"] == "Fr" for e in first)
    sold = frame.filter(frame["calls"] == 1)
    assert (np.array([len(x) for x in sold["executors"].to_list()]) == 1).all()
    # the final rounds are always written; training rounds every 50th
    episodes = frame["episode"].unique().to_numpy() // 8
    assert set(episodes) >= set(range(450, 500))
