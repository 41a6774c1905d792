"""Issue 17's market controls: the other reading of the belief bidders, per-market cost spreads, the
centralised planner, the spread sweep's metrics, the edges' sources and the provenance block."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import yaml

from delegation_lab.params.root import parse_params
from delegation_lab.errors import ConfigError
from delegation_lab.market.bidders import ShadeSamples, make_bidder
from delegation_lab.market.bidders.base import logit
from delegation_lab.market.chain import ChainCell, ChainDomain
from delegation_lab.market.networks import Heads
from delegation_lab.market.params import ChainParams, MarketParams
from delegation_lab.market.report import centralised_metrics, chain_metrics, market_provenance, spread_sweep_metrics
from delegation_lab.market.study import WorldResult, chain_cells
from delegation_lab.reporting.paper import paper_vs_ours

from tests.conftest import REPO

RAW = yaml.safe_load((REPO / "params.yaml").read_text())
PARAMS = MarketParams()


def heads(shape=(1, 1, 1)) -> Heads:
    z = torch.zeros(shape)
    return Heads(torch.full(shape, 0.8), torch.full(shape, 0.1), z.clone().requires_grad_(True), z.clone().requires_grad_(True))


def samples(won: bool, rival: float, shape=(1, 1, 1)) -> ShadeSamples:
    return ShadeSamples(
        agent=torch.zeros(shape, dtype=torch.long), bid=torch.ones(shape, dtype=torch.bool), won=torch.full(shape, won),
        xi=torch.full(shape, 0.5), z=torch.zeros(shape), logp=torch.zeros(shape), valuation=torch.full(shape, 0.8),
        rival=torch.full(shape, rival), utility=torch.zeros(shape),
    )


@pytest.mark.parametrize("name", ["thompson", "bayes_optimal"])
def test_win_loss_reading_learns_from_the_outcome_alone(name):
    bidder = make_bidder(name, PARAMS, n_worlds=1, n_agents=1, device="cpu", win_loss=torch.tensor([True]))
    grads = {}
    for won in (True, False):
        for rival in (0.1, 0.7):
            h = heads()
            bidder.shade_loss(h, samples(won, rival)).sum().backward()
            grads[(won, rival)] = float(h.s1.grad)
    # the rival's bid is never seen: only the outcome moves the belief
    assert grads[(True, 0.1)] == grads[(True, 0.7)] and grads[(False, 0.1)] == grads[(False, 0.7)]
    # a win at xi says the critical shade is below it (descent lowers mu); a loss says above
    assert grads[(True, 0.1)] > 0 > grads[(False, 0.1)]


def test_readings_are_chosen_per_market():
    bidder = make_bidder("thompson", PARAMS, n_worlds=2, n_agents=1, device="cpu", win_loss=torch.tensor([False, True]))
    h = heads(shape=(2, 1, 1))
    loss = bidder.shade_loss(h, samples(True, 0.2, shape=(2, 1, 1))).detach()
    mu, sigma = (t.detach() for t in bidder.belief(h))
    rival_nll = 0.5 * ((logit(torch.tensor(0.25)) - mu[0]) / sigma[0]) ** 2 + torch.log(sigma[0])
    probit = -torch.special.log_ndtr((logit(torch.tensor(0.5)) - mu[1]) / sigma[1])
    assert float(loss[0]) == pytest.approx(float(rival_nll)) and float(loss[1]) == pytest.approx(float(probit))
    # the params' reading is the default for every market
    default = make_bidder("thompson", PARAMS.model_copy(update={"thompson": PARAMS.thompson.model_copy(update={"reading": "win_loss"})}), 2, 1, "cpu")
    assert bool(default.win_loss.all())


def test_cost_spread_is_per_market_and_the_planner_pays_the_cheapest_route():
    cells = [ChainCell("first_price", 2, 0, 0.0), ChainCell("first_price", 2, 0, 1.0), ChainCell("first_price", 1, 0, 0.2)]
    domain = ChainDomain(ChainParams(), ["first_price"], [0], cells=cells)
    fr_en = [a for a, n in enumerate(domain.agent_names) if n.startswith("Fr>En")]
    assert domain.agent_cost[0, fr_en].tolist() == pytest.approx([0.5, 0.5])  # perfect clones
    assert domain.agent_cost[1, fr_en].tolist() == pytest.approx([0.5, 1.0])
    planner = domain.centralised_route_cost()
    assert planner.shape == (3, ChainParams().n_tasks) and torch.allclose(planner, torch.full_like(planner, 0.04))
    # without the cheap Fr->Sp edge the planner must pay the direct $0.50 edge
    edges = [e for e in ChainParams().graph.edges if (e.src, e.dst) != ("Fr", "Sp")]
    graph = ChainParams().graph.model_copy(update={"edges": edges})
    dear = ChainDomain(ChainParams(graph=graph), ["first_price"], [0], cells=cells[:1]).centralised_route_cost()
    assert float(dear.min()) == pytest.approx(0.52)  # Fr->En 0.50 + En->Ko 0.02 (Ja: + Ge 0.01 + Ja 0.01)


def test_chain_cells_batch_the_sweep_and_the_other_reading_with_the_density_sweep():
    params = MarketParams()
    seeds = [0, 1]
    md = chain_cells(params, "mirror_descent", ["first_price"], seeds)
    sweep = params.chain.spread_sweep
    assert sum(c.group == "spread" for c in md) == len(sweep.spreads) * 2
    assert {c.cost_spread for c in md if c.group == "spread"} == set(sweep.spreads)
    assert all(c.density == sweep.density for c in md if c.group == "spread")
    ts = chain_cells(params, "thompson", ["first_price"], seeds)
    assert {c.reading for c in ts if c.group == "main"} == {"rival_bid"}
    assert {c.reading for c in ts if c.group == "other_reading"} == {"win_loss"}
    assert not [c for c in chain_cells(params, "truthful", ["ccv"], seeds) if c.group != "main"]


def world(seed: int, group: str = "main", spread: float = 0.2, success: float = 1.0, margin: float | None = 0.1) -> WorldResult:
    w = WorldResult("chain", "first_price", "mirror_descent", seed, density=2, cost_spread=spread, group=group, centralised_cost=0.04)
    w.final = {
        "success": success, "route_cost": 0.044, "optimal_route": 1.0, "margin": margin, "subsidy": 0.0, "consumer_pays": 0.3,
        "cost_per_task": 0.044 * success, "auctions_per_task": 3.0, "welfare": success - 0.044 * success, "price": {}, "subsidy_at": {},
    }
    return w


def test_spread_sweep_and_centralised_metrics_carry_intervals():
    worlds = [world(s) for s in range(3)] + [world(s, "spread", 0.0, margin=0.02 * (s + 1)) for s in range(3)] + [world(s, "spread", 0.05) for s in range(3)]
    sweep = spread_sweep_metrics(worlds)
    assert set(sweep) == {"protocol", "bidder", "density", "s0", "s5"}
    assert sweep["s0"]["margin"] == pytest.approx(0.04) and sweep["s0"]["margin_ci"][0] < 0.04 < sweep["s0"]["margin_ci"][1]
    central = centralised_metrics(worlds, reward=1.0)
    assert central["route_cost"] == pytest.approx(0.04) and central["welfare"] == pytest.approx(0.96)
    gap = central["welfare_gap"]["first_price"]["mirror_descent"]["N2"]
    assert gap["mean"] == pytest.approx(0.96 - (1 - 0.044)) and len(gap["ci"]) == 2
    # a market without any sale has no margin: left out of the mean, not counted as 0
    assert spread_sweep_metrics([world(0, "spread", margin=None), world(1, "spread", margin=0.2)])["s20"]["margin"] == pytest.approx(0.2)


def test_every_paper_row_has_an_audited_provenance():
    worlds = [world(s) for s in range(2)]
    metrics = {"chain": chain_metrics(worlds, 0.95, ChainParams().graph, 1.0)}
    edges = metrics["chain"]["graph"]["edges"]
    assert edges["Fr_En"] == {"cost": 0.5, "source": "paper"} and edges["Ge_Ja"]["source"] == "ours"
    metrics["provenance"] = market_provenance(metrics)
    rows = {r["metric"]: r for r in paper_vs_ours(metrics)}
    assert set(metrics["provenance"]) == set(rows)
    kinds = {k: v["kind"] for k, v in metrics["provenance"].items()}
    assert kinds["chain.graph.edges.Fr_En.cost"] == "calibrated" and kinds["chain.graph.optimal_route_cost.Ko"] == "calibrated"
    assert kinds["chain.first_price.mirror_descent.N2.route_cost"] == "calibrated"
    assert kinds["chain.first_price.mirror_descent.N2.subsidy"] == "setting"
    assert kinds["chain.first_price.mirror_descent.N2.success"] == "computed"
    assert rows["chain.graph.paths.Fr_Sp_En"]["ours"] == pytest.approx(0.02)


@pytest.mark.parametrize(
    ("mutate", "key", "words"),
    [
        (lambda m: m["chain"]["spread_sweep"].update(spreads=[0.0, 0.125]), "market.chain.spread_sweep", "not a multiple of 0.01"),
        (lambda m: m["chain"]["spread_sweep"].update(protocol="ccv"), "market.chain.spread_sweep", "first_price only"),
        (lambda m: m["chain"]["spread_sweep"].update(density=1), "market.chain.spread_sweep.density", "greater than or equal to 2"),
        (lambda m: m["chain"]["graph"]["edges"][0].update(source="book"), "market.chain.graph.edges.0.source", "'paper', 'derived' or 'ours'"),
        (lambda m: m.setdefault("thompson", {}).update(reading="bids"), "market.thompson.reading", "'rival_bid' or 'win_loss'"),
    ],
)
def test_bad_control_params_name_the_key(mutate, key, words):
    raw = copy.deepcopy(RAW)
    mutate(raw["market"])
    with pytest.raises(ConfigError) as err:
        parse_params(raw)
    assert any(key in p and words in p for p in err.value.problems), err.value.problems


def test_spread_keys_are_doc_span_safe():
    assert all("." not in k for k in spread_sweep_metrics([world(0, "spread", s) for s in (0.0, 0.02, 1.0)]))
    assert np.isfinite(MarketParams().chain.spread_sweep.spreads).all()
