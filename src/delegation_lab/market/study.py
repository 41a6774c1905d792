"""The study's two sweeps, each cell's seeds (and protocols, and reward levels) batched in one market.

- `run_chain`: the density sweep N x protocol x bidder on the synthetic translation chain. Every
  round plays `tasks_per_round` tasks per market, then every bidder learns; results are read over
  the last `final_rounds` rounds (shade exploration is off by then; the market keeps learning).
- `run_answers`: the market over cached solver answers: bidders learn on the train split (`epochs`
  passes), then the test split is auctioned once with learning, exploration and probes off.

Both return one `WorldResult` per market (cell x seed) and the auction rows for the trajectories;
`run_study` runs both as the stage does (in a pool of processes with `workers` > 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import dataclass, field

import numpy as np
import torch

from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.market.answers import AnswersDomain, SplitMatrix
from delegation_lab.market.chain import ChainCell, ChainDomain, density_cells
from delegation_lab.market.engine import Market
from delegation_lab.market.inputs import MarketInputs
from delegation_lab.market.params import BELIEF_BIDDERS, MarketParams, market_cells
from delegation_lab.market.trajectories import AuctionRecorder
from delegation_lab.pipeline.parallel import spawn_pool
from delegation_lab.pipeline.phases import Phases, stopwatch

Progress = Callable[[str, int], Callable[[int], None]]  # (label, total) -> advance(n)


def no_progress(label: str, total: int) -> Callable[[int], None]:
    return lambda n: None


def progress_bars(enabled: bool) -> Progress:
    """A tqdm bar per label (closed when it reaches its total), or `no_progress`."""
    if not enabled:
        return no_progress

    def make(label: str, total: int) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=label, leave=False)

        def advance(n: int) -> None:
            bar.update(n)
            if bar.n >= total:
                bar.close()

        return advance

    return make


@dataclass
class WorldResult:
    domain: str  # chain | answers
    protocol: str
    bidder: str
    seed: int
    density: int | None = None
    multiple: float | None = None
    reward_usd: float = 1.0
    final: dict = field(default_factory=dict)
    curves: dict[str, np.ndarray] = field(default_factory=dict)
    bankrupt_agents: list[str] = field(default_factory=list)
    cost_spread: float | None = None  # chain: cost spread between an edge's agents
    reading: str | None = None  # chain, Thompson / Bayes-optimal: what the belief is fitted to
    group: str = "main"  # chain: main density sweep | spread (spread_sweep) | other_reading
    centralised_cost: float | None = None  # chain: what one planner seeing every cost pays per task (same task pool)
    verifier: str | None = None  # answers: what decided acceptance (Verifier.name, or `none`)
    items: dict[str, np.ndarray] = field(default_factory=dict)  # answers test split: item_id, correct, cost per item

    @property
    def cell(self) -> str:
        if self.domain == "chain":
            return f"chain-{self.protocol}-{self.bidder}-N{self.density}"
        return f"{self.protocol}-{self.bidder}"

    @property
    def method(self) -> str:
        """Trajectory partition name (answers: one per operating point)."""
        return self.cell if self.domain == "chain" else f"{self.cell}@{operating_point(self.multiple)}"


def operating_point(multiple: float | None) -> str:
    return f"R{multiple:g}x"


@dataclass
class SweepResult:
    worlds: list[WorldResult]
    trajectories: dict[tuple[str, int], object]  # (partition, seed) -> polars frame
    points: dict[str, tuple[str, str]] = field(default_factory=dict)  # partition -> the summary rows' (method, operating point)
    seconds: dict[str, float] = field(default_factory=dict)
    rounds: dict[str, int] = field(default_factory=dict)

    def extend(self, other: SweepResult) -> None:
        """Append another part (e.g. the next bidder's markets) in order."""
        self.worlds += other.worlds
        self.trajectories.update(other.trajectories)
        self.points.update(other.points)
        self.seconds.update(other.seconds)
        self.rounds.update(other.rounds)


def explore_at(params: MarketParams, round_index: int, total: int) -> float:
    lp = params.learning
    return lp.explore_std * max(0.0, 1.0 - round_index / max(1.0, lp.explore_until * total))


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den > 0 else None


def _sum_stats(history: list[dict[str, torch.Tensor]]) -> dict[str, np.ndarray]:
    return {k: torch.stack([h[k] for h in history]).sum(0).cpu().numpy() for k in history[0]}


def _curves(history: list[dict[str, torch.Tensor]]) -> dict[str, np.ndarray]:
    """Per-round, per-world learning curves [rounds, W]."""
    stack = {k: torch.stack([h[k] for h in history]).cpu().numpy() for k in ("tasks", "successes", "margin", "auctions_won", "subsidy", "alive", "route_cost_success", "cost")}
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "success": stack["successes"] / stack["tasks"],
            "margin": np.where(stack["auctions_won"] > 0, stack["margin"] / np.maximum(stack["auctions_won"], 1), np.nan),
            "subsidy": stack["subsidy"] / stack["tasks"],
            "alive": stack["alive"],
            "route_cost": np.where(stack["successes"] > 0, stack["route_cost_success"] / np.maximum(stack["successes"], 1), np.nan),
            "cost": stack["cost"] / stack["tasks"],
        }


