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

    def tasks(self, seeds: int, first_only: bool = False) -> np.ndarray:
        reps = 1 if first_only else self.replicates
        return np.tile(np.repeat(np.arange(self.n), reps)[None, :], (seeds, 1))

    def seed_draws(self, seeds: int, first_only: bool = False, actions: bool = False) -> Draws:
        def pick(a: np.ndarray) -> np.ndarray:
            a = a.reshape(self.n, self.replicates, *a.shape[1:])
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


def accuracy_now(trainer: Trainer, ev: EvalSet) -> np.ndarray:
    """Held-out accuracy [S] on the first replicate (the stability curves)."""
    S = trainer.S
    task, draws, acts = ev.tasks(S, True), ev.seed_draws(S, True), ev.seed_draws(S, True, actions=True)
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
        roll, _ = trainer.single_step(ev.pool, task, draws, acts)
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

    roll, _, _ = trainer.team_step(ev.pool, task, draws, acts)
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
    credit = shapley(TeamGame(first, params.token_cost), "exact")
    per["planner_credit"] = credit.credit[:, 0].reshape(S, -1).mean(axis=1)
    wp = first.worker_present.reshape(first.L, -1)
    per["worker_credit"] = (credit.credit[:, 1:] * wp).reshape(S, -1).sum(axis=1) / np.maximum(wp.reshape(S, -1).sum(axis=1), 1)
    loo_first = _first(loo, S, N, R)
    return EvalResult(per, first, None, credit, loo_first, _first(correct, S, N, R), _first(tokens, S, N, R),
                      *_per_question(correct, tokens, S, N, R))


def _per_question(correct: np.ndarray, tokens: np.ndarray, S: int, n: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """[S * N * R] question-major rollouts -> per seed and question, means over the replicates [S, N]."""
    return (correct.reshape(S, n, reps).astype(np.float64).mean(axis=2),
            tokens.reshape(S, n, reps).astype(np.float64).mean(axis=2))
