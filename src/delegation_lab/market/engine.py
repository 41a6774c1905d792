"""The sequential-auction market (seed 004 §2-3), batched over independent markets ("worlds": cells
x seeds) and over tasks played side by side in a round.

One task: the consumer posts a state; at each step the eligible agents bid, the highest bid wins the
right to act, pays the protocol's price to whoever holds the state (the consumer at step 0, else the
previous winner), pays its own inference cost and holds the transformed state. The task ends when
the winner's action completes it (the consumer pays it the terminal reward for a success), when
nobody bids for the state (the holder keeps it: it earns the terminal reward if what it holds is a
success, else nothing), or after `max_steps` auctions (failure). The winner's utility is
U = r + P_in - P_out with r = -cost (+ terminal reward), P_in what it gets for the state it holds.

Money moves between agents' wallets, the consumer, the platform (subsidies) and inference providers
(costs), and nowhere else: `Ledger` keeps the totals that the conservation property test checks.
After a round, every agent whose balance is below its threshold exits for good (bankruptcy); its
exit can leave a node with a single buyer, a monopsony.

A `Domain` supplies states, eligibility and transitions (chain translation, cached solver answers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from delegation_lab.market.bidders import ShadeSamples, make_bidder
from delegation_lab.market.networks import N_OUT, AgentNets, read_heads
from delegation_lab.market.params import MarketParams
from delegation_lab.market.protocols import clear


class Domain(Protocol):
    """A task environment, batched over worlds W and concurrent tasks K; states are domain objects."""

    n_agents: int
    n_state: int
    max_steps: int
    n_places: int  # labels of where an auction happens (chain: languages), for per-place prices
    identity: torch.Tensor  # [W, A, I] agent identity features

    def start(self, round_index: int, n_tasks: int, gen: torch.Generator) -> object: ...

    def features(self, state: object) -> torch.Tensor: ...  # [W, K, F]

    def candidates(self, state: object) -> tuple[torch.Tensor, torch.Tensor]:
        """The agents eligible to bid for each state: (agent index [W, K, M], valid [W, K, M] bool)."""
        ...

    def place(self, state: object) -> torch.Tensor: ...  # [W, K] long in [0, n_places)

    def item(self, state: object) -> torch.Tensor: ...  # [W, K] long: which task / item (for trajectories)

    def act(self, state: object, winner: torch.Tensor, acting: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The winners [W, K] act where `acting`: returns (cost $, done, success), all [W, K]; updates state."""
        ...

    def holds_success(self, state: object) -> torch.Tensor: ...  # [W, K] bool: the held state is a success if the task ends now

    # optional: def task_stats(self, state, success) -> dict[str, Tensor [W]], per-world sums added to the round's stats


@dataclass
class Worlds:
    """Static description of the batch of independent markets."""

    protocol: torch.Tensor  # [W] long protocol codes
    reward: torch.Tensor  # [W] terminal reward in $
    exists: torch.Tensor  # [W, A] bool (padding agents are False)
    init_seeds: list[int]  # network init seed per world
    win_loss: torch.Tensor | None = None  # [W] bool: a belief bidder fits its belief to win / loss only (else to the rival bid)

    @property
    def n(self) -> int:
        return int(self.protocol.shape[0])


@dataclass
class Ledger:
    """Cumulative money flows per world (for conservation) and per agent."""

    buyer_paid: torch.Tensor  # [W] all buyers' payments
    seller_got: torch.Tensor  # [W] all sellers' receipts (agents and consumer)
    subsidy: torch.Tensor  # [W] platform outlay
    consumer_got: torch.Tensor  # [W] what the consumer received for its tasks
    consumer_paid: torch.Tensor  # [W] terminal rewards the consumer paid
    costs: torch.Tensor  # [W] inference costs paid to providers


