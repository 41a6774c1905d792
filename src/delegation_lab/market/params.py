"""The `market` params section: sequential auctions (seed 004) on a synthetic translation chain and
on the platform's cached solver answers.

Every bad value fails here, before any work, with its dotted key: an unknown protocol or bidder
(the Literal types), a negative cost, a density N < 1, an edge naming an unknown language, a target
the source cannot reach.
"""

from __future__ import annotations

from collections import deque
from typing import Annotated, Literal

from pydantic import Field, model_validator

from delegation_lab.params.model import ParamsModel, StudyParams

Protocol = Literal["first_price", "second_price", "ccv"]
Bidder = Literal["mirror_descent", "thompson", "bayes_optimal", "ppo", "truthful"]
PROTOCOLS: tuple[str, ...] = ("first_price", "second_price", "ccv")
BIDDERS: tuple[str, ...] = ("mirror_descent", "thompson", "bayes_optimal", "ppo", "truthful")
SHADING_BIDDERS: tuple[str, ...] = ("mirror_descent", "thompson", "bayes_optimal", "ppo")


def market_cells(protocols: list[str], bidders: list[str]) -> list[tuple[str, str]]:
    """(protocol, bidder) pairs that run: shading bidders under first_price only (the Vickrey
    protocols enforce truthful bids, seed 004 §4); `truthful` under every listed protocol (under
    first_price it is the zero-margin reference of §3.2)."""
    cells = []
    for protocol in PROTOCOLS:
        if protocol not in protocols:
            continue
        for bidder in BIDDERS:
            if bidder not in bidders:
                continue
            if bidder == "truthful" or protocol == "first_price":
                cells.append((protocol, bidder))
    return cells


class LearningParams(ParamsModel):
    hidden: int = Field(64, ge=1, le=1024)
    """Hidden units of the bidder MLP (one hidden layer; per-agent heads: value, value spread, two shade outputs)."""
    lr: float = Field(0.001, gt=0)
    """Adam learning rate of every bidder network."""
    value_init: float = 0.5
    """Initial valuation, in units of the terminal reward (optimistic: untried agents still bid)."""
    shade_init: float = Field(0.5, gt=0, lt=1)
    """Initial shade xi (the paper initialises shades near 0.5)."""
    shade_min: float = Field(0.001, gt=0, lt=1)
    """Smallest shade a bidder may use (the bid floor is shade_min x valuation)."""
    shade_max: float = Field(0.999, gt=0, le=1)
    """Largest shade a shading bidder may use (truthful bidders use 1)."""
    explore_std: float = Field(0.3, ge=0)
    """Exploration while training: the shade used is min(xi e^eps, 1), eps ~ N(0, explore_std^2), so a bid never exceeds the agent's own valuation."""
    explore_until: float = Field(0.6, gt=0, le=1)
    """Fraction of the training rounds over which explore_std decays linearly to 0."""
    probe_rate: float = Field(0.02, ge=0, le=1)
    """Probability that an eligible agent whose valuation is <= 0 bids anyway (a probe), so an agent that dropped out can learn the market recovered."""
    probe_scale: float = Field(0.1, gt=0)
    """A probe bids |N(0, probe_scale^2)| (units of the terminal reward)."""
    trunk: Literal["frozen", "shared", "private"] = "frozen"
    """Hidden layer over state and agent identity: `frozen` = one fixed random layer per market (agents train private heads only); `shared` = one trained layer per market; `private` = each agent its own trained layer (A x the compute)."""

    @model_validator(mode="after")
    def _check(self) -> LearningParams:
        if self.shade_min >= self.shade_max:
            raise ValueError(f"shade_min ({self.shade_min}) must be below shade_max ({self.shade_max})")
        return self


class MirrorDescentParams(ParamsModel):
    eta: float = Field(0.05, gt=0)
    """Step of the multiplicative update: xi * exp(-eta) after a win, xi * exp(+eta) after a loss."""


