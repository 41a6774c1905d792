"""Algorithm 1 on the split-knowledge tasks, batched over seeds: every seed runs its own task
sequence (beliefs and memory carry over between tasks), all seeds advance together round by round.

The decisions are `loop.run_task`'s, the same loop the protocol controller (`controller.py`) and the
cached routing (`cached.py`) run; what the engine adds is a vectorised simulation of the agents and
the judge (`Simulation`) that follows the same model as `tasks.SplitKnowledgeBackend` and
`judge.SimulatedJudgeBackend`:

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
from delegation_lab.redref.loop import STOP_CODES, Limits, LoopState, Step, Task, Verdict, run_task
from delegation_lab.redref.memory import prior_before
from delegation_lab.redref.params import ControllerParams
from delegation_lab.redref.tasks import TaskPool, Zoo
from delegation_lab.solvers.pricing import lognormal_tokens

__all__ = ["STOP_CODES", "EngineSetup", "SequenceOutcome", "Simulation", "run_sequences"]  # STOP_CODES: loop's


@dataclass(frozen=True)
class EngineSetup:
    controller: ControllerParams
    fp: float
    fn: float
    success_score: float
    selection: policy.Selection = "thompson"
    prior: Literal["memory", "persistent", "reset"] | None = None  # None: controller.prior
    verdict: Verdict = "split"  # single: Algorithm 1's one y for credit and stopping
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
    delegated: np.ndarray  # int [S, T, D]: the loop's decisions (`loop.LoopState`): agent called at each depth
    released: np.ndarray  # int [S, T, D]: agent freed by forced exploration at each depth
    steps: dict[str, np.ndarray] = field(default_factory=dict)  # one entry per round (trajectories)


class Simulation(Task):
    """The simulated agents and judge over every seed's task sequence: `begin(t)` sets up the t-th
    task of each seed, `run_task` plays it, `finish` books its outcome and carries the beliefs on."""

    def __init__(self, zoo: Zoo, pool: TaskPool, seq: np.ndarray, sim_pool: np.ndarray, setup: EngineSetup,
                 rng: np.random.Generator, impaired: tuple[int, int] | None, log_steps: bool):
        c = setup.controller
        S, T = seq.shape
        N = K = zoo.n
        self.zoo, self.pool, self.seq, self.sim_pool, self.setup = zoo, pool, seq, sim_pool, setup
        self.rng, self.selection, self.impaired, self.log_steps = rng, setup.selection, impaired, log_steps
        self.rows = np.arange(S)
        self.pos, self.neg = np.zeros((S, T, N)), np.zeros((S, T, N))  # each task's credited y and 1 - y per agent
        self.carried = np.full((S, N), c.alpha0), np.full((S, N), c.beta0)
        self.per_domain = setup.beliefs == "agent_domain"
        self.dom_alpha, self.dom_beta = np.full((S, N, K), c.alpha0), np.full((S, N, K), c.beta0)
        self.competence = zoo.competence
        D = c.max_depth
        self.out = SequenceOutcome(
            success=np.zeros((S, T), bool), judged_success=np.zeros((S, T), bool), quality=np.zeros((S, T)),
            calls=np.zeros((S, T), int), rounds=np.zeros((S, T), int), tokens=np.zeros((S, T)),
            time_to_success=np.full((S, T), np.nan), good_uses=np.zeros((S, T), int), bad_uses=np.zeros((S, T), int),
            stop=np.full((S, T), STOP_CODES["depth"]), belief_start=np.zeros((S, T, N)),
            first_pick=np.full((S, T, N), np.nan), contributions=np.zeros((S, T, N), int),
            delegated=np.zeros((S, T, D), int), released=np.zeros((S, T, D), int),
        )
        self.log: dict[str, list[np.ndarray]] = {k: [] for k in (
            "seed", "task", "depth", "agent", "theta", "verdict", "success_verdict", "alpha", "beta", "tokens",
            "improved", "judged", "forced")}

    def begin(self, t: int) -> LoopState:
        c, pool = self.setup.controller, self.pool
        S, K = self.seq.shape[0], self.zoo.n
        self.t = t
        task = self.seq[:, t]
        self.req = pool.required[task]
        self.n_req = self.req.sum(axis=1)
        self.checkable = pool.checkable[task]
        alpha, beta = prior_before(self.setup.prior_mode, t, self.seq, self.sim_pool, self.pos, self.neg, self.carried,
                                   c.alpha0, c.beta0, c.decay, c.memory_tolerance)
        if self.per_domain:  # an agent's belief on this task: its mean over the task's domains
            w = self.req[:, None, :] / self.n_req[:, None, None]
            self.out.belief_start[:, t] = (policy.posterior_mean(self.dom_alpha, self.dom_beta) * w).sum(axis=2)
        else:
            self.out.belief_start[:, t] = policy.posterior_mean(alpha, beta)
        if self.impaired is not None and t >= self.impaired[1]:
            self.competence = self.zoo.competence.copy()
            self.competence[self.impaired[0]] = 0.0
        self.part_q = np.zeros((S, K))  # the best draft's score per part
        self.draft_q = np.zeros(S)
        self.query_tokens = pool.tokens[task].astype(float)
        self.draft_tokens = np.zeros((S, K))
        return LoopState.start(alpha, beta, c.max_depth)

    def scores(self, state: LoopState, eligible: np.ndarray | None) -> np.ndarray:
        self.weak = self.req & (self.part_q < self.zoo.params.fact_score)  # what the critique asks for
        if not self.per_domain:
            return super().scores(state, eligible)
        target = np.where(self.weak.any(axis=1, keepdims=True), self.weak, self.req)
        theta, self.domain = policy.sample_domain_scores(self.dom_alpha, self.dom_beta, target, state.cool, self.rng)
        # the beliefs this round samples, selects by and updates: each agent's on its best pair
        state.alpha = np.take_along_axis(self.dom_alpha, self.domain[:, :, None], 2)[..., 0]
        state.beta = np.take_along_axis(self.dom_beta, self.domain[:, :, None], 2)[..., 0]
        return theta

    def released(self, state: LoopState, depth: int, rows: np.ndarray, agent: np.ndarray) -> None:
        if self.log_steps:
            idx = np.nonzero(rows)[0]
            nan, zero = np.full(idx.size, np.nan), np.zeros(idx.size)
            self._log(idx, depth, np.full(idx.size, -1), nan, nan, nan, state.alpha[idx, agent[idx]],
                      state.beta[idx, agent[idx]], zero, zero.astype(bool), zero.astype(bool), True)

    def answer(self, state: LoopState, depth: int, agent: np.ndarray, called: np.ndarray) -> np.ndarray:
        zoo, rows, t = self.zoo, self.rows, self.t
        first = called & np.isnan(self.out.first_pick[rows, t, agent])
        self.out.first_pick[rows[first], t, agent[first]] = state.rounds[first]
        self.tokens_out = lognormal_tokens(self.rng, zoo.tokens_out_mean[agent], zoo.params.tokens_cv)
        critique = zoo.params.critique_tokens if depth > 1 else 0.0
        return self.query_tokens + self.draft_tokens.sum(axis=1) + critique + zoo.tokens_in_extra[agent] + self.tokens_out

    def judge(self, state: LoopState, depth: int, agent: np.ndarray, judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        zoo, zp, setup, req = self.zoo, self.zoo.params, self.setup, self.req
        S, K = req.shape
        # the agent's candidate
        self.wrote = judged[:, None] & self.weak & (self.rng.random((S, K)) < self.competence[agent])
        q_new = np.clip(zoo.quality[agent] + zp.quality_sd * self.rng.standard_normal((S, K)), 0.0, 100.0)
        self.cand_q = np.where(self.wrote, q_new, self.part_q)
        self.cand_score = (self.cand_q * req).sum(axis=1) / self.n_req
        self.improved = judged & (self.cand_score - self.draft_q > setup.controller.improve_margin)
        facts_c = ((self.cand_q >= zp.fact_score) & req).sum(axis=1)
        facts_d = ((self.part_q >= zp.fact_score) & req).sum(axis=1)
        u = self.rng.random((S, 2))
        y = np.where(self.checkable & (facts_c > facts_d), True, noisy_verdict(self.improved, u[:, 0], setup.fp, setup.fn)) & judged
        e = np.where(self.checkable & (facts_c == self.n_req), True,
                     noisy_verdict(self.cand_score >= setup.success_score, u[:, 1], setup.fp, setup.fn)) & judged
        return y, e

    def keep(self, state: LoopState, step: Step) -> None:
        i, ok, credit, improved, rows, t, out = step.agent, step.judged, step.credit, self.improved, self.rows, self.t, self.out
        okr = rows[ok]
        if self.per_domain:
            k_star = self.domain[okr, i[ok]]
            self.dom_alpha[okr, i[ok], k_star] += credit[ok]
            self.dom_beta[okr, i[ok], k_star] += 1.0 - credit[ok]
        self.pos[okr, t, i[ok]] += credit[ok]
        self.neg[okr, t, i[ok]] += 1.0 - credit[ok]
        out.good_uses[improved, t] += 1
        out.bad_uses[step.called & ~improved, t] += 1
        out.contributions[rows[improved], t, i[improved]] += 1
        if self.log_steps:
            idx = np.nonzero(step.called)[0]
            a = i[idx]
            self._log(idx, step.depth, a, step.theta[idx, a], credit[idx].astype(float), step.e[idx].astype(float),
                      state.alpha[idx, a], state.beta[idx, a], step.cost[idx], improved[idx], ok[idx], False)
        # the candidate becomes the best draft (lines 29-31); under one verdict a SUCCESS returns
        # the candidate it judged (line 34: the best-supported candidate is the verified one)
        accept = step.accept
        self.part_q = np.where(accept[:, None], self.cand_q, self.part_q)
        self.draft_q = np.where(accept, self.cand_score, self.draft_q)
        per_part = self.tokens_out / np.maximum(self.wrote.sum(axis=1), 1)
        self.draft_tokens = np.where(accept[:, None] & self.wrote, per_part[:, None], self.draft_tokens)

    def finish(self, state: LoopState) -> None:
        out, t = self.out, self.t
        out.calls[:, t], out.rounds[:, t], out.tokens[:, t] = state.calls, state.rounds, state.spent
        out.judged_success[:, t], out.time_to_success[:, t], out.stop[:, t] = state.judged_success, state.time_to_success, state.stop
        out.delegated[:, t], out.released[:, t] = state.delegated, state.released
        out.quality[:, t] = self.draft_q
        out.success[:, t] = self.draft_q >= self.setup.success_score
        self.carried = state.alpha, state.beta

    def _log(self, idx: np.ndarray, depth: int, agent: np.ndarray, theta: np.ndarray, verdict: np.ndarray,
             success_verdict: np.ndarray, alpha: np.ndarray, beta: np.ndarray, tokens: np.ndarray, improved: np.ndarray,
             judged: np.ndarray, forced: bool) -> None:
        if idx.size == 0:
            return
        for key, val in (("seed", idx), ("task", np.full(idx.size, self.t)), ("depth", np.full(idx.size, depth)),
                         ("agent", agent), ("theta", theta), ("verdict", verdict), ("success_verdict", success_verdict),
                         ("alpha", alpha), ("beta", beta), ("tokens", tokens), ("improved", improved), ("judged", judged),
                         ("forced", np.full(idx.size, forced))):
            self.log[key].append(val)


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
    limits = Limits(c.max_depth, c.budget, c.cooldown, c.plateau)
    sim = Simulation(zoo, pool, seq, sim_pool, setup, rng, impaired, log_steps)
    for t in range(seq.shape[1]):
        sim.finish(run_task(sim, sim.begin(t), limits, setup.verdict))
    out = sim.out
    if log_steps:
        out.steps = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in sim.log.items()}
    return out
