"""Algorithm 1 on the split-knowledge tasks, batched over seeds: every seed runs its own task
sequence (beliefs and memory carry over between tasks), all seeds advance together round by round.

The decisions are `policy.py`'s, exactly as the protocol controller (`controller.py`) takes them;
what the engine adds is a vectorised simulation of the agents and the judge that follows the same
model as `tasks.SplitKnowledgeBackend` and `judge.SimulatedJudgeBackend`:

- agent i writes each part k the critique names missing or weak (best-draft score < fact_score)
  that it covers, with probability competence[i, k], at a score ~ N(quality[i, k], quality_sd)
  clipped to [0, 100]; the candidate is the best draft with those parts replaced; its score is the mean over the task's parts (0 for a missing part);
- y: the candidate beats the best draft by more than improve_margin (a positive marginal
  contribution), seen through the judge's FP / FN flips, or short-circuited to 1 when the task is
  checkable and the candidate states more key facts (parts scoring >= fact_score);
- the SUCCESS verdict: score >= success_score through the same noise, or 1 when checkable and all
  key facts are present; the task stops when an accepted candidate is judged a success;
- `verdict="single"` is Algorithm 1 as printed (one y = I[E = SUCCESS] drives both the belief
  update, line 26, and termination, line 33): the comparison verdict above only keeps the best
  candidate (lines 29-31) and counts toward the plateau, and a judged SUCCESS returns its candidate; our default `split` credits the marginal
  contribution instead (A.3.4 steps 2-3 read as two verdicts);
- `beliefs="agent_domain"` (our task-conditional variant): one Beta per agent x domain, carried
  across tasks (no kernel); each round samples every (agent, part the critique asks for) pair,
  delegates to the agent of the best pair and credits y to that pair;
- tokens: prompt = the query in the agent template + retrieval context (specialists) + the refined
  query's additions (the best draft so far, whose parts keep the tokens they were written with, and
  the last critique); completion ~ log-normal by class, shared among the parts the call wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from delegation_lab.redref import policy
from delegation_lab.redref.judge import noisy_verdict
from delegation_lab.redref.memory import prior_before
from delegation_lab.redref.params import ControllerParams
from delegation_lab.redref.tasks import TaskPool, Zoo
from delegation_lab.solvers.pricing import lognormal_tokens

STOP_CODES = {"success": 0, "depth": 1, "budget": 2, "plateau": 3}


@dataclass(frozen=True)
class EngineSetup:
    controller: ControllerParams
    fp: float
    fn: float
    success_score: float
    selection: policy.Selection = "thompson"
    prior: Literal["memory", "persistent", "reset"] | None = None  # None: controller.prior
    verdict: Literal["split", "single"] = "split"  # single: Algorithm 1's one y for credit and stopping
    beliefs: Literal["agent", "agent_domain"] = "agent"  # agent_domain: one Beta per agent x domain

    @property
    def prior_mode(self) -> str:
        return self.prior or self.controller.prior


@dataclass
class SequenceOutcome:
    """Per seed x task results (and per agent where the last axis is N)."""

    success: np.ndarray  # bool [S, T]: true final score >= success_score
    judged_success: np.ndarray  # bool [S, T]
    quality: np.ndarray  # float [S, T]: true score of the final answer
    calls: np.ndarray  # int [S, T]
    rounds: np.ndarray  # int [S, T] (forced-exploration rounds included)
    tokens: np.ndarray  # float [S, T]
    time_to_success: np.ndarray  # float [S, T]: round of the first judged success; nan when none
    good_uses: np.ndarray  # int [S, T]: calls with a positive marginal contribution
    bad_uses: np.ndarray  # int [S, T]: the other calls
    stop: np.ndarray  # int [S, T]: STOP_CODES
    belief_start: np.ndarray  # float [S, T, N]: posterior mean at the task's start
    first_pick: np.ndarray  # float [S, T, N]: round an agent was first selected; nan when never
    contributions: np.ndarray  # int [S, T, N]: an agent's calls with a positive marginal contribution
    steps: dict[str, np.ndarray] = field(default_factory=dict)  # one entry per round (trajectories)


def run_sequences(
    zoo: Zoo,
    pool: TaskPool,
    seq: np.ndarray,
    sim_pool: np.ndarray,
    setup: EngineSetup,
    rng: np.random.Generator,
    impaired: tuple[int, int] | None = None,
    log_steps: bool = True,
) -> SequenceOutcome:
    """Run every seed's task sequence seq[s] (pool indices, shape [S, T]).

    sim_pool: K over the pool's task embeddings [P, P]. impaired: (agent, first task) — from that
    task on the agent never writes a usable part (forced to fail, RQ3)."""
    c = setup.controller
    zp = zoo.params
    S, T = seq.shape
    N = K = zoo.n
    rows = np.arange(S)
    mode = setup.prior_mode
    pos = np.zeros((S, T, N))
    neg = np.zeros((S, T, N))
    carried = np.full((S, N), c.alpha0), np.full((S, N), c.beta0)
    out = SequenceOutcome(
        success=np.zeros((S, T), bool), judged_success=np.zeros((S, T), bool), quality=np.zeros((S, T)),
        calls=np.zeros((S, T), int), rounds=np.zeros((S, T), int), tokens=np.zeros((S, T)),
        time_to_success=np.full((S, T), np.nan), good_uses=np.zeros((S, T), int), bad_uses=np.zeros((S, T), int),
        stop=np.full((S, T), STOP_CODES["depth"]), belief_start=np.zeros((S, T, N)),
        first_pick=np.full((S, T, N), np.nan), contributions=np.zeros((S, T, N), int),
    )
    log: dict[str, list[np.ndarray]] = {k: [] for k in (
        "seed", "task", "depth", "agent", "theta", "verdict", "success_verdict", "alpha", "beta", "tokens",
        "improved", "judged", "forced")}

    def record(mask: np.ndarray, t: int, d: int, agent: np.ndarray, theta: np.ndarray, y: np.ndarray, e: np.ndarray,
               alpha: np.ndarray, beta: np.ndarray, tokens: np.ndarray, improved: np.ndarray, judged: np.ndarray,
               forced: bool) -> None:
        if not log_steps or not mask.any():
            return
        idx = np.nonzero(mask)[0]
        a = agent[idx]
        log["seed"].append(idx)
        log["task"].append(np.full(idx.size, t))
        log["depth"].append(np.full(idx.size, d))
        log["agent"].append(np.where(forced, -1, a))
        log["theta"].append(np.where(forced, np.nan, theta[idx, a]))
        log["verdict"].append(y[idx].astype(float) if not forced else np.full(idx.size, np.nan))
        log["success_verdict"].append(e[idx].astype(float) if not forced else np.full(idx.size, np.nan))
        log["alpha"].append(alpha[idx, a])
        log["beta"].append(beta[idx, a])
        log["tokens"].append(tokens[idx])
        log["improved"].append(improved[idx])
        log["judged"].append(judged[idx])
        log["forced"].append(np.full(idx.size, forced))

    per_domain = setup.beliefs == "agent_domain"
    dom_alpha, dom_beta = np.full((S, N, K), c.alpha0), np.full((S, N, K), c.beta0)
    competence = zoo.competence
    for t in range(T):
        task = seq[:, t]
        req = pool.required[task]
        n_req = req.sum(axis=1)
        checkable = pool.checkable[task]
        alpha, beta = prior_before(mode, t, seq, sim_pool, pos, neg, carried, c.alpha0, c.beta0, c.decay,
                                   c.memory_tolerance)
        if per_domain:  # an agent's belief on this task: its mean over the task's domains
            w = req[:, None, :] / n_req[:, None, None]
            out.belief_start[:, t] = (policy.posterior_mean(dom_alpha, dom_beta) * w).sum(axis=2)
        else:
            out.belief_start[:, t] = policy.posterior_mean(alpha, beta)
        if impaired is not None and t >= impaired[1]:
            competence = zoo.competence.copy()
            competence[impaired[0]] = 0.0
        cool = np.zeros((S, N), dtype=int)
        spent = np.zeros(S)
        part_q = np.zeros((S, K))
        draft_q = np.zeros(S)
        query_tokens = pool.tokens[task].astype(float)
        draft_tokens = np.zeros((S, K))
        no_improvement = np.zeros(S, dtype=int)
        active = np.ones(S, dtype=bool)
        for d in range(1, c.max_depth + 1):
            out_of_budget = active & (spent >= c.budget)
            out.stop[out_of_budget, t] = STOP_CODES["budget"]
            active &= ~out_of_budget
            if not active.any():
                break
            weak = req & (part_q < zp.fact_score)  # what the critique asks for
            if per_domain:
                target = np.where(weak.any(axis=1, keepdims=True), weak, req)
                theta, domain = policy.sample_domain_scores(dom_alpha, dom_beta, target, cool, rng)
                alpha, beta = np.take_along_axis(dom_alpha, domain[:, :, None], 2)[..., 0], np.take_along_axis(dom_beta, domain[:, :, None], 2)[..., 0]
            else:
                theta = policy.sample_scores(alpha, beta, cool, rng, setup.selection)
            forced = active & ~np.isfinite(theta).any(axis=1)
            if forced.any():
                j = policy.release_one(cool, forced)
                out.rounds[forced, t] += 1
                zeros = np.zeros(S)
                record(forced, t, d, j, theta, zeros, zeros, alpha, beta, zeros, np.zeros(S, bool), np.zeros(S, bool), True)
            act = active & ~forced
            if not act.any():
                continue
            i = policy.select(theta, alpha, beta)
            out.rounds[act, t] += 1
            out.calls[act, t] += 1
            first = act & np.isnan(out.first_pick[rows, t, i])
            out.first_pick[rows[first], t, i[first]] = out.rounds[first, t]
            tokens_out = lognormal_tokens(rng, zoo.tokens_out_mean[i], zp.tokens_cv)
            critique = zp.critique_tokens if d > 1 else 0.0
            usage = query_tokens + draft_tokens.sum(axis=1) + critique + zoo.tokens_in_extra[i] + tokens_out
            spent = np.where(act, spent + usage, spent)
            out.tokens[act, t] += usage[act]
            over = act & (spent > c.budget)
            out.stop[over, t] = STOP_CODES["budget"]
            active &= ~over
            ok = act & ~over
            # the agent's candidate
            wrote = ok[:, None] & weak & (rng.random((S, K)) < competence[i])
            q_new = np.clip(zoo.quality[i] + zp.quality_sd * rng.standard_normal((S, K)), 0.0, 100.0)
            cand_q = np.where(wrote, q_new, part_q)
            cand_score = (cand_q * req).sum(axis=1) / n_req
            improved = ok & (cand_score - draft_q > c.improve_margin)
            facts_c = ((cand_q >= zp.fact_score) & req).sum(axis=1)
            facts_d = ((part_q >= zp.fact_score) & req).sum(axis=1)
            u = rng.random((S, 2))
            y = np.where(checkable & (facts_c > facts_d), True, noisy_verdict(improved, u[:, 0], setup.fp, setup.fn)) & ok
            e = np.where(checkable & (facts_c == n_req), True,
                         noisy_verdict(cand_score >= setup.success_score, u[:, 1], setup.fp, setup.fn)) & ok
            credit = e if setup.verdict == "single" else y  # the y of eq. (2) and of the memory
            policy.update(alpha, beta, i, credit, ok)
            if per_domain:
                okr = rows[ok]
                k_star = domain[okr, i[ok]]
                dom_alpha[okr, i[ok], k_star] += credit[ok]
                dom_beta[okr, i[ok], k_star] += 1.0 - credit[ok]
            okr = rows[ok]
            pos[okr, t, i[ok]] += credit[ok]
            neg[okr, t, i[ok]] += 1.0 - credit[ok]
            out.good_uses[improved, t] += 1
            out.bad_uses[act & ~improved, t] += 1
            out.contributions[rows[improved], t, i[improved]] += 1
            record(act, t, d, i, theta, credit, e, alpha, beta, usage, improved, ok, False)
            # the candidate becomes the best draft (lines 29-31); under one verdict a SUCCESS returns
            # the candidate it judged (line 34: the best-supported candidate is the verified one)
            accept = ok & (y | e) if setup.verdict == "single" else ok & y
            part_q = np.where(accept[:, None], cand_q, part_q)
            draft_q = np.where(accept, cand_score, draft_q)
            per_part = tokens_out / np.maximum(wrote.sum(axis=1), 1)
            draft_tokens = np.where(accept[:, None] & wrote, per_part[:, None], draft_tokens)
            done = (ok & e) if setup.verdict == "single" else (accept & e)
            out.judged_success[done, t] = True
            out.time_to_success[done, t] = out.rounds[done, t]
            out.stop[done, t] = STOP_CODES["success"]
            active &= ~done
            carry_on = ok & ~done
            policy.cool_down(cool, i, c.cooldown, carry_on)
            no_improvement = np.where(ok, np.where(y, 0, no_improvement + 1), no_improvement)
            plateau = carry_on & (no_improvement >= c.plateau)
            out.stop[plateau, t] = STOP_CODES["plateau"]
            active &= ~plateau
        out.quality[:, t] = draft_q
        out.success[:, t] = draft_q >= setup.success_score
        carried = alpha, beta
    if log_steps:
        out.steps = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in log.items()}
    return out
