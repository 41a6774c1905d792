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
are assumed affordable); when no arm is affordable the item stops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.redref import policy
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
    steps: dict[str, np.ndarray] = field(default_factory=dict)


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
    c = controller
    B, T = seq.shape
    N = len(arms.solvers)
    rows = np.arange(B)
    pos = np.zeros((B, T, N))
    neg = np.zeros((B, T, N))
    carried = np.full((B, N), c.alpha0), np.full((B, N), c.beta0)
    cost_sum, cost_n = np.zeros((B, N)), np.zeros((B, N))
    out = CachedOutcome(np.zeros((B, T), bool), np.zeros((B, T)), np.zeros((B, T), int), np.zeros((B, T), bool))
    log: dict[str, list[np.ndarray]] = {k: [] for k in ("row", "t", "depth", "agent", "theta", "verdict", "alpha", "beta", "cost", "correct", "judged")}
    for t in range(T):
        item = seq[:, t]
        correct, cost, same = arms.correct[item], arms.cost[item], arms.same[item]
        accepts = verdicts[rows, item]  # [B, N]
        alpha, beta = prior_before(c.prior, t, seq, sim_items, pos, neg, carried, c.alpha0, c.beta0, c.decay,
                                   c.memory_tolerance)
        cool = np.zeros((B, N), dtype=int)
        spent = np.zeros(B)
        judged = np.zeros((B, N), dtype=bool)  # candidates with evidence
        active = np.ones(B, dtype=bool)
        no_improvement = np.zeros(B, dtype=int)
        final = np.zeros(B, dtype=bool)
        for d in range(1, max_depth + 1):
            active &= spent < budgets
            if not active.any():
                break
            eligible = None
            if budget_aware:
                mean_cost = np.where(cost_n > 0, cost_sum / np.maximum(cost_n, 1), 0.0)
                eligible = mean_cost <= (budgets - spent)[:, None]
                broke = active & ~eligible.any(axis=1)
                active &= ~broke
                if not active.any():
                    break
            theta = policy.sample_scores(alpha, beta, cool, rng, selection, eligible)
            forced = active & ~np.isfinite(theta).any(axis=1)
            if forced.any():  # every (affordable) arm cools: release one, spend the round
                policy.release_one(cool, forced, eligible)
            act = active & ~forced
            if not act.any():
                continue
            i = policy.select(theta, alpha, beta)
            call_cost = cost[rows, i]
            spent = np.where(act, spent + call_cost, spent)
            out.cost[act, t] += call_cost[act]
            out.calls[act, t] += 1
            cost_sum[rows[act], i[act]] += call_cost[act]
            cost_n[rows[act], i[act]] += 1
            over = act & (spent > budgets)
            active &= ~over
            ok = act & ~over
            truth = correct[rows, i]
            y = accepts[rows, i] & ok
            policy.update(alpha, beta, i, y, ok)
            okr = rows[ok]
            pos[okr, t, i[ok]] += y[ok]
            neg[okr, t, i[ok]] += 1.0 - y[ok]
            judged[okr, i[ok]] = True
            if log_steps and act.any():
                idx = np.nonzero(act)[0]
                for key, val in (("row", idx), ("t", np.full(idx.size, t)), ("depth", np.full(idx.size, d)),
                                 ("agent", i[idx]), ("theta", theta[idx, i[idx]]), ("verdict", np.where(ok[idx], y[idx], np.nan)),
                                 ("alpha", alpha[idx, i[idx]]), ("beta", beta[idx, i[idx]]), ("cost", call_cost[idx]),
                                 ("correct", truth[idx]), ("judged", ok[idx])):
                    log[key].append(np.asarray(val))
            done = ok & y
            final = np.where(done, truth, final)
            out.judged_success[done, t] = True
            active &= ~done
            carry_on = ok & ~done
            policy.cool_down(cool, i, cooldown, carry_on)
            no_improvement = np.where(ok, np.where(y, 0, no_improvement + 1), no_improvement)
            active &= ~(carry_on & (no_improvement >= c.plateau))
        # no judged success: competence-weighted vote over the judged candidates' answers
        undecided = ~out.judged_success[:, t] & judged.any(axis=1)
        if undecided.any():
            mu = policy.posterior_mean(alpha, beta)
            votes = np.einsum("bjk,bk->bj", same.astype(float), np.where(judged, mu, 0.0))
            votes = np.where(judged, votes + 1e-9 * mu, -np.inf)  # ties: the more trusted arm
            pick = np.argmax(votes, axis=1)
            final = np.where(undecided, correct[rows, pick], final)
        out.final_correct[:, t] = final & (out.judged_success[:, t] | judged.any(axis=1))
        carried = alpha, beta
    if log_steps:
        out.steps = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in log.items()}
    return out
