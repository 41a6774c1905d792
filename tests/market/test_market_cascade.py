"""Bankruptcy cascades through the real engine (issue 6): an exit can leave a node with a single
buyer (a monopsony), and under credit-conserving Vickrey that monopsony passes no value upstream,
so the agents upstream go bankrupt in turn and the market collapses.

The small chain S -> M -> T has N = 2 agents per edge. The second M->T clone costs more than the
terminal reward, so it loses money on every win and exits after the first round; M is then left with
a single buyer. Every number checked below is read from the engine's round logs and wallets.
"""

from __future__ import annotations

import pytest
import torch

from delegation_lab.market.chain import ChainDomain
from delegation_lab.market.engine import Market, RoundLog
from delegation_lab.market.params import MarketParams
from delegation_lab.market.report import chain_metrics
from delegation_lab.market.study import run_chain

SEEDS = [0, 1, 2]
ROUNDS = 6
TASKS = 8

CASCADE_CHAIN = {
    "densities": [2],
    "cost_spread": 2.0,  # clone #1 of an edge pays 3x the edge cost: M>T#1 pays $1.50 for a $1 task
    "terminal_reward": 1.0,
    "rounds": ROUNDS,
    "final_rounds": 1,
    "tasks_per_round": TASKS,
    "n_tasks": 16,
    "embedding_dim": 8,
    "max_steps": 3,
    "graph": {
        "source": "S",
        "targets": ["T"],
        "edges": [
            {"src": "S", "dst": "M", "cost": 0.01},
            {"src": "M", "dst": "T", "cost": 0.5},
        ],
    },
}


def cascade_params(protocol: str) -> MarketParams:
    return MarketParams.model_validate(
        {
            "seeds": len(SEEDS),
            "protocols": [protocol],
            "bidders": ["truthful"],
            "wallet": {"initial": 1.0, "bankrupt_below": 0.0},
            "learning": {"hidden": 8},
            "chain": CASCADE_CHAIN,
            "answers": {"enabled": False},
        },
        strict=False,
    )


class Run:
    """A market played round by round (bidders learn after each round, as in `run_chain`)."""

    def __init__(self, protocol: str):
        params = cascade_params(protocol)
        self.domain = ChainDomain(params.chain, [protocol], SEEDS)
        self.market = Market(
            self.domain, self.domain.worlds(), "truthful", params, seed=0
        )
        self.agent = {name: i for i, name in enumerate(self.domain.agent_names)}
        self.node = self.domain.lang_index
        self.logs: list[RoundLog] = []
        self.alive_before: list[torch.Tensor] = []
        self.wallet_after: list[torch.Tensor] = []
        for r in range(ROUNDS):
            self.alive_before.append(self.market.alive.clone())
            log = self.market.play(r, TASKS, explore_std=0.0, probe_rate=0.0)
            self.market.learn(log)
            self.logs.append(log)
            self.wallet_after.append(self.market.wallet.clone())

    def exits(self, r: int, w: int) -> set[str]:
        return {
            self.domain.agent_names[a]
            for a in self.logs[r].bankrupt[w].nonzero().flatten().tolist()
        }

    def auctions_at(self, r: int, node: str):
        """(step, mask [W, K]) of the auctions of round r held at `node` (the task was still running)."""
        for s in self.logs[r].steps:
            yield s, s.active & (s.place == self.node[node])


@pytest.fixture(scope="module")
def ccv() -> Run:
    return Run("ccv")


@pytest.fixture(scope="module")
def vickrey() -> Run:
    return Run("second_price")


def assert_exit_leaves_m_a_monopsony(run: Run) -> None:
    """Round 0: two buyers at M, both bid, the price is positive; the loss-making clone M>T#1 wins
    some auctions, drops below its threshold and exits alone; from round 1 on M has one buyer."""
    m0, m1 = run.agent["M>T#0"], run.agent["M>T#1"]
    held = 0
    for s, at_m in run.auctions_at(0, "M"):
        n_bidders = s.bidding.sum(-1)
        assert (n_bidders[at_m] == 2).all()  # both M->T clones bid for every state at M
        assert (s.b2[at_m] > 0).all()  # competition: a positive second price
        held += int(at_m.sum())
    assert held > 0
    for w in range(len(SEEDS)):
        won_by_m1 = sum(
            int(((s.winner[w] == m1) & at_m[w] & s.sold[w]).sum())
            for s, at_m in run.auctions_at(0, "M")
        )
        assert won_by_m1 > 0, (
            "the loss-making clone must trade before it can go bankrupt"
        )
        assert run.exits(0, w) == {"M>T#1"}
        assert float(run.wallet_after[0][w, m1]) < 0.0  # below bankrupt_below x reward
        assert bool(run.market.alive[w, m0])  # the other buyer at M stays
    # M now has exactly one live buyer
    at_m_agents = [
        a
        for a in range(run.domain.n_agents)
        if int(run.domain.agent_src[a]) == run.node["M"]
    ]
    alive_at_m = run.alive_before[1][:, at_m_agents].sum(1)
    assert alive_at_m.tolist() == [1] * len(SEEDS)


