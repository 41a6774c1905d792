"""The `history_game` study: equilibrium value sets of game specs, and independent Q-learning on
the alternating help game without and with virtual money (History Matters §2.3, §2.4, §3.3).
Solves the games, trains every condition (`train_conditions`), builds the metrics (paper figures
beside ours, `study_metrics`), learning curves and trajectory rows; `games.plots` draws the figures,
`stages/history_game.py` does the I/O and MLflow logging (`games.mlflow_log`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.evaluation.statistics import DDOF, seed_interval
from delegation_lab.games.equilibria import GameTooLarge, Solution, solve
from delegation_lab.games.help_game import AGENTS, NULL, PHYSICAL, YES, HelpGame
from delegation_lab.games.iql import BatchedIQL, IQLResult, StateKind, train_iql
from delegation_lab.games.limits import check_spec_memory, parse_size
from delegation_lab.games.params import EquilibriaParams, HistoryGameParams
from delegation_lab.games.report import DEFAULT_MAX_PROFILES, number
from delegation_lab.games.spec import Game, compile_game, load_game_spec
from delegation_lab.pipeline.parallel import spawn_pool
from delegation_lab.pipeline.phases import Phases

CONDITIONS = {"no_transfer": False, "transfer": True}
METHOD = {"no_transfer": "iql_no_transfer", "transfer": "iql_transfer"}

# History Matters §2.3 (motivating example) and §3.3 (Figure 5 and its text).
PAPER_EQUILIBRIA: dict[str, dict[str, Any]] = {
    "motivating_example": {
        "history": {"count": 5, "values": [[0.0, 5.0], [4.4, 6.0], [4.5, 5.0], [8.9, 6.0], [9.0, 5.0]]},
        "markov": {"count": 3, "values": [[0.0, 5.0], [4.5, 5.0], [9.0, 5.0]]},
        "favoured": {"player": "B", "values": {"A": 8.9, "B": 6.0}},
    }
}
PAPER_MONEY = {
    "no_transfer": {"return_mean": 0.0, "helps_mean": 0.0},
    "transfer": {"return_mean": 990.0, "helps_mean": 10.0, "payments_mean": 10.0},
}


# ---------------------------------------------------------------------------------------------
# equilibria


def load_games(params: EquilibriaParams, root: Path) -> list[Game]:
    """Every spec of the section, validated (and the favoured player checked) before any work."""
    games = []
    for k, ref in enumerate(params.games):
        path = root / ref
        try:
            spec = load_game_spec(path if path.is_file() else ref)
            check_spec_memory(spec, parse_size(params.max_memory))  # before compiling its tables
            game = compile_game(spec)
        except InputError as e:
            raise InputError(f"history_game.equilibria.games[{k}]: {e}") from None
        if params.favour is not None and params.favour not in game.players:
            raise InputError(
                f"history_game.equilibria.favour: player {params.favour!r} is not in game {game.name!r} "
                f"(players: {', '.join(game.players)})"
            )
        games.append(game)
    names = [g.name for g in games]
    if len(set(names)) != len(names):
        raise InputError(f"history_game.equilibria.games: two specs share a name ({names})")
    return games


def solve_games(games: list[Game], params: EquilibriaParams) -> dict[str, Solution]:
    """Each game within the section's work and memory limits (the stage writes each JSON with the
    default number of example profiles, plus the favoured one)."""
    limit = parse_size(params.max_memory)
    out = {}
    for g in games:
        try:
            out[g.name] = solve(g, params.favour, params.max_combinations, limit, DEFAULT_MAX_PROFILES + 1)
        except GameTooLarge as e:
            raise GameTooLarge(f"history_game.equilibria: {e}") from None
    return out


def equilibria_metrics(sol: Solution) -> dict[str, Any]:
    def as_lists(values: list) -> list[list[float]]:
        return [[number(x) for x in v] for v in values]

    hist, markov = sol.history.values(), sol.markov.values()
    out: dict[str, Any] = {
        "history": {"count": len(hist), "values": as_lists(hist)},
        "markov": {"count": len(markov), "values": as_lists(markov)},
        "history_only_count": len(set(hist) - set(markov)),
        "algorithm1_selectors": sol.history.selector_count(),
        "combinations_enumerated": sol.history.combinations,
    }
    if sol.favoured is not None:
        out["favoured"] = {"player": sol.favour, "values": {p: number(x) for p, x in zip(sol.game.players, sol.favoured, strict=True)}}
    if sol.game.name in PAPER_EQUILIBRIA:
        out["paper"] = PAPER_EQUILIBRIA[sol.game.name]
    return out


def equilibria_frame(solutions: dict[str, Solution]) -> pl.DataFrame:
    """One row per (game, kind, value vector): the value sets of §2.3 as a scatter (first two players)."""
    rows = []
    for name, sol in solutions.items():
        sets = {"history": sol.history.values(), "markov": sol.markov.values(),
                "favoured": [sol.favoured] if sol.favoured is not None else []}
        for kind, values in sets.items():
            for v in values:
                rows.append({"game": name, "kind": kind, "players": ",".join(sol.game.players),
                             "v1": number(v[0]), "v2": number(v[1]) if len(v) > 1 else 0.0})
    return pl.DataFrame(rows, schema={"game": pl.String, "kind": pl.String, "players": pl.String, "v1": pl.Float64, "v2": pl.Float64})


# ---------------------------------------------------------------------------------------------
# money transfer


def help_games(params: HistoryGameParams) -> dict[str, HelpGame]:
    return {c: HelpGame.from_params(params.game, money) for c, money in CONDITIONS.items()}


def money_metrics(result: IQLResult, late_window: int, confidence: float = 0.95) -> dict[str, Any]:
    """Greedy-policy returns after training (the paper's reported outcome), their spread over
    seeds (sample std, ddof 1) with a t interval of the mean over seeds (`*_mean_ci`), and the
    late-training (epsilon-greedy) returns."""
    per_seed = result.eval_returns.mean(axis=1)  # mean over the two agents
    late = result.returns[:, -late_window:].mean(axis=(1, 2))
    greedy, training = seed_interval(per_seed, confidence), seed_interval(late, confidence)
    out = {
        "return_mean": greedy["mean"],
        "return_std": greedy["std"],
        "return_mean_ci": [greedy["low"], greedy["high"]],
        "return_A_mean": float(result.eval_returns[:, 0].mean()),
        "return_B_mean": float(result.eval_returns[:, 1].mean()),
        "helps_mean": float(result.eval_helps.mean()),
        "helps_min": float(result.eval_helps.min()),
        "train_late_return_mean": training["mean"],
        "train_late_return_std": training["std"],
        "train_late_return_mean_ci": [training["low"], training["high"]],
        "seeds": len(result.seeds),
    }
    if result.game.money:
        out["payments_mean"] = float(result.eval_payments.mean())
    return out


def curve_frame(result: IQLResult) -> pl.DataFrame:
    """Figure 5: per training episode, the return (mean of the two agents) over seeds."""
    agent_mean = result.returns.mean(axis=2)  # (S, E)
    return pl.DataFrame({
        "episode": np.arange(1, agent_mean.shape[1] + 1),
        "return": agent_mean.mean(axis=0),
        "return_std": agent_mean.std(axis=0, ddof=DDOF) if agent_mean.shape[0] > 1 else np.zeros(agent_mean.shape[1]),
        "return_A": result.returns[:, :, 0].mean(axis=0),
        "return_B": result.returns[:, :, 1].mean(axis=0),
        "helps": result.helps.mean(axis=(0, 2)),
        "epsilon": result.epsilon,
    })


def trajectory_frames(result: IQLResult, every: int) -> dict[int, pl.DataFrame]:
    """Per seed, the steps of every `every`-th training episode (split train) and of the greedy
    evaluation episode (split eval, episode = number of training episodes); built column-wise for
    every seed at once."""
    game, T, S = result.game, result.game.steps, len(result.seeds)
    E = result.returns.shape[1]
    kept = np.arange(0, E, every)
    parts = []
    for split, log, episodes, numbers, eps in (
        ("train", result.log, kept, kept, result.epsilon[kept]),
        ("eval", result.eval_log, np.array([0]), np.array([E]), np.array([0.0])),
    ):
        n = S * len(episodes) * T
        t = np.tile(np.arange(T), S * len(episodes))
        act = t % 2
        executed = log.executed[:, episodes].reshape(n).astype(np.int64)
        chosen = log.chosen[:, episodes].reshape(n).astype(np.int64)
        offer = log.offer[:, episodes].reshape(n).astype(np.int64)
        rewards = log.rewards[:, episodes].reshape(n, 2).astype(np.float64)
        balances = log.balances[:, episodes].reshape(n, 2, game.dims).astype(np.int64)
        price = game.prices[1 - act, offer]  # (n, K)

        def lists(a: np.ndarray) -> pl.Series:
            if not a.shape[1]:
                return pl.repeat([], len(a), dtype=pl.List(pl.Int64), eager=True)
            return pl.Series(np.ascontiguousarray(a).reshape(-1)).reshape((len(a), a.shape[1])).cast(pl.List(pl.Int64))

        frame = pl.DataFrame({
            "seed": np.repeat(np.array(result.seeds), len(episodes) * T),
            "episode": np.repeat(np.tile(numbers, S), T).astype(np.int64),
            "step": t + 1,
            "active": np.array(AGENTS)[act],
            "payer": np.array(AGENTS)[1 - act],
            "executed": executed,
            "chosen_name": np.array(PHYSICAL)[chosen],
            "offer": offer,
            "price": lists(price),
            "reward_A": rewards[:, 0],
            "reward_B": rewards[:, 1],
            "balance_A": lists(balances[:, 0]),
            "balance_B": lists(balances[:, 1]),
            "epsilon": np.repeat(np.tile(eps, S), T),
        })
        parts.append(frame.select(
            "seed", "episode", "step",
            pl.lit(split).alias("split"),
            pl.lit(None, dtype=pl.String).alias("item_id"),
            pl.when(pl.col("executed") == 1).then(pl.lit("Yes")).otherwise(pl.lit("Null")).alias("action"),
            pl.when(pl.col("executed") == 1).then(pl.concat_list(pl.col("active"))).otherwise(pl.lit([], dtype=pl.List(pl.String))).alias("executors"),
            pl.lit(None, dtype=pl.Boolean).alias("correct"),
            pl.lit(None, dtype=pl.Float64).alias("cost_usd"),
            (pl.col("reward_A") + pl.col("reward_B")).alias("reward"),
            pl.lit(0, dtype=pl.Int64).alias("calls"),
            pl.struct(
                "active", "payer", pl.col("chosen_name").alias("chosen"), "offer", "price",
                (pl.col("offer") > 0).alias("paid"), ((pl.col("offer") > 0) & (pl.col("chosen_name") == "Null")).alias("forced"),
                "reward_A", "reward_B", "balance_A", "balance_B", "epsilon",
            ).struct.json_encode().alias("extra"),
        ))
    frame = pl.concat(parts)
    return {seed: part.drop("seed") for (seed,), part in frame.partition_by("seed", as_dict=True, maintain_order=True).items()}


# ---------------------------------------------------------------------------------------------
# one batch per condition: the reported learner, the discount sweep and the history-aware learners

# Rows of paper vs ours whose "ours" is not an outcome of learning (the `provenance` interface;
# unlisted rows are computed). The equilibrium value sets are computed by the exact solver.
PROVENANCE = {
    "money.no_transfer.return_mean": {"kind": "calibrated", "why": "the paper gives no discount; at our history_game.iql.gamma = 0.5 the greedy return is the paper's 0, at 0.8-0.99 it is not (money.gamma_sweep)"},
    "money.no_transfer.helps_mean": {"kind": "calibrated", "why": "0 helps at the chosen discount 0.5 only; see money.gamma_sweep"},
}


def gamma_key(g: float) -> str:
    """A discount as a metrics key without a dot (dotted key paths): 0.99 -> gamma_0p99."""
    return "gamma_" + f"{g:g}".replace(".", "p")


@dataclass(frozen=True)
class Block:
    """`iql.seeds` consecutive batch rows trained with one discount and one kind of state."""

    name: str  # main | sweep | last_action | last_action_untimed
    gamma: float
    state: StateKind


def blocks_for(params: HistoryGameParams, money: bool) -> list[Block]:
    """The reported learner first (the only block whose steps are logged), then the sweep's other
    discounts, then (without money) the history-aware learners (`HistoryGameParams.iql_blocks`,
    which the memory estimate counts too)."""
    return [Block(name, gamma, state) for name, gamma, state in params.iql_blocks(money)]  # type: ignore[arg-type]


def train_blocks(game: HelpGame, params: HistoryGameParams, blocks: list[Block],
                 progress: Any = None) -> dict[Block, IQLResult]:
    """Every block in one seed-batched run (seeds 0..S-1 in each, so blocks share random numbers)."""
    S = params.iql.seeds
    result = train_iql(game, params.iql, seeds=[s for _ in blocks for s in range(S)], progress=progress,
                       gammas=[b.gamma for b in blocks for _ in range(S)], states=[b.state for b in blocks for _ in range(S)],
                       log_rows=S)
    return {b: result.rows(k * S, (k + 1) * S) for k, b in enumerate(blocks)}


def sweep_metrics(results: dict[str, dict[Block, IQLResult]], confidence: float = 0.95) -> dict[str, Any]:
    """money.gamma_sweep: per discount and condition, the greedy return per agent over seeds (t interval)."""
    out: dict[str, Any] = {}
    for cond, by_block in results.items():
        for b, r in by_block.items():
            if b.state != "markov":
                continue
            per_seed = r.eval_returns.mean(axis=1)
            iv = seed_interval(per_seed, confidence)
            best = (r.game.steps // 2) * (r.game.help_benefit - r.game.help_cost)
            out.setdefault(gamma_key(b.gamma), {"gamma": b.gamma})[cond] = {
                "return_mean": iv["mean"], "return_mean_ci": [iv["low"], iv["high"]],
                "helps_mean": float(r.eval_helps.mean()),
                "seeds_at_zero": int((per_seed == 0).sum()), "seeds_at_full_help": int(np.isclose(per_seed, best).sum()),
                "seeds": len(r.seeds),
            }
    return dict(sorted(out.items(), key=lambda kv: kv[1]["gamma"]))


def greedy_answers(iql_rows: BatchedIQL, q: list[np.ndarray], untimed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Without money: per seed and each agent's active step t >= 1, does the greedy policy play Yes
    after the other's Yes, and after its Null? (S, decisions) bools each, and the opening move (S,)."""
    after_yes, after_null = [], []
    for t in range(1, iql_rows.T):
        i = t % 2
        tt = t % 2 if untimed else t
        for last, into in ((YES, after_yes), (NULL, after_null)):
            row = int(iql_rows._row(tt, 0, last, 0))
            into.append(q[i][:, row, YES] > q[i][:, row, NULL])
    first = int(iql_rows._row(0, 0, iql_rows.start, 0))
    return np.stack(after_yes, 1), np.stack(after_null, 1), q[0][:, first, YES] > q[0][:, first, NULL]


def history_learner_metrics(game: HelpGame, params: HistoryGameParams, by_block: dict[Block, IQLResult],
                            confidence: float = 0.95) -> dict[str, Any]:
    """history_learner: per kind of state and discount, the greedy return per agent and helps (t
    intervals over seeds), and how the greedy policy answers the other's last action: `answers_help`
    = share of decisions after the other's Yes that are Yes, `tit_for_tat` = share of decisions that
    copy the other's last action (Yes after Yes and Null after Null), `opens_with_help` = A's first move."""
    shape = BatchedIQL(game, params.iql, [0], states=["last_action"])  # the row layout, one seed
    markov = {b.gamma: r for b, r in by_block.items() if b.state == "markov"}
    out: dict[str, Any] = {}
    for b, r in by_block.items():
        if b.state == "markov":
            continue
        yes, null, opens = greedy_answers(shape, r.q, b.state == "last_action_untimed")
        per_seed = r.eval_returns.mean(axis=1)
        block: dict[str, Any] = {"gamma": b.gamma, "seeds": len(r.seeds)}
        for key, x in (("return_mean", per_seed), ("helps_mean", r.eval_helps.mean(axis=1)),
                       ("answers_help", yes.mean(axis=1)), ("tit_for_tat", ((yes & ~null).mean(axis=1)))):
            iv = seed_interval(x, confidence)
            block[key], block[f"{key}_ci"] = iv["mean"], [iv["low"], iv["high"]]
        block["opens_with_help"] = float(opens.mean())
        block["seeds_with_help"] = int((r.eval_helps.sum(axis=1) > 0).sum())
        if b.gamma in markov:
            block["markov_return_mean"] = float(markov[b.gamma].eval_returns.mean())
        out.setdefault(b.state, {})[gamma_key(b.gamma)] = block
    return out


@dataclass
class MoneyRun:
    condition: str
    result: IQLResult
    metrics: dict[str, Any]
    curve: pl.DataFrame


def summary_line(runs: dict[str, MoneyRun]) -> str:
    return "; ".join(
        f"{c}: greedy return {r.metrics['return_mean']:.1f} ± {r.metrics['return_std']:.1f}, "
        f"helps {r.metrics['helps_mean']:.2f}/{(r.result.game.steps + 1) // 2}"
        for c, r in runs.items()
    )


def iql_progress_bar(enabled: bool, episodes: int, condition: str) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    """(a tqdm bar's advance-by-one-episode, its close), or (None, a no-op) when hidden."""
    if not enabled:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=episodes, desc=f"IQL {condition}", unit="ep", mininterval=1.0)
    return (lambda e: bar.update(1)), bar.close