@dataclass
class StepLog:
    """One auction step of a round, every tensor [W, K] or [W, K, A]."""

    active: torch.Tensor
    place: torch.Tensor
    item: torch.Tensor
    features: torch.Tensor | None  # [W, K, F]; None where a frozen trunk's state parts replace them
    hidden: torch.Tensor | None  # [W, K, M or A, H] activations of a frozen trunk, reused when learning ([W, K] state codes where the domain has them)
    agents: torch.Tensor  # [W, K, M] the candidate bidders (agent index)
    bidding: torch.Tensor  # [W, K, M]
    bids: torch.Tensor  # [W, K, M] $
    valuation: torch.Tensor  # [W, K, M] reward units (a probe's drawn valuation where it probed)
    value: torch.Tensor  # [W, K, M] reward units, the head's estimate
    xi: torch.Tensor  # shade used (with exploration)
    probe: torch.Tensor  # [W, K, M] the bid was a probe
    z: torch.Tensor
    logp: torch.Tensor
    winner: torch.Tensor  # agent index, -1 none
    winner_slot: torch.Tensor  # its candidate slot in [0, M), -1 none
    sold: torch.Tensor
    b1: torch.Tensor
    b2: torch.Tensor
    buyer_pays: torch.Tensor
    seller_gets: torch.Tensor
    subsidy: torch.Tensor
    holder: torch.Tensor  # seller of this auction: -1 consumer, else agent
    holder_income: torch.Tensor  # what the holder got at this step (sale proceeds or terminal reward)
    unsold_end: torch.Tensor  # the task ended here because nobody bid
    cost: torch.Tensor
    terminal: torch.Tensor  # terminal reward paid to the winner at this step
    done: torch.Tensor


@dataclass
class RoundLog:
    steps: list[StepLog]
    success: torch.Tensor  # [W, K] final task success
    route_cost: torch.Tensor  # [W, K] total inference cost of the task
    calls: torch.Tensor  # [W, K] auctions won
    income_next: torch.Tensor  # [T, W, K] what the winner at t got for the state it held
    utility: torch.Tensor  # [T, W, K] winner's U = r + P_in - P_out
    bankrupt: torch.Tensor  # [W, A] agents that exited after this round
    stats: dict[str, torch.Tensor] = field(default_factory=dict)  # per-world round statistics


