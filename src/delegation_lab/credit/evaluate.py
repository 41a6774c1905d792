"""Evaluation on the held-out questions: the policy samples its actions (as an LLM decodes at a
temperature) from fixed uniforms, and the tools draw from fixed draws, the same for every method
and seed (common random numbers), so two methods differ only where their policies do. Metrics
(SHARP §5.5 and Appendix D):

- accuracy, tokens / calls / subagents per question, dollars per question (tokens x usd_per_mtok);
- useful-subagent share and harmful-call share: over the worker invocations (the single agent: its
  tool calls), the share whose removal turns a right answer wrong (useful) or a wrong answer right
  (harmful) -- the with / without comparison of the paper's case studies F.1 and F.2, replayed on
  the same draws;
- the planner's and the workers' mean Shapley credit (exact, in the training game with its token
  cost) on the first replicate, which also becomes the trajectory rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from delegation_lab.credit.env import (
    DISTRACTOR,
    EVIDENCE,
    TOOL_NAMES,
    Draws,
    SingleRollouts,
    TaskPool,
    TeamGame,
    TeamRollouts,
    make_draws,
)
from delegation_lab.credit.grpo import Trainer
from delegation_lab.credit.params import CreditParams
from delegation_lab.credit.shapley import ShapleyResult, shapley
from delegation_lab.credit.team_shapley import team_shapley

EVAL_STREAM = 7


@dataclass(frozen=True)
class EvalSet:
    """The held-out questions, each repeated `replicates` times with fixed draws."""

    pool: TaskPool
    replicates: int
    draws: Draws  # [N * R, ...], question-major: the environment's draws
    actions: Draws  # the same shapes: uniforms of the policy's action samples (recall: planner / single, outcome: workers)

    @property
    def n(self) -> int:
        return self.pool.n

    def tasks(self, seeds: int, first_only: bool = False, limit: int | None = None) -> np.ndarray:
        reps = 1 if first_only else self.replicates
        return np.tile(np.repeat(np.arange(self.n)[:limit], reps)[None, :], (seeds, 1))

    def seed_draws(self, seeds: int, first_only: bool = False, actions: bool = False, limit: int | None = None) -> Draws:
        """The draws of every question (or the first `limit`), repeated for `seeds` members."""
        def pick(a: np.ndarray) -> np.ndarray:
            a = a.reshape(self.n, self.replicates, *a.shape[1:])[:limit]
            a = a[:, :1] if first_only else a
            a = a.reshape(-1, *a.shape[2:])
            return np.concatenate([a] * seeds)
        d = self.actions if actions else self.draws
        return Draws(pick(d.recall), pick(d.outcome), pick(d.validity))


def make_eval_set(params: CreditParams, pool: TaskPool) -> EvalSet:
    rng = np.random.default_rng([params.data_seed, EVAL_STREAM])
    shape, H, K = (pool.n * params.eval_replicates,), pool.max_hops, params.env.max_workers_per_hop
    draws = make_draws(rng, shape, H, K)
    return EvalSet(pool, params.eval_replicates, draws, make_draws(rng, shape, H, K))


@dataclass
class EvalResult:
    per_seed: dict[str, np.ndarray]  # metric -> [S]
    team: TeamRollouts | None  # first replicate, [S * N] (seed-major)
    single: SingleRollouts | None
    credit: ShapleyResult | None  # exact credit of the first replicate's team rollouts
    loo: np.ndarray | None  # [S * N, slots]: correctness change when the slot's agent is removed (first replicate)
    correct: np.ndarray  # bool [S * N] first replicate
    tokens: np.ndarray  # [S * N] first replicate
    item_correct: np.ndarray | None = None  # [S, N] per question: share of its replicates answered right
    item_tokens: np.ndarray | None = None  # [S, N] per question: mean tokens over its replicates


def accuracy_now(trainer: Trainer, ev: EvalSet, limit: int | None = None) -> np.ndarray:
    """Held-out accuracy [S] on the first replicate of the first `limit` questions (the stability curves)."""
    S = trainer.S
    task = ev.tasks(S, True, limit)
    draws, acts = ev.seed_draws(S, True, limit=limit), ev.seed_draws(S, True, actions=True, limit=limit)
    if trainer.spec.team:
        roll, _, _ = trainer.team_step(ev.pool, task, draws, acts)
        correct, _ = TeamGame(roll, 0.0).full()
    else:
        correct = trainer.single_step(ev.pool, task, draws, acts)[0].correct
    return correct.reshape(S, -1).mean(axis=1)


def _first(a: np.ndarray, S: int, n: int, reps: int) -> np.ndarray:
    return a.reshape(S, n, reps, *a.shape[1:])[:, :, 0].reshape(S * n, *a.shape[1:])


def evaluate(trainer: Trainer, ev: EvalSet, params: CreditParams) -> EvalResult:
    S, N, R = trainer.S, ev.n, ev.replicates
    task, draws, acts = ev.tasks(S), ev.seed_draws(S), ev.seed_draws(S, actions=True)
    usd = params.usd_per_mtok / 1e6
    if not trainer.spec.team:
        roll, _ = trainer.single_step(ev.pool, task, draws, acts, repeat=R)
        calls = roll.tool_calls()
        ok = (roll.outcome != DISTRACTOR) & ((roll.outcome == EVIDENCE) | roll.recall) | ~roll.hop_present
        without = roll.recall | ~roll.hop_present  # the hop with its call removed
        others_ok = (ok.sum(axis=1, keepdims=True) - ok) == (ok.shape[1] - 1)
        right_without = others_ok & without
        useful = calls & roll.correct[:, None] & ~right_without
        harmful = calls & ~roll.correct[:, None] & right_without
        n_calls = calls.sum(axis=1).reshape(S, -1).sum(axis=1)
        per = {
            "accuracy": roll.correct.reshape(S, -1).mean(axis=1),
            "tokens_per_task": roll.tokens.reshape(S, -1).mean(axis=1),
            "tool_calls_per_task": calls.sum(axis=1).reshape(S, -1).mean(axis=1),
            "subagents_per_task": np.zeros(S),
            "useful_share": useful.sum(axis=1).reshape(S, -1).sum(axis=1) / np.maximum(n_calls, 1),
            "harmful_share": harmful.sum(axis=1).reshape(S, -1).sum(axis=1) / np.maximum(n_calls, 1),
        }
        per["cost_per_task_usd"] = per["tokens_per_task"] * usd
        first = SingleRollouts(*(_first(getattr(roll, f), S, N, R) for f in
                                 ("task", "hop_present", "tool", "outcome", "valid", "recall", "tokens", "correct")))
        return EvalResult(per, None, first, None, None, first.correct, first.tokens,
                          *_per_question(roll.correct, roll.tokens, S, N, R))

    roll, _, _ = trainer.team_step(ev.pool, task, draws, acts, repeat=R)
    game0 = TeamGame(roll, 0.0)
    correct, tokens = game0.full()
    loo = shapley(game0, "leave_one_out").credit  # [L, slots]: v(N) - v(N - i) on correctness
    workers = roll.worker_present.reshape(roll.L, -1)
    loo_w = loo[:, 1:]
    n_workers = workers.reshape(S, -1).sum(axis=1)
    calls = roll.tool_calls()
    per = {
        "accuracy": correct.reshape(S, -1).mean(axis=1),
        "tokens_per_task": tokens.reshape(S, -1).mean(axis=1),
        "tool_calls_per_task": calls.sum(axis=(1, 2)).reshape(S, -1).mean(axis=1),
        "subagents_per_task": workers.sum(axis=1).reshape(S, -1).mean(axis=1),
        "useful_share": ((loo_w > 0.5) & workers).reshape(S, -1).sum(axis=1) / np.maximum(n_workers, 1),
        "harmful_share": ((loo_w < -0.5) & workers).reshape(S, -1).sum(axis=1) / np.maximum(n_workers, 1),
        "redundant_share": ((np.abs(loo_w) < 0.5) & workers).reshape(S, -1).sum(axis=1) / np.maximum(n_workers, 1),
    }
    per["cost_per_task_usd"] = per["tokens_per_task"] * usd
    for t, name in enumerate(TOOL_NAMES):
        per[f"tool_share_{name}"] = ((roll.tool == t) & roll.worker_present).reshape(S, -1).sum(axis=1) / np.maximum(n_workers, 1)
    per["delegated_hop_share"] = ((roll.n_workers > 0) & roll.hop_present).reshape(S, -1).sum(axis=1) / \
        roll.hop_present.reshape(S, -1).sum(axis=1)

    first = TeamRollouts(*(_first(getattr(roll, f), S, N, R) for f in (
        "task", "hop_present", "n_workers", "worker_present", "tool", "recall", "out_focused", "out_raw", "valid",
        "worker_tokens", "planner_tokens")))
    game = TeamGame(first, params.token_cost)
    exact = team_shapley(game)
    rows = np.arange(first.L)
    v_empty = game.values(rows, np.zeros((1, 1, game.present.shape[1]), dtype=bool))[:, 0]
    v_full = game.values(rows, game.present[:, None, :])[:, 0]
    credit = ShapleyResult(exact, exact, exact, v_full, v_empty, np.full(first.L, "exact"))
    per["planner_credit"] = exact[:, 0].reshape(S, -1).mean(axis=1)
    wp = first.worker_present.reshape(first.L, -1)
    per["worker_credit"] = (exact[:, 1:] * wp).reshape(S, -1).sum(axis=1) / np.maximum(wp.reshape(S, -1).sum(axis=1), 1)
    # the paper's leave-one-out estimate beside exact Shapley on the same rollouts (metrics loo.*)
    loo_credit = shapley(game, "leave_one_out").credit
    agents = game.present.reshape(S, -1)
    diff = np.abs(loo_credit - exact).reshape(S, -1)
    per["loo_abs_error"] = (diff * agents).sum(axis=1) / agents.sum(axis=1)
    per["loo_planner_credit"] = loo_credit[:, 0].reshape(S, -1).mean(axis=1)
    same_sign = (np.sign(np.round(loo_credit, 12)) == np.sign(np.round(exact, 12))).reshape(S, -1)
    per["loo_same_sign_share"] = (same_sign & agents).sum(axis=1) / agents.sum(axis=1)
    loo_first = _first(loo, S, N, R)
    return EvalResult(per, first, None, credit, loo_first, _first(correct, S, N, R), _first(tokens, S, N, R),
                      *_per_question(correct, tokens, S, N, R))


def _per_question(correct: np.ndarray, tokens: np.ndarray, S: int, n: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """[S * N * R] question-major rollouts -> per seed and question, means over the replicates [S, N]."""
    return (correct.reshape(S, n, reps).astype(np.float64).mean(axis=2),
            tokens.reshape(S, n, reps).astype(np.float64).mean(axis=2))


def split_by_method(result: EvalResult, methods: int, seeds: int, n: int) -> list[EvalResult]:
    """An evaluation of a trainer of `methods` x `seeds` members -> one result per method (its seeds)."""
    out = []
    for j in range(methods):
        members = slice(j * seeds, (j + 1) * seeds)
        rows = slice(j * seeds * n, (j + 1) * seeds * n)  # first-replicate rollouts, member-major

        def take(x):
            return None if x is None else x[rows]

        team = None if result.team is None else TeamRollouts(*(getattr(result.team, f)[rows]
                                                               for f in TeamRollouts.__dataclass_fields__))
        single = None if result.single is None else SingleRollouts(*(getattr(result.single, f)[rows]
                                                                     for f in SingleRollouts.__dataclass_fields__))
        credit = None if result.credit is None else ShapleyResult(
            *(getattr(result.credit, f)[rows] for f in ("credit", "ci_low", "ci_high", "v_full", "v_empty", "estimator")))
        out.append(EvalResult({k: v[members] for k, v in result.per_seed.items()}, team, single, credit,
                              take(result.loo), take(result.correct), take(result.tokens),
                              None if result.item_correct is None else result.item_correct[members],
                              None if result.item_tokens is None else result.item_tokens[members]))
    return out