BeliefReading = Literal["rival_bid", "win_loss"]
BELIEF_READINGS: tuple[str, ...] = ("rival_bid", "win_loss")
BELIEF_BIDDERS: tuple[str, ...] = ("thompson", "bayes_optimal")


class ThompsonParams(ParamsModel):
    sigma_floor: float = Field(0.05, gt=0)
    """Smallest std of the Gaussian belief over the logit of the winning shade."""
    reading: BeliefReading = "rival_bid"
    """What the belief N(mu_l, sigma_l^2) over the logit of the critical shade is fitted to (our interpretation, seed 004 §4 does not say): `rival_bid` = Gaussian NLL on the critical shade the published highest rival bid implies; `win_loss` = probit likelihood of the agent's own win / loss at the shade it bid, P(win | xi) = Phi((logit xi - mu_l) / sigma_l), rival bids never seen."""


class BayesOptimalParams(ParamsModel):
    iterations: int = Field(20, ge=1, le=100)
    """Bisection steps on the first-order condition of argmax (1 - xi) P(win | xi) (the maximiser is unique); 20 halve the logit range between the shade bounds to ~1e-5."""
    sigma_floor: float = Field(0.05, gt=0)
    """Smallest std of the Gaussian belief over the logit of the winning shade."""
    reading: BeliefReading = "rival_bid"
    """What the belief is fitted to: `rival_bid` (the critical shade the highest rival bid implies) or `win_loss` (probit likelihood of its own win / loss only); see `thompson.reading`."""


class PPOParams(ParamsModel):
    clip: float = Field(0.2, gt=0, lt=1)
    """PPO ratio clip epsilon."""
    entropy: float = Field(0.01, ge=0)
    """Entropy bonus beta_ent."""
    epochs: int = Field(4, ge=1)
    """Optimisation epochs over each round's samples."""
    baseline_rate: float = Field(0.05, gt=0, le=1)
    """EMA rate of each agent's utility baseline (advantage = utility - baseline; losing has utility 0)."""
    init_log_std: float = -0.5
    """Initial log std of the Gaussian policy over the logit of the shade."""


class WalletParams(ParamsModel):
    initial: float = Field(2.0, ge=0)
    """Starting balance of every agent, in units of the terminal reward."""
    bankrupt_below: float = 0.0
    """An agent whose balance falls below this (units of the terminal reward) after a round exits for good."""


class EdgeParams(ParamsModel):
    src: str
    """Language translated from."""
    dst: str
    """Language translated into."""
    cost: float = Field(ge=0)
    """Inference cost of one translation in US dollars (agent j of N pays cost x (1 + cost_spread x j / (N - 1)))."""
    source: Literal["paper", "derived", "ours"] = "ours"
    """Where the cost comes from: `paper` = seed 004 §5.1 states it; `derived` = the paper gives only a route total it belongs to (Fr->Sp->En $0.02, Fr->Sp->En->Ko $0.04) and the split is ours; `ours` = our choice (the paper's Figure 1(a) costs are not in our copy). Reported beside each edge in metrics/market.json `chain.graph`."""