class Market:
    """Independent markets ("worlds") of one bidder type: `play` runs a round of K tasks in every
    world (wallets, bankruptcies, ledger), `learn` updates every bidder from that round."""

    def __init__(self, domain: Domain, worlds: Worlds, bidder: str, params: MarketParams, device: str | torch.device = "cpu", seed: int = 0):
        self.domain, self.worlds, self.params, self.device = domain, worlds, params, device
        W, A = worlds.n, domain.n_agents
        lp = params.learning
        self.nets = AgentNets(W, A, domain.n_state, domain.identity, lp.hidden, lp.trunk, worlds.init_seeds, device)
        self.opt = torch.optim.Adam([q for q in self.nets.parameters() if q.requires_grad], lr=lp.lr)
        self.bidder = make_bidder(bidder, params, W, A, device, win_loss=worlds.win_loss)
        self.reward = worlds.reward.to(device)
        self.protocol = worlds.protocol.to(device)
        self.wallet = params.wallet.initial * self.reward[:, None].expand(W, A).clone()
        self.threshold = params.wallet.bankrupt_below * self.reward[:, None]
        self.alive = worlds.exists.to(device).clone()
        self.exists = worlds.exists.to(device)
        self.gen = torch.Generator(device=device).manual_seed(int(seed))
        z = lambda: torch.zeros(W, device=device)  # noqa: E731
        self.ledger = Ledger(z(), z(), z(), z(), z(), z())
        # a frozen trunk over a domain with few distinct states: its activations once per state code
        self.code_hidden = None
        self.state_parts = None  # a frozen shared trunk over feature tables: its state part per table row
        if self.nets.frozen and lp.trunk != "private" and hasattr(domain, "feature_tables"):
            self.state_parts = self.nets.table_parts(domain.feature_tables())
        if self.nets.frozen and hasattr(domain, "state_codes"):
            with torch.no_grad():
                self.code_hidden = self.nets.code_hidden(domain.code_features())  # [W, C, A, H]

    # ------------------------------------------------------------------ play

    @torch.no_grad()
    def play(self, round_index: int, n_tasks: int, explore_std: float, probe_rate: float = 0.0) -> RoundLog:
        """Run `n_tasks` tasks in every world (learning excluded); `explore_std` and `probe_rate`
        are the exploration of this round (0 when evaluating)."""
        d, W = self.domain, self.worlds.n
        K, gamma, R = n_tasks, self.params.gamma, self.reward
        state = d.start(round_index, K, self.gen)
        active = torch.ones(W, K, dtype=torch.bool, device=self.device)
        holder = torch.full((W, K), -1, dtype=torch.long, device=self.device)
        success = torch.zeros(W, K, dtype=torch.bool, device=self.device)
        route_cost = torch.zeros(W, K, device=self.device)
        calls = torch.zeros(W, K, device=self.device)
        steps: list[StepLog] = []
        value_init = self.params.learning.value_init
        probe_scale = self.params.learning.probe_scale
        code_out = self.nets.output(self.code_hidden) if self.code_hidden is not None else None  # heads of every state code, once a round
        for _ in range(d.max_steps):
            if not bool(active.any()):
                break
            agents, valid = d.candidates(state)
            # a frozen trunk with state parts never reads the features (learning reuses the activations)
            from_parts = self.state_parts is not None and self.nets.by_candidates(agents, d.n_agents)
            x = None if from_parts else d.features(state)
            alive = torch.gather(self.alive, 1, agents.reshape(W, -1)).view_as(agents)
            eligible = valid & alive & active[..., None]
            if code_out is not None:
                codes = d.state_codes(state)
                hidden, out = codes, self.nets.pick(self._by_code(code_out, codes), agents)
            elif self.nets.by_candidates(agents, d.n_agents):  # heads of the eligible bidders only (the rest are never read)
                used = eligible.nonzero(as_tuple=True)
                if from_parts:
                    h = self.nets.hidden_from_parts(self.state_parts, d.feature_rows(state), used, agents[used])
                else:
                    h = self.nets.hidden_at(x, used, agents[used])
                out = torch.zeros(*agents.shape, N_OUT, device=self.device).index_put(used, self.nets.output_at(h, used[0], agents[used]))
                hidden = torch.zeros(*agents.shape, h.shape[-1], device=self.device).index_put(used, h) if self.nets.frozen else None
            else:
                hidden, out = self._heads(x, agents)
            heads = read_heads(out, value_init)
            shade = self.bidder.shade(heads, self.gen)
            xi, valuation = shade.xi, heads.value
            if explore_std > 0:  # multiplicative shade noise, capped so no bid exceeds its valuation
                eps = explore_std * torch.randn(xi.shape, generator=self.gen, device=self.device)
                xi = (xi * torch.exp(eps)).clamp_max(1.0)
            probe = torch.zeros_like(eligible)
            if probe_rate > 0:  # an agent that dropped out (valuation <= 0) sometimes bids anyway
                probe = eligible & (valuation <= 0) & (torch.rand(xi.shape, generator=self.gen, device=self.device) < probe_rate)
                probe_value = probe_scale * torch.randn(xi.shape, generator=self.gen, device=self.device).abs()
                valuation = torch.where(probe, probe_value, valuation)
                xi = torch.where(probe, torch.ones_like(xi), xi)
            bidding = eligible & (valuation > 0)
            bids = torch.where(bidding, xi * valuation * R[:, None, None], torch.zeros_like(valuation))
            tie = torch.rand(bids.shape, generator=self.gen, device=self.device)
            c = clear(bids, bidding, self.protocol[:, None], gamma, tie_break=tie)
            slot = c.winner
            c.winner = torch.where(c.sold, agents.gather(-1, slot.clamp_min(0)[..., None]).squeeze(-1), slot)
            place = d.place(state)
            # the holder sells, or keeps the state when nobody bids (then the task ends)
            unsold_end = active & ~c.sold
            kept_success = unsold_end & d.holds_success(state) & (holder >= 0)
            proceeds = torch.where(c.sold, c.seller_gets, torch.zeros_like(c.seller_gets))
            holder_income = proceeds + torch.where(kept_success, R[:, None].expand(W, K), torch.zeros_like(proceeds))
            self._credit(holder, holder_income)
            success |= kept_success
            self.ledger.seller_got += proceeds.sum(1)
            self.ledger.consumer_got += torch.where(holder < 0, proceeds, torch.zeros_like(proceeds)).sum(1)
            self.ledger.consumer_paid += torch.where(kept_success, R[:, None].expand(W, K), torch.zeros_like(proceeds)).sum(1)
            # the winner pays, acts, and may complete the task
            winner = c.winner.clamp_min(0)
            cost, done, ok = d.act(state, winner, c.sold)
            cost = torch.where(c.sold, cost, torch.zeros_like(cost))
            terminal = torch.where(c.sold & done & ok, R[:, None].expand(W, K), torch.zeros_like(cost))
            pays = torch.where(c.sold, c.buyer_pays, torch.zeros_like(cost))
            self._credit(torch.where(c.sold, c.winner, torch.full_like(c.winner, -1)), terminal - pays - cost)
            subsidy = torch.where(c.sold, c.subsidy, torch.zeros_like(cost))
            self.ledger.buyer_paid += pays.sum(1)
            self.ledger.subsidy += subsidy.sum(1)
            self.ledger.consumer_paid += terminal.sum(1)
            self.ledger.costs += cost.sum(1)
            success |= terminal > 0
            route_cost += cost
            calls += c.sold.float()
            steps.append(
                StepLog(
                    active=active, place=place, item=d.item(state), features=x, hidden=hidden if self.nets.frozen else None,
                    agents=agents, bidding=bidding, bids=bids, valuation=valuation, value=heads.value, xi=xi, z=shade.z,
                    logp=shade.logp, probe=probe, winner=c.winner, winner_slot=slot, sold=c.sold,
                    b1=c.b1, b2=c.b2, buyer_pays=pays, seller_gets=proceeds, subsidy=subsidy, holder=holder,
                    holder_income=holder_income, unsold_end=unsold_end, cost=cost, terminal=terminal, done=done & c.sold,
                )
            )
            holder = torch.where(c.sold, c.winner, holder)
            active = c.sold & ~done
        # tasks still running after max_steps fail; the holder keeps nothing
        income = torch.stack([s.holder_income for s in steps])  # [T, W, K]
        income_next = torch.cat([income[1:], torch.zeros_like(income[:1])], dim=0)
        utility = torch.stack([s.terminal - s.cost - s.buyer_pays for s in steps]) + income_next
        utility = torch.where(torch.stack([s.sold for s in steps]), utility, torch.zeros_like(utility))
        bankrupt = self.alive & (self.wallet < self.threshold)
        self.alive &= ~bankrupt
        log = RoundLog(steps, success, route_cost, calls, income_next, utility, bankrupt)
        log.stats = self._stats(log)
        if hasattr(d, "task_stats"):
            log.stats.update(d.task_stats(state, success))
        return log

    def _heads(self, x: torch.Tensor, agents: torch.Tensor, hidden: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(hidden activations, the candidates' raw heads [W, N, M, N_OUT]) in one batched pass over
        every market; `hidden` = the frozen trunk's activations kept from `play`."""
        nets = self.nets
        if nets.by_candidates(agents, self.domain.n_agents):
            h = nets.candidate_hidden(x, agents) if hidden is None else hidden
            return h, nets.candidate_output(h, agents)
        h = nets.hidden_layer(x) if hidden is None else hidden  # every agent of every market on every state
        return h, nets.pick(nets.output(h), agents)

    @staticmethod
    def _by_code(code_out: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """[W, C, A, O] heads per state code, codes [W, N] -> [W, N, A, O]."""
        A, O = code_out.shape[2:]
        return torch.gather(code_out, 1, codes[..., None, None].expand(-1, -1, A, O))

    def _credit(self, agent: torch.Tensor, amount: torch.Tensor) -> None:
        """wallet[w, agent[w, k]] += amount[w, k] where agent >= 0."""
        mask = agent >= 0
        self.wallet.scatter_add_(1, agent.clamp_min(0), torch.where(mask, amount, torch.zeros_like(amount)))

    def _stats(self, log: RoundLog) -> dict[str, torch.Tensor]:
        """Per-world sums of the round (ratios are taken over a window of rounds by the caller)."""
        P = self.domain.n_places
        sold = torch.stack([s.sold for s in log.steps])  # [T, W, K]
        W = sold.shape[1]
        place = torch.stack([s.place for s in log.steps])
        price = torch.stack([s.buyer_pays for s in log.steps])
        sub = torch.stack([s.subsidy for s in log.steps])
        received = torch.stack([s.seller_gets for s in log.steps])

        def by_place(values: torch.Tensor) -> torch.Tensor:
            out = torch.zeros(W, P, device=self.device)
            flat = place.permute(1, 0, 2).reshape(W, -1)
            out.scatter_add_(1, flat, torch.where(sold, values, torch.zeros_like(values)).permute(1, 0, 2).reshape(W, -1))
            return out

        first_income = log.steps[0].seller_gets  # what the consumer received at step 0
        A = self.domain.n_agents

        def wins(steps: list[StepLog]) -> torch.Tensor:
            out = torch.zeros(W, A, device=self.device)
            for s in steps:
                out.scatter_add_(1, s.winner.clamp_min(0), s.sold.float())
            return out

        return {
            "wins": wins(log.steps),
            "first_wins": wins(log.steps[:1]),
            "first_price": torch.where(log.steps[0].sold, log.steps[0].buyer_pays, torch.zeros_like(first_income)).sum(1),
            "first_sold": log.steps[0].sold.float().sum(1),
            "tasks": torch.full((W,), float(log.success.shape[1]), device=self.device),
            "successes": log.success.float().sum(1),
            "route_cost_success": torch.where(log.success, log.route_cost, torch.zeros_like(log.route_cost)).sum(1),
            "cost": log.route_cost.sum(1),
            "calls": log.calls.sum(1),
            "auctions_won": sold.float().sum((0, 2)),
            "margin": log.utility.sum((0, 2)),
            "subsidy": sub.sum((0, 2)),
            "consumer_net": (first_income - torch.where(log.success, self.reward[:, None], torch.zeros_like(first_income))).sum(1),
            "alive": self.alive.float().sum(1),
            "bankrupt": (self.exists & ~self.alive).float().sum(1),
            "place_auctions": by_place(torch.ones_like(price)),
            "place_price": by_place(price),
            "place_received": by_place(received),
            "place_subsidy": by_place(sub),
        }

    # ------------------------------------------------------------------ learn

    def samples(self, log: RoundLog) -> tuple[torch.Tensor, torch.Tensor, ShadeSamples, torch.Tensor, torch.Tensor]:
        """(features [W, N, F], candidate agents [W, N, M], shade samples [W, N, M], value target [W, N],
        winner mask [W, N, M]) with N = steps x tasks."""

        def stack(name: str) -> torch.Tensor:  # [T, W, K, ...] -> [W, T*K, ...]
            t = torch.stack([getattr(s, name) for s in log.steps]).transpose(0, 1)
            return t.reshape(t.shape[0], -1, *t.shape[3:])

        W = self.worlds.n
        x = stack("features") if log.steps[0].features is not None else None  # None: a frozen trunk kept its activations
        agents = stack("agents")
        slot = stack("winner_slot")
        M = agents.shape[-1]
        won = (torch.arange(M, device=self.device) == slot[..., None]) & (slot >= 0)[..., None]
        R = self.reward[:, None]
        b1, b2 = stack("b1") / R, stack("b2") / R
        rival = torch.where(won, b2[..., None], b1[..., None])
        income_next = log.income_next.transpose(0, 1).reshape(W, -1)
        target = (stack("terminal") - stack("cost") + income_next) / R
        utility = log.utility.transpose(0, 1).reshape(W, -1) / R
        samples = ShadeSamples(
            agent=agents, bid=stack("bidding") & ~stack("probe"), won=won, xi=stack("xi"), z=stack("z"), logp=stack("logp"),
            valuation=stack("valuation"), rival=rival, utility=torch.where(won, utility[..., None], torch.zeros_like(rival)),
        )
        return x, agents, samples, target, won

    def _stack_hidden(self, log: RoundLog) -> torch.Tensor:
        h = torch.stack([s.hidden for s in log.steps]).transpose(0, 1)  # [W, T, K, A, H]
        return h.reshape(h.shape[0], -1, *h.shape[3:])

    def per_agent_weight(self, agents: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """1 / (samples of that agent) where mask, else 0: each agent's loss is a mean over its own samples."""
        W, A = self.worlds.n, self.domain.n_agents
        flat = agents.reshape(W, -1)
        counts = torch.zeros(W, A, device=self.device).scatter_add_(1, flat, mask.reshape(W, -1).float())
        per = torch.gather(counts, 1, flat).view_as(mask)
        return torch.where(mask, 1.0 / per.clamp_min(1), torch.zeros_like(per))

    def learn(self, log: RoundLog) -> dict[str, float]:
        x, agents, samples, target, won = self.samples(log)
        value_init = self.params.learning.value_init
        w_value = self.per_agent_weight(agents, won)
        w_shade = self.per_agent_weight(agents, samples.bid)
        last: dict[str, float] = {}
        hidden = self._stack_hidden(log) if self.nets.frozen else None
        # only (state, candidate) entries with a loss weight get heads (the others stay 0, weight 0)
        used = ((w_value > 0) | (w_shade > 0)).nonzero(as_tuple=True)
        sparse = self.code_hidden is None and self.nets.by_candidates(agents, self.domain.n_agents)
        for _ in range(self.bidder.epochs):
            if self.code_hidden is not None:  # `hidden` holds the state codes
                out = self.nets.pick(self._by_code(self.nets.output(self.code_hidden), hidden), agents)
            elif sparse:
                h = (hidden if hidden is not None else self.nets.candidate_hidden(x, agents))[used]
                picked = self.nets.output_at(h, used[0], agents[used])
                out = torch.zeros(*agents.shape, picked.shape[-1], device=self.device).index_put(used, picked)
            else:
                out = self._heads(x, agents, hidden)[1]
            heads = read_heads(out, value_init)
            nll = 0.5 * ((target[..., None] - heads.value) / heads.value_std) ** 2 + torch.log(heads.value_std)
            value_loss = (w_value * nll).sum()
            shade_loss = (w_shade * self.bidder.shade_loss(heads, samples)).sum()
            loss = value_loss + shade_loss
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            last = {"value_loss": float(value_loss.detach()), "shade_loss": float(shade_loss.detach())}
        self.bidder.end_round(samples)
        return last
