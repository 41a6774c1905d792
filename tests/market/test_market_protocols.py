"""Auction clearing against a plain-Python specification, and money conservation over random markets."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delegation_lab.market.chain import ChainDomain
from delegation_lab.market.engine import Market
from delegation_lab.market.params import BIDDERS, PROTOCOLS, ChainParams, MarketParams
from delegation_lab.market.protocols import PROTOCOL_CODES, clear, clear_reference


def clear_one(bids: list[float | None], protocol: str, gamma: float = 1.0):
    bidding = torch.tensor([[b is not None for b in bids]])
    values = torch.tensor([[b if b is not None else 0.0 for b in bids]], dtype=torch.float64)
    return clear(values, bidding, torch.tensor(PROTOCOL_CODES[protocol]), gamma)


@pytest.mark.parametrize(
    ("protocol", "pays", "gets", "subsidy"),
    [("first_price", 0.9, 0.9, 0.0), ("second_price", 0.5, 0.9, 0.4), ("ccv", 0.5, 0.5, 0.0)],
)
def test_the_three_protocols_on_one_auction(protocol, pays, gets, subsidy):
    c = clear_one([0.5, 0.9, None, 0.2], protocol)
    assert int(c.winner) == 1 and bool(c.sold)
    assert float(c.buyer_pays) == pytest.approx(pays)
    assert float(c.seller_gets) == pytest.approx(gets)
    assert float(c.subsidy) == pytest.approx(subsidy)


def test_a_monopsonist_pays_the_floor_under_vickrey_and_the_platform_pays_the_seller():
    vickrey = clear_one([None, 0.88], "second_price")
    assert float(vickrey.buyer_pays) == 0.0 and float(vickrey.seller_gets) == pytest.approx(0.88)
    assert float(vickrey.subsidy) == pytest.approx(0.88)
    ccv = clear_one([None, 0.88], "ccv")
    assert float(ccv.buyer_pays) == 0.0 and float(ccv.seller_gets) == 0.0  # CCV passes nothing upstream


def test_no_bidder_clears_nothing_and_discount_is_kept_by_the_platform():
    c = clear_one([None, None], "first_price")
    assert int(c.winner) == -1 and not bool(c.sold) and float(c.buyer_pays) == 0.0 and float(c.seller_gets) == 0.0
    d = clear_one([0.4, 0.8], "first_price", gamma=0.9)
    assert float(d.seller_gets) == pytest.approx(0.72) and float(d.subsidy) == pytest.approx(-0.08)


def test_ties_follow_the_tie_break_key():
    bids = torch.tensor([[0.7, 0.7, 0.1]])
    bidding = torch.ones(1, 3, dtype=torch.bool)
    first = clear(bids, bidding, torch.tensor(0), 1.0, tie_break=torch.tensor([[0.1, 0.9, 0.5]]))
    assert int(first.winner) == 1 and float(first.b2) == pytest.approx(0.7)
    default = clear(bids, bidding, torch.tensor(0), 1.0)
    assert int(default.winner) == 0


bid_lists = st.lists(st.one_of(st.none(), st.floats(0.0, 2.0, allow_nan=False)), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(bid_lists, min_size=1, max_size=8), st.sampled_from(PROTOCOLS), st.floats(0.5, 1.0))
def test_batched_clearing_matches_the_specification(batch, protocol, gamma):
    width = max(len(b) for b in batch)
    rows = [b + [None] * (width - len(b)) for b in batch]
    bidding = torch.tensor([[x is not None for x in r] for r in rows])
    values = torch.tensor([[x if x is not None else 0.0 for x in r] for r in rows], dtype=torch.float64)
    c = clear(values, bidding, torch.tensor(PROTOCOL_CODES[protocol]), gamma)
    for i, r in enumerate(rows):
        idx = [j for j, x in enumerate(r) if x is not None]
        winner, pays, gets, subsidy = clear_reference([r[j] for j in idx], protocol, gamma)
        assert int(c.winner[i]) == (idx[winner] if winner >= 0 else -1)
        assert float(c.buyer_pays[i]) == pytest.approx(pays) and float(c.seller_gets[i]) == pytest.approx(gets)
        # money in (seller) = money out (buyer) + subsidy, in every auction
        assert float(c.seller_gets[i]) == pytest.approx(float(c.buyer_pays[i]) + float(c.subsidy[i]))
        if gamma == 1.0 and protocol != "second_price":
            assert float(c.subsidy[i]) == 0.0
        if gamma == 1.0 and protocol == "second_price":
            assert float(c.subsidy[i]) >= 0.0


# ---------------------------------------------------------------------------------------------
# conservation over random markets

LANGS = ["S", "a", "b", "c", "d", "T"]


@st.composite
def random_markets(draw):
    """A random DAG over LANGS (source S, target T reachable), random costs, N, protocol, bidder."""
    edges = {("S", "a"), ("a", "T")} if draw(st.booleans()) else {("S", "T")}
    for _ in range(draw(st.integers(0, 6))):
        i = draw(st.integers(0, len(LANGS) - 2))
        j = draw(st.integers(i + 1, len(LANGS) - 1))
        edges.add((LANGS[i], LANGS[j]))
    edge_list = [{"src": s, "dst": d, "cost": draw(st.floats(0.0, 0.6))} for s, d in sorted(edges)]
    return {
        "chain": {
            "densities": [draw(st.integers(1, 3))],
            "graph": {"source": "S", "targets": ["T"], "edges": edge_list},
            "terminal_reward": draw(st.floats(0.1, 2.0)),
            "rounds": 4,
            "final_rounds": 1,
            "tasks_per_round": draw(st.integers(1, 6)),
            "n_tasks": 8,
            "embedding_dim": 8,
            "max_steps": 6,
            "cost_spread": draw(st.floats(0.0, 0.5)),
        },
        "protocol": draw(st.sampled_from(PROTOCOLS)),
        "bidder": draw(st.sampled_from(BIDDERS)),
        "gamma": draw(st.floats(0.5, 1.0)),
        "wallet": {"initial": draw(st.floats(0.0, 2.0)), "bankrupt_below": draw(st.floats(-1.0, 0.5))},
        "explore": draw(st.floats(0.0, 1.0)),
        "probe": draw(st.floats(0.0, 1.0)),
        "value_init": draw(st.floats(-0.2, 1.0)),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_markets())
def test_money_is_conserved_in_random_markets(spec):
    params = MarketParams.model_validate(
        {
            "seeds": 2,
            "gamma": spec["gamma"],
            "wallet": spec["wallet"],
            "learning": {"value_init": spec["value_init"], "hidden": 8},
            "chain": spec["chain"],
            "answers": {"enabled": False},
        },
        strict=False,
    )
    cp = ChainParams.model_validate(spec["chain"], strict=False)
    domain = ChainDomain(cp, [spec["protocol"]], [0, 1])
    market = Market(domain, domain.worlds(), spec["bidder"], params, seed=3)
    start = market.wallet.clone()
    agent_flows = torch.zeros_like(start)
    alive_before = market.alive.clone()
    for r in range(cp.rounds):
        log = market.play(r, cp.tasks_per_round, spec["explore"], spec["probe"])
        for s in log.steps:
            sold = s.sold & s.active
            # every auction: money in (seller) = money out (buyer) + subsidy; nothing moves unsold
            assert torch.allclose(s.seller_gets, s.buyer_pays + s.subsidy, atol=1e-6)
            assert (s.buyer_pays[~sold] == 0).all() and (s.seller_gets[~sold] == 0).all() and (s.subsidy[~sold] == 0).all()
            if spec["gamma"] == 1.0 and spec["protocol"] != "second_price":
                assert (s.subsidy == 0).all()
            # exited agents never bid again
            bidder_alive = torch.gather(alive_before, 1, s.agents.reshape(2, -1)).view_as(s.agents)
            assert not (s.bidding & ~bidder_alive).any()
            # each agent's money, recomputed from the auction log alone
            holder = s.holder
            agent_flows.scatter_add_(1, holder.clamp_min(0), torch.where(holder >= 0, s.holder_income, torch.zeros_like(s.holder_income)))
            win = torch.where(sold, s.winner, torch.full_like(s.winner, -1))
            agent_flows.scatter_add_(1, win.clamp_min(0), torch.where(win >= 0, s.terminal - s.buyer_pays - s.cost, torch.zeros_like(s.cost)))
        market.learn(log)
        alive_before = market.alive.clone()
    delta = market.wallet - start
    assert torch.allclose(delta, agent_flows, atol=1e-4)
    led = market.ledger
    assert torch.allclose(led.seller_got, led.buyer_paid + led.subsidy, atol=1e-4)
    # zero-sum across agents, consumer, platform and inference providers
    consumer = led.consumer_got - led.consumer_paid
    platform = -led.subsidy
    providers = led.costs
    assert torch.allclose(delta.sum(1) + consumer + platform + providers, torch.zeros(2, dtype=delta.dtype), atol=1e-4)
    assert all(math.isfinite(float(x)) for x in delta.flatten())
