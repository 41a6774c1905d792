"""REDEREF's controller (Algorithm 1) as a reusable router over any agents and judge that speak the
solver protocol: agents are `Solver`s asked with role `redref_agent`, the judge a `Solver` asked with
role `redref_judge`. A real LLM backend (openai_compat, vllm, ...) can play either.

One task at a time, readable; the experiments run the same decisions batched over seeds in
`engine.py` (both call `policy.py`).

Reading of Algorithm 1 used here (the paper leaves these open):
- y (the posterior update) is the judge's *marginal contribution* verdict — is the candidate better
  than the best draft so far (Section 3: theta_i models a net-positive marginal contribution) — and
  the recursion stops when an accepted candidate is also judged to satisfy the task (A.3.4 steps 2-3).
  Lines 29-31 (best-so-far by combined score) are this pairwise verdict: an improvement is accepted
  as the new best draft, which the refined query (line 37) carries to the next agent.
- A programmatic positive short-circuits the judge: more key facts than the best draft is an
  unambiguous contribution, all key facts an unambiguous success (lines 19-21).
- Cooldown: the chosen agent sits out the next r rounds; when all cool, the one with the smallest
  remaining cooldown is released and the round is spent (lines 10-12, A.3.2).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from delegation_lab.data.items import Item
from delegation_lab.errors import InputError
from delegation_lab.redref import policy
from delegation_lab.redref.judge import AGENT_ROLE, JUDGE_ROLE, rationale_of, supporting_fact_recall
from delegation_lab.redref.memory import BeliefState, Embedder
from delegation_lab.redref.params import ControllerParams
from delegation_lab.redref.tasks import parse_sections, render_sections
from delegation_lab.solvers.base import Solver


def competence_weighted_vote(values: list[str], weights: list[float]) -> str | None:
    """Fuse one structured field: the value with the largest total trust mu_i (paper 3.3);
    ties go to the value first seen."""
    totals: dict[str, float] = defaultdict(float)
    for v, w in zip(values, weights, strict=True):
        totals[v] += w
    return max(totals, key=lambda v: totals[v]) if totals else None


def merge_sections(draft: str, contribution: str) -> str:
    """The candidate: the best draft with the contribution's sections in place of those parts."""
    merged = parse_sections(draft)
    merged.update(parse_sections(contribution))
    return render_sections(merged)


@dataclass
class Candidate:
    text: str
    agent: int
    programmatic: float | None
    judge_score: float | None
    accepted: bool


@dataclass
class StepRecord:
    depth: int
    agent: str | None  # None: a forced-exploration round
    theta: float | None
    verdict: int | None  # y; None when not judged (forced round, over budget)
    success_verdict: int | None
    alpha: float | None  # posterior of the chosen agent after the update
    beta: float | None
    tokens: int
    rationale: str = ""
    programmatic: float | None = None
    judge_score: float | None = None


@dataclass
class DelegationResult:
    answer: str
    judged_success: bool
    stop: str  # success | depth | budget | plateau
    calls: int
    rounds: int
    spent: float
    fields: dict[str, str]
    steps: list[StepRecord] = field(default_factory=list)
    time_to_success: int | None = None


