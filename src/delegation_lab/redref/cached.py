"""REDEREF on the platform's cached answers: each held-out item is a task, the solvers are the arms,
an arm's call returns its cached answer at its cached cost, the judge is the shared verifier
(`evaluation.verifier`: a verdict per solver x item x seed, the same in every method, so a re-asked
solver gets its verdict again), and the loop stops on a judged success. Accuracy is the gold label
of the final answer. Batched over seeds x budgets.

Memory-aware priors embed the item's question; dt is counted in items. `warm_start` train items
are routed first (unscored) so the memory holds recent outcomes when the test items start. When no
candidate is judged a success, the answer is aggregated by competence-weighted voting over the
candidates' parsed answers (numeric answers are structured fields, paper 3.3), trust mu_i.

Budget B is per item in US dollars. Algorithm 1 only stops when the budget is spent (line 7) or a
call overshoots it (line 17, the overshooting candidate is dropped). `budget_aware` adds one mask:
an arm whose mean observed cost exceeds the remaining budget counts as cooling (never-tried arms
are assumed affordable); when no arm is affordable the item stops (stop code `budget`).

The depth loop is `loop.run_task`, the controller's and the engine's; `CachedRouting` supplies what
differs: an answer costs its cached cost, the judge's one verdict is both y and e.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.redref import policy
from delegation_lab.redref.loop import Limits, LoopState, Step, Task, run_task
from delegation_lab.redref.memory import prior_before
from delegation_lab.redref.params import ControllerParams


@dataclass(frozen=True)
class CachedArms:
    """Per item x solver: label, cost, and which solvers gave the same parsed answer."""

    solvers: list[str]
    correct: np.ndarray  # bool [I, N]
    cost: np.ndarray  # float [I, N]
    same: np.ndarray  # bool [I, N, N]


def verdict_rows(verifier: Verifier, arms: CachedArms, item_ids: list[str], row_seeds: np.ndarray) -> np.ndarray:
    """The verifier's accept decisions [B, I, N] for batch rows whose seeds are `row_seeds` [B]."""
    seeds = sorted({int(s) for s in row_seeds})
    table = verifier.table(arms.solvers, item_ids, arms.correct, seeds)  # [n_seeds, I, N]
    return table[np.searchsorted(seeds, row_seeds)]


@dataclass
class CachedOutcome:
    final_correct: np.ndarray  # bool [B, I]
    cost: np.ndarray  # float [B, I]
    calls: np.ndarray  # int [B, I]
    judged_success: np.ndarray  # bool [B, I]
    stop: np.ndarray  # int [B, I]: loop.STOP_CODES
    delegated: np.ndarray  # int [B, I, D]: the loop's decisions (`loop.LoopState`): solver called at each depth
    released: np.ndarray  # int [B, I, D]: solver freed by forced exploration at each depth
    steps: dict[str, np.ndarray] = field(default_factory=dict)