def assert_monopsony_round(run: Run, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Round r (after M>T#1 exited): the single buyer at M bids alone, wins every auction and pays
    the floor. Returns (seller receipts at M, subsidies at M) of that round."""
    m0, m1 = run.agent["M>T#0"], run.agent["M>T#1"]
    got, sub, held = [], [], 0
    for s, at_m in run.auctions_at(r, "M"):
        bidders = s.agents[s.bidding]
        assert not (bidders == m1).any()  # the exited clone never bids again
        assert (s.bidding.sum(-1)[at_m] == 1).all()
        assert (
            (s.sold[at_m]).all() and (s.winner[at_m] == m0).all()
        )  # the monopsonist wins every auction
        assert (s.b2[at_m] == 0).all() and (
            s.buyer_pays[at_m] == 0
        ).all()  # ... at the floor price
        got.append(s.seller_gets[at_m])
        sub.append(s.subsidy[at_m])
        held += int(at_m.sum())
    assert held > 0
    return torch.cat(got), torch.cat(sub)


def test_under_ccv_an_exit_makes_a_monopsony_and_the_upstream_agents_go_bankrupt(ccv):
    run = ccv
    up = [run.agent["S>M#0"], run.agent["S>M#1"]]
    assert_exit_leaves_m_a_monopsony(run)
    # round 1: CCV pays the seller the (zero) second price -- nothing flows upstream ...
    got, sub = assert_monopsony_round(run, 1)
    assert (got == 0).all() and (sub == 0).all()
    # ... while the upstream agents still compete at S and pay the consumer a positive price
    for s, at_s in run.auctions_at(1, "S"):
        assert (s.bidding.sum(-1)[at_s] == 2).all() and (s.buyer_pays[at_s] > 0).all()
    # so every upstream agent loses money in round 1 and exits: the cascade
    for w in range(len(SEEDS)):
        assert run.exits(1, w) == {"S>M#0", "S>M#1"}
        assert all(
            float(run.wallet_after[1][w, a]) < float(run.wallet_after[0][w, a])
            for a in up
        )
        assert all(float(run.wallet_after[1][w, a]) < 0.0 for a in up)
    assert (
        run.logs[0].success.all() and run.logs[1].success.all()
    )  # the market worked until then
    # afterwards nobody buys at the source: no auction sells, every task fails, nobody else exits
    monopsonist = run.agent["M>T#0"]
    for r in range(2, ROUNDS):
        log = run.logs[r]
        first = log.steps[0]
        assert (
            not first.sold.any() and first.unsold_end.all() and not first.bidding.any()
        )
        assert not log.success.any()
        assert (log.stats["successes"] == 0).all()
        assert not log.bankrupt.any()
        assert torch.equal(
            run.wallet_after[r], run.wallet_after[1]
        )  # no money moves any more
    assert run.market.alive[
        :, monopsonist
    ].all()  # the monopsonist survives, with no business left
    assert (run.market.alive.sum(1) == 1).all()


def test_under_vickrey_the_platform_subsidy_absorbs_the_same_exit(vickrey):
    """Control: the same exit and the same monopsony under 2nd-price -- the platform pays the
    seller b1, so the upstream agents stay solvent and the market keeps working."""
    run = vickrey
    up = [run.agent["S>M#0"], run.agent["S>M#1"]]
    assert_exit_leaves_m_a_monopsony(run)
    for r in range(1, ROUNDS):
        got, sub = assert_monopsony_round(run, r)
        assert (got > 0).all()  # the seller upstream is paid b1 ...
        assert torch.allclose(
            sub, got
        )  # ... entirely by the platform, since the buyer pays 0
        for w in range(len(SEEDS)):
            assert not run.exits(r, w)
        assert run.logs[r].success.all()
    assert run.market.alive[:, up].all()


def test_ccv_with_one_agent_per_edge_collapses_the_default_chain():
    """The default graph at N = 1 (seed 004 §5.1), through `run_chain` and `chain_metrics`: under CCV
    the Sp monopsony starves Fr->Sp, one Fr agent exits, the survivor is a monopsonist at Fr until it
    too goes bankrupt, and success falls to 0; under 2nd-price the subsidy keeps it at 1."""
    params = MarketParams.model_validate(
        {
            "seeds": 3,
            "protocols": ["second_price", "ccv"],
            "bidders": ["truthful"],
            "chain": {"densities": [1], "rounds": 40, "final_rounds": 10},
            "answers": {"enabled": False},
        },
        strict=False,
    )
    result = run_chain(params, record_every=10**6)
    m = chain_metrics(result.worlds)
    collapsed = m["ccv"]["truthful"]["N1"]
    assert collapsed["success"] == 0.0 and collapsed["bankruptcies"] == 2.0
    assert collapsed["bankrupt_by_edge"] == {
        "Fr>En": 1.0,
        "Fr>Sp": 1.0,
    }  # exactly the upstream agents
    assert collapsed["subsidy"] == 0.0 and collapsed["auctions_per_task"] == 0.0
    for world in (w for w in result.worlds if w.protocol == "ccv"):
        assert sorted(world.bankrupt_agents) == ["Fr>En#0", "Fr>Sp#0"]
        alive, success = world.curves["alive"], world.curves["success"]
        first_exit = int((alive < 7).argmax())
        second_exit = int((alive < 6).argmax())
        assert (
            alive[first_exit] == 6
            and alive[second_exit] == 5
            and first_exit < second_exit
        )
        assert (
            alive[second_exit:] == 5
        ).all()  # the five agents downstream of Fr never exit
        assert (
            success[: first_exit + 1].max() > 0
        )  # the market worked before the first exit
        assert (
            success[first_exit + 1 : second_exit + 1].max() > 0
        )  # the monopsonist at Fr kept trading
        assert (
            success[second_exit + 1 :] == 0
        ).all()  # then nobody buys at Fr: collapse
    subsidised = m["second_price"]["truthful"]["N1"]
    assert subsidised["success"] > 0.9 and subsidised["subsidy_at"]["Sp"] > 0.5
    assert all(
        "Fr>Sp#0" not in w.bankrupt_agents
        for w in result.worlds
        if w.protocol == "second_price"
    )