def _torch_setup(params: MarketParams) -> torch.device:
    torch.set_num_threads(params.threads)
    return torch.device(params.device)


def _market_seed(params: MarketParams, domain: str, bidder: str) -> int:
    return int(params.seed * 1_000_003 + sum(ord(c) for c in domain + bidder))


# ---------------------------------------------------------------------------------------------
# both domains, each (domain, bidder) market a job


Part = tuple[str, str]  # (domain, bidder): one `Market`, seeded by these two alone


def market_parts(params: MarketParams, answers: bool) -> list[tuple[str, str, list[str]]]:
    """(domain, bidder, protocols) of every market in the order a pool takes them: the chain markets
    first (the larger ones), then the answers markets with the last bidder first (`truthful` runs
    under every protocol; the smaller shading-bidder markets fill the gaps at the end)."""
    bidders = bidder_protocols(params)
    parts = [("chain", b, p) for b, p in bidders.items()] if params.chain.enabled else []
    if answers:
        parts += [("answers", b, p) for b, p in reversed(bidders.items())]
    return parts


def run_part(params: MarketParams, domain: str, bidder: str, protocols: list[str], matrices: dict[str, SplitMatrix] | None,
             n_buckets: int, solvers: list[str], verifier: Verifier | None, progress: Progress = no_progress) -> SweepResult:
    """One (domain, bidder) market; a pool worker's job (top level, so a spawned process can run it)."""
    if domain == "chain":
        return run_chain_bidder(params, bidder, protocols, progress)
    return run_answers_bidder(params, matrices, n_buckets, solvers, verifier, bidder, protocols, progress)


def run_markets(
    params: MarketParams,
    matrices: dict[str, SplitMatrix] | None,
    n_buckets: int,
    solvers: list[str],
    verifier: Verifier | None,
    workers: int,
    on_part: Callable[[SweepResult], None] | None = None,
    progress: Progress = no_progress,
) -> tuple[SweepResult, SweepResult]:
    """Both domains (answers only with `matrices`), every (domain, bidder) market in a pool of
    `workers` spawned processes. Each market is seeded by its domain and bidder alone (its network
    init, task draws and shading noise) and batched exactly as in `run_chain` / `run_answers`, so the
    pool changes the wall time, never a figure: the results are put back in their sequential order.
    `on_part` sees each market's result in this process as it arrives (e.g. to log it while the
    others still run)."""
    parts = market_parts(params, matrices is not None)
    done: dict[Part, SweepResult] = {}
    advance = progress("markets", len(parts))
    with spawn_pool(min(workers, len(parts))) as pool:
        futures = {pool.submit(run_part, params, domain, bidder, protocols, matrices if domain == "answers" else None,
                               n_buckets, solvers, verifier): (domain, bidder) for domain, bidder, protocols in parts}
        for future in as_completed(futures):
            part = future.result()
            done[futures[future]] = part
            if on_part is not None:
                on_part(part)
            advance(1)
    chain, answers = SweepResult([], {}), SweepResult([], {})
    for bidder in bidder_protocols(params):  # the sequential order: bidder by bidder, chain then answers
        for domain, out in (("chain", chain), ("answers", answers)):
            if (domain, bidder) in done:
                out.extend(done[(domain, bidder)])
    return chain, answers


