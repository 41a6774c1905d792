"""The MARGENT team on real models: every manager and sub-agent call is a `Solver` request with a
versioned prompt (`margent.prompts`), answered through the resumable `AnswerCache`, so a rerun
pays for nothing twice and a killed collection resumes where it stopped.

Requests carry `AgentView.as_item()` — an item with no gold and no program — so no prompt can
leak the gold answer. Identical requests in one batch (a sub-agent that sees only the question,
called from several branches of the same item) are sent once. A reply that is not valid JSON or
breaks its schema (or contains an answer, for a signal) becomes a `Reply` with `error` set: the
collection records an error branch and carries on.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.margent import prompts
from delegation_lab.margent.params import MargentParams
from delegation_lab.solvers.params import SolverParams
from delegation_lab.margent.schemas import (
    SIGNAL_TYPES,
    AgentView,
    Candidate,
    Decision,
    Frozen,
    Signal,
    SignalError,
    State,
    parse_reply,
)
from delegation_lab.margent.team import Consultation, Reply
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.base import Request, Solver
from delegation_lab.solvers.cache import AnswerCache

UNSUPPORTED = {"simulated": "answers only roles `answer` and `judge`", "replay": "replays cached answers of other prompts"}


def team_solvers(margent: MargentParams, solvers: dict[str, SolverParams]) -> dict[str, str]:
    """role (manager / Extractor / Reasoner / Verifier) -> solver name, checked against `solvers:`."""
    roles = {"manager": margent.solvers.manager, **{a: margent.solvers.for_role(a) for a in margent.subagents}}
    for role, name in roles.items():
        if name not in solvers:
            key = "manager" if role == "manager" else role.lower()
            raise InputError(f"margent.solvers.{key}: solver {name!r} is not in params.yaml solvers (have: {', '.join(solvers)})")
    return roles


class LLMTeam:
    def __init__(self, roles: dict[str, str], solvers: dict[str, SolverParams], cache_dir: Path, progress: bool = False):
        for role, name in roles.items():
            backend = solvers[name].backend
            if backend in UNSUPPORTED:
                raise InputError(
                    f"margent.team is llm but solver {name!r} (role {role}) has backend {backend!r}, which "
                    f"{UNSUPPORTED[backend]}; point margent.solvers at a real backend or use margent.team: simulated"
                )
        self.roles = roles
        self.progress = progress
        self.backend_calls = 0
        self._solvers: dict[str, Solver] = {}
        for name in sorted(set(roles.values())):
            params = solvers[name]
            params = params.model_copy(update={"role_prompts": {**prompts.ROLE_TEMPLATES, **params.role_prompts}})
            self._solvers[name] = build_solver(name, params)
        self._caches = {
            name: AnswerCache(cache_dir / f"{name}.parquet", cache_dir / ".journal" / name) for name in self._solvers
        }

    # -- one batched, cached call ----------------------------------------------------------
    def _ask(self, role: str, solver_role: str, views: list[AgentView], contexts: list[dict[str, str]]) -> list[dict]:
        """Cached answer rows (one per request, in order); only requests not yet cached reach the backend."""
        solver = self._solvers[self.roles[role]]
        requests: list[Request] = [solver.request(v.as_item(), solver_role, c) for v, c in zip(views, contexts, strict=True)]
        unique = list({(r.item.item_id, r.request_hash): r for r in requests}.values())
        cache = self._caches[solver.name]
        run = cache.fill(solver, unique, batch_size=solver.params.batch_size, progress=self.progress)
        self.backend_calls += run.backend_calls
        rows = cache.read().filter(pl.col("request_hash").is_in([r.request_hash for r in unique]))
        by_key = {(r["item_id"], r["request_hash"]): r for r in rows.iter_rows(named=True)}
        return [by_key[(r.item.item_id, r.request_hash)] for r in requests]

    @staticmethod
    def _reply(row: dict, model: type[Frozen], who: str) -> Reply:
        tokens = {"tokens_in": int(row["tokens_in"] or 0), "tokens_out": int(row["tokens_out"] or 0), "cost_usd": float(row["cost_usd"] or 0.0)}
        if row["error"] is not None:
            return Reply(value=None, error=f"{who} backend error: {row['error']}", **tokens)
        try:
            if row["parsed_answer"] is not None:
                return Reply(value=model.model_validate_json(row["parsed_answer"]), **tokens)
            return Reply(value=parse_reply(model, row["answer_text"], who), **tokens)
        except SignalError as e:
            return Reply(value=None, error=str(e), **tokens)
        except ValueError as e:  # a cached parse that the current schema refuses
            return Reply(value=None, error=f"{who} reply breaks its schema: {e}"[:300], **tokens)

    # -- the team protocol -----------------------------------------------------------------
    def candidates(self, views: list[AgentView]) -> list[Reply[Candidate]]:
        if not views:
            return []
        rows = self._ask("manager", "margent_candidate", views, [prompts.candidate_context(v) for v in views])
        return [self._reply(r, Candidate, "manager candidate") for r in rows]

    def consult(self, agent: str, states: list[State], sees_candidate: bool) -> list[Reply[Signal]]:
        if not states:
            return []
        contexts = [prompts.consult_context(s, agent, sees_candidate) for s in states]
        rows = self._ask(agent, prompts.subagent_role(agent), [s.x for s in states], contexts)
        return [self._reply(r, SIGNAL_TYPES[agent], agent) for r in rows]

    def revise(self, pending: list[tuple[State, Consultation]]) -> list[Reply[Candidate]]:
        if not pending:
            return []
        contexts = [prompts.revise_context(s, c.agent, c.signal) for s, c in pending]
        rows = self._ask("manager", "margent_revise", [s.x for s, _ in pending], contexts)
        return [self._reply(r, Candidate, "manager revision") for r in rows]

    def decide(self, states: list[State], pool: tuple[str, ...]) -> list[Reply[Decision]]:
        if not states:
            return []
        rows = self._ask("manager", "margent_decide", [s.x for s in states], [prompts.decide_context(s, pool) for s in states])
        return [self._reply(r, Decision, "manager decision") for r in rows]