class CachedRouting(Task):
    """The cached answers as the loop's agents and judge over every row's item sequence: `begin(t)`
    sets up the t-th item of each row, `run_task` routes it, `finish` books the final answer."""

    def __init__(self, arms: CachedArms, seq: np.ndarray, sim_items: np.ndarray, budgets: np.ndarray,
                 controller: ControllerParams, max_depth: int, verdicts: np.ndarray, rng: np.random.Generator,
                 selection: policy.Selection, budget_aware: bool, log_steps: bool):
        c = controller
        B, T = seq.shape
        N = len(arms.solvers)
        self.arms, self.seq, self.sim_items, self.budgets, self.controller, self.verdicts = arms, seq, sim_items, budgets, c, verdicts
        self.rng, self.selection, self.budget_aware, self.log_steps = rng, selection, budget_aware, log_steps
        self.rows = np.arange(B)
        self.pos, self.neg = np.zeros((B, T, N)), np.zeros((B, T, N))
        self.carried = np.full((B, N), c.alpha0), np.full((B, N), c.beta0)
        self.cost_sum, self.cost_n = np.zeros((B, N)), np.zeros((B, N))  # observed cost per solver (budget_aware)
        self.out = CachedOutcome(np.zeros((B, T), bool), np.zeros((B, T)), np.zeros((B, T), int), np.zeros((B, T), bool),
                                 np.zeros((B, T), int), np.zeros((B, T, max_depth), int), np.zeros((B, T, max_depth), int))
        self.log: dict[str, list[np.ndarray]] = {k: [] for k in (
            "row", "t", "depth", "agent", "theta", "verdict", "alpha", "beta", "cost", "correct", "judged")}
        self.max_depth = max_depth

    def begin(self, t: int) -> LoopState:
        c = self.controller
        self.t = t
        item = self.seq[:, t]
        self.correct, self.cost, self.same = self.arms.correct[item], self.arms.cost[item], self.arms.same[item]
        self.accepts = self.verdicts[self.rows, item]  # [B, N]
        alpha, beta = prior_before(c.prior, t, self.seq, self.sim_items, self.pos, self.neg, self.carried, c.alpha0, c.beta0,
                                   c.decay, c.memory_tolerance)
        self.judged = np.zeros(self.accepts.shape, dtype=bool)  # candidates with evidence
        self.final = np.zeros(self.seq.shape[0], dtype=bool)
        return LoopState.start(alpha, beta, self.max_depth)

    def eligible(self, state: LoopState) -> np.ndarray | None:
        if not self.budget_aware:
            return None
        mean_cost = np.where(self.cost_n > 0, self.cost_sum / np.maximum(self.cost_n, 1), 0.0)
        return mean_cost <= (self.budgets - state.spent)[:, None]

    def answer(self, state: LoopState, depth: int, agent: np.ndarray, called: np.ndarray) -> np.ndarray:
        rows = self.rows
        call_cost = self.cost[rows, agent]
        self.cost_sum[rows[called], agent[called]] += call_cost[called]
        self.cost_n[rows[called], agent[called]] += 1
        return call_cost

    def judge(self, state: LoopState, depth: int, agent: np.ndarray, judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        y = self.accepts[self.rows, agent] & judged
        return y, y  # one verdict: an accepted answer is the task's success

    def keep(self, state: LoopState, step: Step) -> None:
        rows, t, i, ok, y = self.rows, self.t, step.agent, step.judged, step.credit
        okr = rows[ok]
        self.pos[okr, t, i[ok]] += y[ok]
        self.neg[okr, t, i[ok]] += 1.0 - y[ok]
        self.judged[okr, i[ok]] = True
        truth = self.correct[rows, i]
        if self.log_steps and step.called.any():
            idx = np.nonzero(step.called)[0]
            for key, val in (("row", idx), ("t", np.full(idx.size, t)), ("depth", np.full(idx.size, step.depth)),
                             ("agent", i[idx]), ("theta", step.theta[idx, i[idx]]), ("verdict", np.where(ok[idx], y[idx], np.nan)),
                             ("alpha", state.alpha[idx, i[idx]]), ("beta", state.beta[idx, i[idx]]), ("cost", step.cost[idx]),
                             ("correct", truth[idx]), ("judged", ok[idx])):
                self.log[key].append(np.asarray(val))
        self.final = np.where(step.done, truth, self.final)

    def finish(self, state: LoopState) -> None:
        out, t, rows = self.out, self.t, self.rows
        out.cost[:, t], out.calls[:, t], out.judged_success[:, t] = state.spent, state.calls, state.judged_success
        out.stop[:, t], out.delegated[:, t], out.released[:, t] = state.stop, state.delegated, state.released
        final, judged = self.final, self.judged
        # no judged success: competence-weighted vote over the judged candidates' answers
        undecided = ~state.judged_success & judged.any(axis=1)
        if undecided.any():
            mu = policy.posterior_mean(state.alpha, state.beta)
            votes = np.einsum("bjk,bk->bj", self.same.astype(float), np.where(judged, mu, 0.0))
            votes = np.where(judged, votes + 1e-9 * mu, -np.inf)  # ties: the more trusted arm
            pick = np.argmax(votes, axis=1)
            final = np.where(undecided, self.correct[rows, pick], final)
        out.final_correct[:, t] = final & (state.judged_success | judged.any(axis=1))
        self.carried = state.alpha, state.beta


def route_cached(
    arms: CachedArms,
    seq: np.ndarray,
    sim_items: np.ndarray,
    budgets: np.ndarray,
    controller: ControllerParams,
    max_depth: int,
    cooldown: int,
    verdicts: np.ndarray,
    rng: np.random.Generator,
    selection: policy.Selection = "thompson",
    budget_aware: bool = False,
    log_steps: bool = True,
) -> CachedOutcome:
    """seq [B, I]: item indices in routing order per batch row; budgets [B] (inf = unlimited);
    sim_items [n_items, n_items]: K between item embeddings; verdicts [B, n_items, N]: does the judge
    accept solver n's answer to an item in row b (`verdict_rows`)."""
    limits = Limits(max_depth, budgets, cooldown, controller.plateau)
    routing = CachedRouting(arms, seq, sim_items, budgets, controller, max_depth, verdicts, rng, selection, budget_aware, log_steps)
    for t in range(seq.shape[1]):
        routing.finish(run_task(routing, routing.begin(t), limits))
    out = routing.out
    if log_steps:
        out.steps = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in routing.log.items()}
    return out