def run_study(params: MarketParams, inputs: MarketInputs, phases: Phases,
              on_part: Callable[[SweepResult], None] = lambda part: None,
              progress: Progress = no_progress) -> tuple[SweepResult, SweepResult, float]:
    """Both sweeps as the stage runs them (answers only with `inputs.matrices`). `workers` > 1: every
    market in a pool (phase `markets`), `on_part` seeing each one's result as it arrives while the
    others still run; else the chain sweep, then the answers sweep (phases `chain`, `answers`), then
    `on_part` on each. Returns (chain, answers, the wall seconds of the markets)."""
    if params.workers > 1:
        with phases("markets") as markets:
            chain, answers = run_markets(params, inputs.matrices, inputs.n_buckets, inputs.solvers, inputs.verifier,
                                         params.workers, on_part, progress)
        return chain, answers, markets.seconds
    with phases("chain") as chain_lap:
        chain = run_chain(params, progress) if params.chain.enabled else SweepResult([], {})
    with phases("answers") as answers_lap:
        answers = (run_answers(params, inputs.matrices, inputs.n_buckets, inputs.solvers, inputs.verifier, progress)
                   if inputs.matrices is not None else SweepResult([], {}))
    on_part(chain)
    on_part(answers)
    return chain, answers, chain_lap.seconds + answers_lap.seconds


# ---------------------------------------------------------------------------------------------
# domain 1


def reading_of(params: MarketParams, bidder: str) -> str:
    """The belief reading a bidder's params configure (`rival_bid` for bidders without a belief)."""
    return getattr(params, bidder).reading if bidder in BELIEF_BIDDERS else "rival_bid"


def chain_cells(params: MarketParams, bidder: str, protocols: list[str], seeds: list[int]) -> list[ChainCell]:
    """Every chain market of one bidder, batched in one `Market`: the density sweep, the cost-spread
    sweep (when this bidder runs it) and the other belief reading (Thompson, Bayes-optimal)."""
    cp = params.chain
    reading = reading_of(params, bidder)
    cells = density_cells(cp, protocols, seeds, reading)
    sweep = cp.spread_sweep
    if sweep.enabled and sweep.bidder == bidder and sweep.protocol in protocols:
        cells += [ChainCell(sweep.protocol, sweep.density, s, spread, reading, "spread") for spread in sweep.spreads for s in seeds]
    other = cp.other_reading
    if other.enabled and bidder in BELIEF_BIDDERS and "first_price" in protocols:
        flipped = "win_loss" if reading == "rival_bid" else "rival_bid"
        cells += [ChainCell("first_price", n, s, cp.cost_spread, flipped, "other_reading") for n in other.densities for s in seeds]
    return cells


def bidder_protocols(params: MarketParams) -> dict[str, list[str]]:
    """Each bidder's protocols, in the order its markets run: one `Market` per (domain, bidder)."""
    cells = market_cells(list(params.protocols), list(params.bidders))
    return {bidder: [p for p, b in cells if b == bidder] for bidder in dict.fromkeys(b for _, b in cells)}


def run_chain(params: MarketParams, progress: Progress = no_progress, record_every: int | None = None) -> SweepResult:
    out = SweepResult([], {})
    for bidder, protocols in bidder_protocols(params).items():
        out.extend(run_chain_bidder(params, bidder, protocols, progress, record_every))
    return out


def run_chain_bidder(params: MarketParams, bidder: str, protocols: list[str], progress: Progress = no_progress,
                     record_every: int | None = None) -> SweepResult:
    """One bidder's chain markets (every protocol, density, seed, and its spread / other-reading
    cells), batched in one `Market` seeded by the bidder alone: independent of every other bidder.
    Its wall seconds: `seconds["chain/<bidder>"]`."""
    with stopwatch() as lap:
        out = _chain_bidder(params, bidder, protocols, progress, record_every)
    out.seconds[f"chain/{bidder}"] = lap.seconds
    return out


