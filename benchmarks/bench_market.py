"""Market auctions per second: every bidder in one batched forward pass vs one pass per agent.

Plays rounds of the chain-translation market at N = 4 agents per edge (28 agents) and prints
auctions per second with the bids of all agents of every auction from one batched pass vs each
agent's network evaluated on its own (whole auction rounds, then the forward pass alone), and with
the seeds batched in one market vs one market per seed run one after the other, and the bidders'
heads alone vs every agent's heads then picked; every line is a ratio measured in this one run.
"""

from __future__ import annotations

import time
import types

import torch

from delegation_lab.market.chain import ChainDomain
from delegation_lab.market.engine import Market
from delegation_lab.market.params import MarketParams

SEEDS = 5
ROUNDS = 20
TASKS = 8


def every_agent(market: Market) -> Market:
    """The same market, but every agent's heads are computed on every state and the bidders picked
    out (the pass before candidate-only heads)."""
    market.nets.by_candidates = lambda agents, n_agents: False
    return market


def per_agent(market: Market) -> Market:
    """The same market, but the bidder networks run agent by agent (one forward call per agent)."""
    nets = every_agent(market).nets

    def hidden_layer(self, x: torch.Tensor) -> torch.Tensor:
        j = (lambda a: a) if self.trunk == "private" else (lambda a: 0)
        cols = [
            torch.tanh(x @ self.w_state[:, j(a)] + self.identity[:, a : a + 1] @ self.w_id[:, j(a)] + self.b_hidden[:, None, j(a)])
            for a in range(self.n_agents)
        ]
        return torch.stack(cols, dim=2)

    def output(self, h: torch.Tensor) -> torch.Tensor:
        return torch.stack([h[:, :, a] @ self.w_out[:, a] + self.b_out[:, None, a] for a in range(self.n_agents)], dim=2)

    nets.hidden_layer = types.MethodType(hidden_layer, nets)
    nets.output = types.MethodType(output, nets)
    return market


def make(params: MarketParams, seeds: list[int]) -> Market:
    domain = ChainDomain(params.chain, ["first_price"], seeds)
    return Market(domain, domain.worlds(), "mirror_descent", params, seed=0)


def auctions_per_second(markets: list[Market], rounds: int = ROUNDS) -> tuple[float, list]:
    for m in markets:  # warm-up
        m.play(0, TASKS, 0.1, 0.02)
    auctions, logs = 0, []
    start = time.perf_counter()
    for r in range(rounds):
        for m in markets:
            log = m.play(r, TASKS, 0.1, 0.02)
            auctions += int(sum(int(s.active.sum()) for s in log.steps))
            logs.append(log)
    return auctions / (time.perf_counter() - start), logs


def bid_passes_per_second(market: Market, reps: int = 200) -> float:
    """Forward passes (bids of every agent for one round's auctions) per second."""
    x = market.domain.features(market.domain.start(0, TASKS, torch.Generator().manual_seed(0)))
    with torch.no_grad():
        market.nets.output(market.nets.hidden_layer(x))
        start = time.perf_counter()
        for _ in range(reps):
            market.nets.output(market.nets.hidden_layer(x))
    return reps / (time.perf_counter() - start)


def main() -> None:
    torch.set_num_threads(1)
    params = MarketParams.model_validate({"seeds": SEEDS, "chain": {"densities": [4]}}, strict=False)
    seeds = list(range(SEEDS))
    batched, logs_b = auctions_per_second([make(params, seeds)])
    looped, logs_l = auctions_per_second([per_agent(make(params, seeds))])
    same = all(torch.equal(a.steps[0].bids, b.steps[0].bids) for a, b in zip(logs_b[:3], logs_l[:3], strict=True))
    print(f"bidders per auction: up to {2 * 4} of {make(params, [0]).domain.n_agents} agents, {SEEDS} seeds x {TASKS} tasks per round")
    print(f"one batched pass for all agents: {batched:,.0f} auctions/s; one pass per agent: {looped:,.0f} auctions/s "
          f"-> batched is {batched / looped:.1f}x faster (identical bids: {same})")
    dense, logs_d = auctions_per_second([every_agent(make(params, seeds))])
    same_d = all(torch.equal(a.steps[0].bids, b.steps[0].bids) for a, b in zip(logs_b[:3], logs_d[:3], strict=True))
    print(f"heads of the bidders only: {batched:,.0f} auctions/s; every agent's heads, then pick: {dense:,.0f} auctions/s "
          f"-> {batched / dense:.1f}x (identical bids: {same_d})")
    fwd_b = bid_passes_per_second(make(params, seeds))
    fwd_l = bid_passes_per_second(per_agent(make(params, seeds)))
    print(f"the bid forward pass alone: {fwd_b:,.0f} vs {fwd_l:,.0f} passes/s -> {fwd_b / fwd_l:.1f}x")
    one_market, _ = auctions_per_second([make(params, seeds)])
    per_seed, _ = auctions_per_second([make(params, [s]) for s in seeds])
    print(f"{SEEDS} seeds batched in one market: {one_market:,.0f} auctions/s; one market per seed: {per_seed:,.0f} auctions/s "
          f"-> {one_market / per_seed:.1f}x")


if __name__ == "__main__":
    main()