def train_conditions(envs: dict[str, HelpGame], params: HistoryGameParams, confidence: float = 0.95,
                     progress: bool = False) -> tuple[dict[str, MoneyRun], dict[str, dict[Block, IQLResult]]]:
    """Every condition's blocks (the reported learner, the gamma sweep, history-aware learners) and
    its reported run. The conditions are independent batches (each seed draws from its own
    generator): all but the first train in `workers` - 1 spawned processes while this one trains the
    first. Returns (the reported run per condition, every block's result per condition)."""
    runs: dict[str, MoneyRun] = {}
    batches: dict[str, dict[Block, IQLResult]] = {}
    conditions = list(envs)
    with ExitStack() as stack:
        pool = None
        if params.workers > 1 and len(conditions) > 1:
            pool = stack.enter_context(spawn_pool(min(params.workers - 1, len(conditions) - 1), deterministic=False))
        elsewhere = {c: pool.submit(train_blocks, envs[c], params, blocks_for(params, CONDITIONS[c])) for c in conditions[1:]} if pool else {}
        for condition in conditions:
            blocks = blocks_for(params, CONDITIONS[condition])
            if condition in elsewhere:
                batches[condition] = elsewhere[condition].result()
            else:
                advance, close = iql_progress_bar(progress, params.iql.episodes, condition)
                batches[condition] = train_blocks(envs[condition], params, blocks, progress=advance)
                close()
            result = batches[condition][blocks[0]]
            runs[condition] = MoneyRun(condition, result, money_metrics(result, params.iql.late_window, confidence), curve_frame(result))
    return runs, batches


def study_metrics(solutions: dict[str, Solution], runs: dict[str, MoneyRun], batches: dict[str, dict[Block, IQLResult]],
                  envs: dict[str, HelpGame], params: HistoryGameParams, confidence: float, phases: Phases) -> dict[str, Any]:
    """The stage's metrics/history_game.json: the equilibria, the money runs and the gamma sweep (paper beside
    ours), the history-aware learners, provenance and the timing (phases `solve`, `iql`)."""
    metrics = {
        # its own environment: the game specs and the help game, whatever data.dataset is
        "dataset": "own (game specs and the alternating help game; data.dataset not used)",
        "equilibria": {name: equilibria_metrics(sol) for name, sol in solutions.items()},
        "money": {**{c: r.metrics for c, r in runs.items()}, "gamma_sweep": sweep_metrics(batches, confidence), "paper": PAPER_MONEY},
        "timing": {"solve_s": phases.get("solve", 0.0), "iql_s": phases.get("iql", 0.0)},
    }
    if params.history_learner.enabled:
        metrics["history_learner"] = history_learner_metrics(envs["no_transfer"], params, batches["no_transfer"], confidence)
    metrics["provenance"] = dict(PROVENANCE)  # the rows of paper vs ours that are not plain outcomes
    return metrics