def _chain_bidder(params: MarketParams, bidder: str, protocols: list[str], progress: Progress,
                  record_every: int | None) -> SweepResult:
    device = _torch_setup(params)
    cp = params.chain
    seeds = [params.seed + i for i in range(params.seeds)]
    out = SweepResult([], {})
    every = params.trajectories.train_every if record_every is None else record_every
    domain = ChainDomain(cp, protocols, seeds, device, cells=chain_cells(params, bidder, protocols, seeds))
    market = Market(domain, domain.worlds(), bidder, params, device, seed=_market_seed(params, "chain", bidder))
    recorder = AuctionRecorder(every, keep=np.array([c.group == "main" for c in domain.cells]))
    history = []
    advance = progress(f"chain {bidder}", cp.rounds)
    for r in range(cp.rounds):
        log = market.play(r, cp.tasks_per_round, explore_at(params, r, cp.rounds), params.learning.probe_rate)
        market.learn(log)
        history.append({k: v.detach().clone() for k, v in log.stats.items()})
        recorder.add(log, r, r * cp.tasks_per_round, "train", _task_labels, force=r >= cp.rounds - cp.final_rounds)
        advance(1)
    window = _sum_stats(history[cp.rounds - cp.final_rounds :])
    curves = _curves(history)
    alive = market.alive.cpu().numpy()
    exists = domain.exists.cpu().numpy()
    planner = domain.centralised_route_cost().mean(1).cpu().numpy()  # [W] over the task pool
    for w, cell in enumerate(domain.cells):
        res = WorldResult(
            "chain", cell.protocol, bidder, cell.seed, density=cell.density, reward_usd=cp.terminal_reward,
            cost_spread=cell.cost_spread, reading=cell.reading if bidder in BELIEF_BIDDERS else None, group=cell.group,
            centralised_cost=float(planner[w]),
        )
        res.final = _chain_final(window, w, domain)
        res.curves = {k: v[:, w] for k, v in curves.items()}
        res.bankrupt_agents = [domain.agent_names[a] for a in range(domain.n_agents) if exists[w, a] and not alive[w, a]]
        out.worlds.append(res)
    for w, frame in recorder.frames(domain.agent_names, domain.languages).items():  # main cells only
        out.trajectories[(f"chain-{domain.cells[w].protocol}-{bidder}-N{domain.cells[w].density}", domain.cells[w].seed)] = frame
    out.rounds[f"chain/{bidder}"] = cp.rounds
    return out


def _task_labels(index: np.ndarray) -> np.ndarray:
    return np.char.add("task", index.astype(str))


def _chain_final(s: dict[str, np.ndarray], w: int, domain: ChainDomain) -> dict:
    tasks, succ = s["tasks"][w], s["successes"][w]
    prices, subs = {}, {}
    for i, lang in enumerate(domain.languages):
        n = s["place_auctions"][w, i]
        if n > 0:
            prices[lang] = float(s["place_price"][w, i] / n)
            subs[lang] = float(s["place_subsidy"][w, i] / n)
    return {
        "success": float(succ / tasks),
        "route_cost": _ratio(s["route_cost_success"][w], succ),
        "optimal_route": _ratio(s["optimal_route"][w], succ),
        "cost_per_task": float(s["cost"][w] / tasks),
        "margin": _ratio(s["margin"][w], s["auctions_won"][w]),
        "subsidy": float(s["subsidy"][w] / tasks),
        "consumer_pays": float(-s["consumer_net"][w] / tasks),
        "auctions_per_task": float(s["auctions_won"][w] / tasks),
        "welfare": float((succ * float(domain.reward[w]) - s["cost"][w]) / tasks),  # reward earned minus inference cost, per task
        "price": prices,
        "subsidy_at": subs,
    }


# ---------------------------------------------------------------------------------------------
# domain 2


def run_answers(
    params: MarketParams,
    matrices: dict[str, SplitMatrix],
    n_buckets: int,
    solvers: list[str],
    verifier: Verifier,
    progress: Progress = no_progress,
    record_every: int | None = None,
) -> SweepResult:
    """`verifier` decides whether an answer is accepted (the shared `evaluation.verifier`)."""
    out = SweepResult([], {})
    for bidder, protocols in bidder_protocols(params).items():
        out.extend(run_answers_bidder(params, matrices, n_buckets, solvers, verifier, bidder, protocols, progress, record_every))
    return out


def run_answers_bidder(
    params: MarketParams,
    matrices: dict[str, SplitMatrix],
    n_buckets: int,
    solvers: list[str],
    verifier: Verifier,
    bidder: str,
    protocols: list[str],
    progress: Progress = no_progress,
    record_every: int | None = None,
) -> SweepResult:
    """One bidder's answers markets (every protocol, reward multiple, seed) in one `Market` seeded by
    the bidder alone: independent of every other bidder. Its wall seconds: `seconds["answers/<bidder>"]`."""
    with stopwatch() as lap:
        out = _answers_bidder(params, matrices, n_buckets, solvers, verifier, bidder, protocols, progress, record_every)
    out.seconds[f"answers/{bidder}"] = lap.seconds
    return out


