"""REDEREF's controller (Algorithm 1) as a reusable router over any agents and judge that speak the
solver protocol: agents are `Solver`s asked with role `redref_agent`, the judge a `Solver` asked with
role `redref_judge`. A real LLM backend (openai_compat, vllm, ...) can play either.

One task at a time through the solver protocol: the depth loop is `loop.run_task` on a batch of
one, the loop the simulated engine (`engine.py`) and the cached routing (`cached.py`) run batched;
`ProtocolTask` supplies what differs (the agents' answers and the judge's verdicts as requests).

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
from delegation_lab.redref.loop import STOP_NAMES, Limits, LoopState, Step, Task, run_task
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
    loop: LoopState | None = None  # the depth loop's decisions (delegated / released per depth, stop) and counters


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
        task = ProtocolTask(self, item, x, now)
        loop = run_task(task, LoopState.start(alpha[None], beta[None], p.max_depth), Limits(p.max_depth, p.budget, p.cooldown, p.plateau))
        self.state.alpha, self.state.beta = loop.alpha[0], loop.beta[0]
        self.state.clock = now + 1
        answer_text, fields = self.aggregate(task.candidates, task.draft, policy.posterior_mean(loop.alpha[0], loop.beta[0]))
        tts = None if np.isnan(loop.time_to_success[0]) else int(loop.time_to_success[0])
        return DelegationResult(answer_text, bool(loop.judged_success[0]), STOP_NAMES[int(loop.stop[0])], int(loop.calls[0]),
                                int(loop.rounds[0]), float(loop.spent[0]), fields, task.steps, tts, loop)

    def ask_judge(self, item: Item, previous: str, candidate: str) -> tuple[dict, str, float | None]:
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


class ProtocolTask(Task):
    """One task of the controller as the loop's batch of one: an answer is a `redref_agent` request
    (its cost: the call's tokens), a verdict a programmatic check or a `redref_judge` request; the
    refined query carries the best draft and the last critique."""

    def __init__(self, ctrl: Redref, item: Item, x: np.ndarray | None, now: int):
        self.ctrl, self.item, self.x, self.now = ctrl, item, x, now
        self.rng, self.selection = ctrl.rng, ctrl.selection
        self.draft, self.critique = "", "(none yet)"
        self.candidates: list[Candidate] = []
        self.steps: list[StepRecord] = []

    def released(self, state: LoopState, depth: int, rows: np.ndarray, agent: np.ndarray) -> None:
        self.steps.append(StepRecord(depth, None, None, None, None, None, None, 0, "forced exploration"))

    def answer(self, state: LoopState, depth: int, agent: np.ndarray, called: np.ndarray) -> np.ndarray:
        name = self.ctrl.names[int(agent[0])]
        solver = self.ctrl.agents[name]
        context = {"agent": name, "expertise": self.ctrl.expertise.get(name, name), "draft": self.draft or "(empty)",
                   "critique": self.critique, "attempt": str(depth)}
        self.reply = solver.solve_requests([solver.request(self.item, AGENT_ROLE, context)])[0]
        return np.array([self.reply.tokens_in + self.reply.tokens_out], dtype=float)

    def judge(self, state: LoopState, depth: int, agent: np.ndarray, judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not judged[0]:  # line 17: the over-budget candidate is not judged
            return np.zeros(1, bool), np.zeros(1, bool)
        ctrl, item, draft = self.ctrl, self.item, self.draft
        self.candidate = merge_sections(draft, self.reply.answer_text or "") if self.reply.error is None else draft
        self.prog, prog_d = ctrl.programmatic(item, self.candidate), ctrl.programmatic(item, draft)
        y_prog = self.prog is not None and self.prog > (prog_d or 0.0)
        e_prog = self.prog is not None and self.prog >= 1.0
        self.score_judge = None
        if y_prog and e_prog:
            y, e, self.rationale = 1, 1, "programmatic pass"
        else:
            verdict, self.rationale, self.score_judge = ctrl.ask_judge(item, draft, self.candidate)
            y = 1 if y_prog else int(verdict["improved"])
            e = 1 if e_prog else int(verdict["success"])
        return np.array([bool(y)]), np.array([bool(e)])

    def keep(self, state: LoopState, step: Step) -> None:
        i = int(step.agent[0])
        name, theta, usage = self.ctrl.names[i], float(step.theta[0, i]), int(step.cost[0])
        if not step.judged[0]:
            self.steps.append(StepRecord(step.depth, name, theta, None, None, None, None, usage, "over budget"))
            return
        y, e = int(step.credit[0]), int(step.e[0])
        self.ctrl.state.memory.add(self.x if self.x is not None else np.zeros(1), i, y, self.rationale, self.now)
        self.candidates.append(Candidate(self.candidate, i, self.prog, self.score_judge, bool(y)))
        self.steps.append(StepRecord(step.depth, name, theta, y, e, float(state.alpha[0, i]), float(state.beta[0, i]), usage,
                                     self.rationale, self.prog, self.score_judge))
        if step.accept[0]:
            self.draft = self.candidate
        self.critique = self.rationale or "(no rationale)"