class Redref:
    """Algorithm 1 over named agents. `state` holds beliefs and memory and persists across tasks
    (and, through BeliefState.save / load, across sessions)."""

    def __init__(
        self,
        agents: Mapping[str, Solver],
        judge: Solver,
        params: ControllerParams,
        state: BeliefState,
        embedder: Embedder | None,
        rng: np.random.Generator,
        selection: policy.Selection = "thompson",
        success_score: float = 85.0,
        programmatic: Callable[[Item, str], float | None] = supporting_fact_recall,
        expertise: Mapping[str, str] | None = None,
    ):
        if list(agents) != state.agents:
            raise InputError(f"beliefs are for agents {state.agents}, but the controller got {list(agents)}")
        if params.prior == "memory" and embedder is None:
            raise InputError("memory-aware priors need an embedder")
        self.agents, self.names = dict(agents), list(agents)
        self.judge, self.params, self.state = judge, params, state
        self.embedder, self.rng, self.selection = embedder, rng, selection
        self.success_score, self.programmatic = success_score, programmatic
        self.expertise = dict(expertise or {})

    def prior(self, x: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        p = self.params
        if p.prior == "memory":
            return self.state.memory.prior(x, self.state.clock, p.alpha0, p.beta0, p.decay, p.memory_tolerance)
        if p.prior == "persistent":
            return self.state.alpha.copy(), self.state.beta.copy()
        n = len(self.names)
        return np.full(n, p.alpha0), np.full(n, p.beta0)

    def run(self, item: Item) -> DelegationResult:
        p = self.params
        parts = json.loads(item.program or "{}").get("parts", [])
        if len(parts) > len(self.names):
            raise InputError(f"task {item.item_id} has {len(parts)} parts but the agent pool has {len(self.names)} agents")
        x = self.embedder.encode([item.question])[0] if self.embedder is not None else None
        now = self.state.clock
        alpha, beta = self.prior(x)
        cool = np.zeros(len(self.names), dtype=int)
        spent, calls, rounds, no_improvement = 0.0, 0, 0, 0
        draft, critique = "", "(none yet)"
        candidates: list[Candidate] = []
        steps: list[StepRecord] = []
        stop, success, tts = "depth", False, None
        for depth in range(1, p.max_depth + 1):
            if spent >= p.budget:
                stop = "budget"
                break
            theta = policy.sample_scores(alpha[None], beta[None], cool[None], self.rng, self.selection)[0]
            if not np.isfinite(theta).any():  # every agent cools: release one, spend the round
                policy.release_one(cool[None], np.array([True]))
                rounds += 1
                steps.append(StepRecord(depth, None, None, None, None, None, None, 0, "forced exploration"))
                continue
            i = int(policy.select(theta[None], alpha[None], beta[None])[0])
            name = self.names[i]
            solver = self.agents[name]
            context = {"agent": name, "expertise": self.expertise.get(name, name), "draft": draft or "(empty)",
                       "critique": critique, "attempt": str(depth)}
            answer = solver.solve_requests([solver.request(item, AGENT_ROLE, context)])[0]
            rounds, calls = rounds + 1, calls + 1
            usage = answer.tokens_in + answer.tokens_out
            spent += usage
            if spent > p.budget:  # line 17: the over-budget candidate is not judged
                steps.append(StepRecord(depth, name, float(theta[i]), None, None, None, None, usage, "over budget"))
                stop = "budget"
                break
            candidate = merge_sections(draft, answer.answer_text or "") if answer.error is None else draft
            prog_c, prog_d = self.programmatic(item, candidate), self.programmatic(item, draft)
            y_prog = prog_c is not None and prog_c > (prog_d or 0.0)
            e_prog = prog_c is not None and prog_c >= 1.0
            score_judge = None
            if y_prog and e_prog:
                y, e, rationale = 1, 1, "programmatic pass"
            else:
                verdict, rationale, score_judge = self._judge(item, draft, candidate)
                y = 1 if y_prog else int(verdict["improved"])
                e = 1 if e_prog else int(verdict["success"])
            policy.update(alpha[None], beta[None], np.array([i]), np.array([y]), np.array([True]))
            self.state.memory.add(x if x is not None else np.zeros(1), i, y, rationale, now)
            candidates.append(Candidate(candidate, i, prog_c, score_judge, bool(y)))
            steps.append(StepRecord(depth, name, float(theta[i]), y, e, float(alpha[i]), float(beta[i]), usage,
                                    rationale, prog_c, score_judge))
            if y:
                draft = candidate
                if e:
                    stop, success, tts = "success", True, rounds
                    break
            policy.cool_down(cool[None], np.array([i]), p.cooldown, np.array([True]))
            critique = rationale or "(no rationale)"
            no_improvement = 0 if y else no_improvement + 1
            if no_improvement >= p.plateau:
                stop = "plateau"
                break
        self.state.alpha, self.state.beta = alpha, beta
        self.state.clock = now + 1
        answer_text, fields = self.aggregate(candidates, draft, policy.posterior_mean(alpha, beta))
        return DelegationResult(answer_text, success, stop, calls, rounds, spent, fields, steps, tts)

    def _judge(self, item: Item, previous: str, candidate: str) -> tuple[dict, str, float | None]:
        context = {"parts": ", ".join(json.loads(item.program or "{}").get("parts", [])), "previous": previous or "(empty)",
                   "candidate": candidate or "(empty)", "threshold": f"{self.success_score:g}"}
        reply = self.judge.solve_requests([self.judge.request(item, JUDGE_ROLE, context)])[0]
        if reply.error is not None or reply.parsed_answer is None:
            return {"improved": False, "success": False, "score": None}, "unreadable judge reply", None
        verdict = json.loads(reply.parsed_answer)
        return verdict, rationale_of(reply.answer_text), verdict.get("score")

    def aggregate(self, candidates: list[Candidate], best: str, mu: np.ndarray) -> tuple[str, dict[str, str]]:
        """Selection with evidence (lines 34 / 42): the best-supported draft, its structured fields
        (each part's key fact) fused across every candidate by competence-weighted voting."""
        if not candidates:
            return "FAILURE: no candidate produced", {}
        votes: dict[str, tuple[list[str], list[float]]] = defaultdict(lambda: ([], []))
        for c in candidates:
            for domain, (agent, _, body) in parse_sections(c.text).items():
                for line in body.splitlines():
                    if line.startswith("Fact: "):
                        author = self.names.index(agent) if agent in self.names else c.agent
                        votes[domain][0].append(line[6:].strip())
                        votes[domain][1].append(float(mu[author]))
        fields = {d: competence_weighted_vote(v, w) for d, (v, w) in votes.items()}
        fields = {d: v for d, v in fields.items() if v is not None}
        block = "\n".join(f"- {d}: {v}" for d, v in sorted(fields.items()))
        return (best or candidates[-1].text) + (f"\n\nKey facts (competence-weighted vote):\n{block}" if block else ""), fields