def _answers_bidder(params: MarketParams, matrices: dict[str, SplitMatrix], n_buckets: int, solvers: list[str],
                    verifier: Verifier, bidder: str, protocols: list[str], progress: Progress,
                    record_every: int | None) -> SweepResult:
    device = _torch_setup(params)
    ap = params.answers
    seeds = [params.seed + i for i in range(params.seeds)]
    out = SweepResult([], {})
    every = params.trajectories.train_every if record_every is None else record_every
    K = ap.items_per_round
    domain = AnswersDomain(matrices, n_buckets, solvers, ap, protocols, seeds, verifier, device)
    market = Market(domain, domain.worlds(), bidder, params, device, seed=_market_seed(params, "answers", bidder))
    recorder = AuctionRecorder(every)
    n_train = len(matrices["train"].item_ids)
    per_epoch = math.ceil(n_train / K)
    total = per_epoch * ap.epochs
    history = []
    advance = progress(f"answers {bidder}", total)
    r = 0
    for epoch in range(ap.epochs):
        domain.begin("train", epoch)
        for i in range(per_epoch):
            n = min(K, n_train - i * K)
            log = market.play(r, n, explore_at(params, r, total), params.learning.probe_rate)
            market.learn(log)
            history.append({k: v.detach().clone() for k, v in log.stats.items()})
            recorder.add(log, r, epoch * n_train + i * K, "train", domain.item_ids)
            r += 1
            advance(1)
    n_test = domain.begin("test", 0)
    test_history, test_items = [], []
    for i in range(math.ceil(n_test / K)):
        log = market.play(total + i, min(K, n_test - i * K), 0.0, 0.0)
        test_history.append(log.stats)
        test_items.append((log.steps[0].item.cpu().numpy(), log.success.cpu().numpy(), log.route_cost.cpu().numpy()))
        recorder.add(log, total + i, i * K, "test", domain.item_ids, force=True)
    item, success, cost = (np.concatenate([t[j] for t in test_items], axis=1) for j in range(3))  # [W, n_test]
    window = _sum_stats(test_history)
    curves = _curves(history)
    alive = market.alive.cpu().numpy()
    for w, cell in enumerate(domain.cells):
        res = WorldResult("answers", cell.protocol, bidder, cell.seed, multiple=cell.multiple, reward_usd=float(domain.reward[w]))
        res.final = _answers_final(window, w, domain)
        res.curves = {k: v[:, w] for k, v in curves.items()}
        res.bankrupt_agents = [domain.agent_names[a] for a in range(domain.n_agents) if not alive[w, a]]
        res.verifier = domain.verifier_name
        res.items = {"item_id": domain.item_ids(item[w]), "correct": success[w], "cost": cost[w].astype(np.float64)}
        out.worlds.append(res)
    places = [f"solve{j + 1}" for j in range(domain.n_places)]
    for w, frame in recorder.frames(domain.agent_names, places).items():
        cell = domain.cells[w]
        method, point = f"{cell.protocol}-{bidder}", operating_point(cell.multiple)  # as summary_rows names it
        out.trajectories[(f"{method}@{point}", cell.seed)] = frame
        out.points[f"{method}@{point}"] = (method, point)
    out.rounds[f"answers/{bidder}"] = total
    return out


def _answers_final(s: dict[str, np.ndarray], w: int, domain: AnswersDomain) -> dict:
    tasks = s["tasks"][w]
    R = float(domain.reward[w])
    wins = s["wins"][w]
    by_solver = {name: 0.0 for name in domain.solvers}
    first = {name: 0.0 for name in domain.solvers}
    for a in range(domain.n_agents):
        name = domain.solvers[int(domain.agent_solver[a])]
        by_solver[name] += float(wins[a])
        first[name] += float(s["first_wins"][w, a])
    n_first = max(float(s["first_sold"][w]), 1.0)
    return {
        "accuracy": float(s["successes"][w] / tasks),
        "cost_per_item": float(s["cost"][w] / tasks),
        "calls_per_item": float(s["calls"][w] / tasks),
        "margin": _ratio(s["margin"][w], s["auctions_won"][w]),
        "margin_share": _ratio(s["margin"][w], s["auctions_won"][w] * R),
        "subsidy": float(s["subsidy"][w] / tasks),
        "clearing_price": _ratio(s["first_price"][w], s["first_sold"][w]),
        "consumer_pays": float(-s["consumer_net"][w] / tasks),
        "first_solver_share": {k: v / n_first for k, v in first.items()},
        "calls_by_solver": {k: v / tasks for k, v in by_solver.items()},
        "reward_usd": R,
        "n_items": int(tasks),
    }