class GraphParams(ParamsModel):
    source: str = "Fr"
    """Language every task starts in."""
    targets: list[str] = ["Ko", "Ja"]
    """Languages tasks ask for (each task draws one); each must be reachable from the source."""
    edges: list[EdgeParams] = [
        EdgeParams(src="Fr", dst="En", cost=0.50, source="paper"),
        EdgeParams(src="Fr", dst="Sp", cost=0.01, source="derived"),
        EdgeParams(src="Sp", dst="En", cost=0.01, source="derived"),
        EdgeParams(src="En", dst="Ko", cost=0.02, source="derived"),
        EdgeParams(src="En", dst="Ge", cost=0.01),
        EdgeParams(src="Ge", dst="Ko", cost=0.02),
        EdgeParams(src="Ge", dst="Ja", cost=0.01),
    ]
    """Translator edges with their costs and each cost's source (seed 004 §5.1 states only the direct Fr->En $0.50, the Fr->Sp->En path $0.02 and the Fr->Sp->En->Ko route $0.04; every other cost, the even split of the path and the Ge / Ja nodes are ours)."""

    @model_validator(mode="after")
    def _check(self) -> GraphParams:
        if not self.edges:
            raise ValueError("edges: the graph needs at least one edge")
        seen = set()
        for i, edge in enumerate(self.edges):
            if edge.src == edge.dst:
                raise ValueError(f"edges.{i}: a self-loop {edge.src}->{edge.dst} translates nothing")
            if (edge.src, edge.dst) in seen:
                raise ValueError(f"edges.{i}: duplicate edge {edge.src}->{edge.dst}; use `densities` for several agents per edge")
            seen.add((edge.src, edge.dst))
        if not self.targets:
            raise ValueError("targets: name at least one target language")
        if self.source in self.targets:
            raise ValueError(f"targets: the source {self.source!r} cannot be a target")
        reach = reachable(self.source, [(e.src, e.dst) for e in self.edges])
        for target in self.targets:
            if target not in reach:
                raise ValueError(
                    f"targets: {target!r} is unreachable from the source {self.source!r} along the edges "
                    f"(reachable: {', '.join(sorted(reach - {self.source})) or 'nothing'})"
                )
        return self

    def languages(self) -> list[str]:
        names = [self.source]
        for edge in self.edges:
            for name in (edge.src, edge.dst):
                if name not in names:
                    names.append(name)
        return names


def reachable(source: str, edges: list[tuple[str, str]]) -> set[str]:
    out, queue = {source}, deque([source])
    while queue:
        node = queue.popleft()
        for src, dst in edges:
            if src == node and dst not in out:
                out.add(dst)
                queue.append(dst)
    return out


def shortest_hops(source: str, target: str, edges: list[tuple[str, str]]) -> int:
    depth, queue = {source: 0}, deque([source])
    while queue:
        node = queue.popleft()
        for src, dst in edges:
            if src == node and dst not in depth:
                depth[dst] = depth[node] + 1
                queue.append(dst)
    return depth[target]


class SpreadSweepParams(ParamsModel):
    enabled: bool = True
    """Run the sweep over the cost spread between the competing agents of an edge (the degree of imperfect competition), batched with the density sweep; results under `spread_sweep.*` in metrics/market.json."""
    spreads: list[Annotated[float, Field(ge=0, le=10)]] = [0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
    """Values of the cost spread (agent j of N pays cost x (1 + spread x j / (N - 1))); 0 = perfect clones, the paper's zero-profit extreme. Multiples of 0.01 (each names its key: `spread_sweep.s<percent>`)."""
    density: int = Field(2, ge=2, le=64)
    """Agents per edge N in the sweep (at least 2: with one agent there is no spread)."""
    protocol: Protocol = "first_price"
    """Auction protocol of the sweep."""
    bidder: Bidder = "mirror_descent"
    """Bidding algorithm of the sweep (a shading bidder needs protocol first_price)."""

    @model_validator(mode="after")
    def _check(self) -> SpreadSweepParams:
        for i, spread in enumerate(self.spreads):
            if abs(spread * 100 - round(spread * 100)) > 1e-9:
                raise ValueError(f"spreads.{i}: {spread} is not a multiple of 0.01 (its key is spread_sweep.s<percent>)")
        if len({round(s * 100) for s in self.spreads}) != len(self.spreads):
            raise ValueError(f"spreads: duplicates in {self.spreads}")
        if self.bidder in SHADING_BIDDERS and self.protocol != "first_price":
            raise ValueError(f"bidder: {self.bidder!r} shades its bids and runs under first_price only, not {self.protocol!r}")
        return self


class OtherReadingParams(ParamsModel):
    enabled: bool = True
    """Also run Thompson sampling and Bayes-optimal (first_price) with the other reading of their belief (`thompson.reading` / `bayes_optimal.reading` swapped), batched with the density sweep; results under `chain.other_reading.*`."""
    densities: list[Annotated[int, Field(ge=1, le=64)]] = [1, 2, 4]
    """Agents per edge N for the other reading (each must be one of `chain.densities`' range 1..64)."""


class ChainParams(ParamsModel):
    enabled: bool = True
    """Run the synthetic chain-translation density sweep (domain 1, seed 004 §5.1)."""
    densities: list[Annotated[int, Field(ge=1, le=64)]] = [1, 2, 4]
    """Agents per edge N (N = 1: monopsonies; N > 1: imperfect competition)."""
    cost_spread: float = Field(0.2, ge=0)
    """Cost heterogeneity among the N agents of an edge: agent j pays cost x (1 + cost_spread x j / (N - 1))."""
    terminal_reward: float = Field(1.0, gt=0)
    """US dollars the consumer pays the agent whose translation reaches the task's target."""
    graph: GraphParams = GraphParams()
    """Languages and translator edges."""
    rounds: int = Field(500, ge=1)
    """Training rounds; each round runs `tasks_per_round` tasks side by side, then every bidder learns."""
    tasks_per_round: int = Field(8, ge=1)
    """Tasks auctioned concurrently in one round (wallets and bankruptcies are settled per round)."""
    final_rounds: int = Field(50, ge=1)
    """Rounds at the end (exploration off) over which success, cost, margins, subsidies and prices are reported."""
    n_tasks: int = Field(256, ge=1)
    """Distinct tasks (texts) in the pool; each has its own embedding around its target's prototype."""
    embedding_dim: int = Field(64, ge=2)
    """Dimension of the task embedding and of the language embedding (the state concatenates both)."""
    task_noise: float = Field(0.5, ge=0)
    """Std of a task's embedding around its target-language prototype (per dimension)."""
    max_steps: int = Field(6, ge=1)
    """Auctions per task at most; a task still unfinished then fails."""
    spread_sweep: SpreadSweepParams = SpreadSweepParams()
    """Sweep over the cost spread between competing agents (degree of imperfect competition)."""
    other_reading: OtherReadingParams = OtherReadingParams()
    """Thompson sampling and Bayes-optimal under the other reading of their belief."""

    @model_validator(mode="after")
    def _check(self) -> ChainParams:
        if self.final_rounds > self.rounds:
            raise ValueError(f"final_rounds ({self.final_rounds}) exceeds rounds ({self.rounds})")
        edges = [(e.src, e.dst) for e in self.graph.edges]
        for target in self.graph.targets:
            hops = shortest_hops(self.graph.source, target, edges)
            if hops > self.max_steps:
                raise ValueError(f"max_steps ({self.max_steps}) is below the {hops} hops from {self.graph.source!r} to {target!r}")
        return self


class VerifierStepParams(ParamsModel):
    enabled: bool = True
    """After each answer the shared verifier (params `evaluation.verifier`) checks it; a rejected answer goes back to the market for another solve. Off: the first answer is final (verifier `none`)."""
    max_solves: int = Field(3, ge=1)
    """Solves per item at most (a solver never answers the same item twice: its cached answer would not change)."""


class AnswersParams(ParamsModel):
    enabled: bool = True
    """Run the market over the cached solver answers (domain 2) and write summary rows for the frontier."""
    solvers: list[str] | None = None
    """Solvers that become bidding agents (distinct names from params `solvers`, any number); null =
    every solver in params `solvers`. The market's tensors and time grow linearly with the agents
    (solvers x agents_per_solver), so no count is refused."""
    agents_per_solver: int = Field(1, ge=1)
    """Agents backed by each frozen solver (clones differ only in cost, see cost_spread); any number."""
    cost_spread: float = Field(0.1, ge=0)
    """Clone j of N pays the cached cost x (1 + cost_spread x j / (N - 1)); no effect with one agent per solver."""
    reward_multiples: list[Annotated[float, Field(gt=0)]] = [0.5, 1.0, 2.0, 5.0, 10.0, 50.0]
    """Terminal rewards (one operating point each), in units of the most expensive solver's mean cost per item on train."""
    epochs: int = Field(2, ge=1)
    """Passes over the train split (bidders learn); the test split is then auctioned once with learning off."""
    items_per_round: int = Field(64, ge=1)
    """Items auctioned concurrently in one round."""
    verifier: VerifierStepParams = VerifierStepParams()
    """The verifier step between solves (its verdicts come from the shared `evaluation.verifier`)."""


class TrajectoryParams(ParamsModel):
    train_every: int = Field(10, ge=1)
    """Write every auction of every n-th training round (1 = all of them, ~5 M rows and a third of the stage's time at the default scale; 10 = ~1 M rows); the chain's final rounds and the answers test split are always written in full."""


class MarketParams(StudyParams):
    seeds: int = Field(5, ge=1)
    """Independent markets per cell (batched inside the tensors)."""
    seed: int = 0
    """Base seed."""
    device: str = "cpu"
    """torch device (cpu / cuda)."""
    threads: int = Field(1, ge=1)
    """torch CPU threads (the networks are tiny; one thread is fastest and leaves cores to others)."""
    workers: int = Field(2, ge=1)
    """Processes for the markets: each (domain, bidder) market is a job for a pool of this many spawned processes (the DAG's two cores), whose MLflow children this process logs as they arrive; 1 runs them one after the other in this process. Each market is seeded by its domain and bidder alone, so the numbers are the same either way."""
    protocols: list[Protocol] = ["first_price", "second_price", "ccv"]
    """Auction protocols: 1st-price (bucket brigade), 2nd-price (Vickrey, platform subsidy), ccv (credit-conserving Vickrey)."""
    bidders: list[Bidder] = ["mirror_descent", "thompson", "bayes_optimal", "ppo", "truthful"]
    """Bidding algorithms; shading ones run under first_price, `truthful` under every listed protocol."""
    gamma: float = Field(1.0, gt=0, le=1)
    """Discount: the seller receives gamma x the protocol's price (the rest stays with the platform)."""
    learning: LearningParams = LearningParams()
    """Bidder networks, exploration and shade bounds."""
    mirror_descent: MirrorDescentParams = MirrorDescentParams()
    """Mirror Descent shading."""
    thompson: ThompsonParams = ThompsonParams()
    """Thompson-sampling shading."""
    bayes_optimal: BayesOptimalParams = BayesOptimalParams()
    """Bayes-optimal shading."""
    ppo: PPOParams = PPOParams()
    """PPO shading."""
    wallet: WalletParams = WalletParams()
    """Balances and bankruptcy."""
    chain: ChainParams = ChainParams()
    """Domain 1: synthetic chain translation."""
    answers: AnswersParams = AnswersParams()
    """Domain 2: a market over the cached solver answers."""
    trajectories: TrajectoryParams = TrajectoryParams()
    """What goes to the trajectory store."""

    @model_validator(mode="after")
    def _check(self) -> MarketParams:
        for name, values in (("protocols", self.protocols), ("bidders", self.bidders)):
            if not values:
                raise ValueError(f"{name}: list at least one")
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: duplicates in {values}")
        if not market_cells(list(self.protocols), list(self.bidders)):
            raise ValueError(
                "protocols x bidders: no cell runs (shading bidders run under first_price only; add first_price or truthful)"
            )
        if not (self.chain.enabled or self.answers.enabled):
            raise ValueError("chain.enabled and answers.enabled are both false: nothing to run")
        return self
