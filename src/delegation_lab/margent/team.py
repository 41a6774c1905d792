"""The team protocol: a manager and frozen sub-agents behind batched calls, and the gold scorer.

A `Team` answers whole batches: one `consult` call carries every branch of a depth that delegates
to the same sub-agent, one `revise` call every revision of that depth. Two teams implement it:
`simulator.SimulatedTeam` (the embedded default) and `llm_team.LLMTeam` (real models through the
solver protocol and the answer cache). Every reply is a `Reply`: a validated value, or an error
that the collection records as an error branch.

`GoldScorer` is the only object holding gold answers; it turns a terminal candidate into 0 / 1 and
never hands gold to anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
from pydantic import SerializeAsAny

from delegation_lab.data.items import Item
from delegation_lab.margent.schemas import AgentView, Candidate, Decision, Frozen, Signal, SignalBase, State
from delegation_lab.parsing import numbers_match, parse_choice, parse_number_answer

T = TypeVar("T")

CANDIDATE_READERS = frozenset({"Verifier"})
"""Sub-agents that receive the manager's current candidate (the paper: the Verifier only)."""


@dataclass(frozen=True)
class Reply(Generic[T]):
    value: T | None
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


class Consultation(Frozen):
    """A sub-agent's reply waiting for the manager's revision."""

    agent: str
    sees_candidate: bool
    signal: SerializeAsAny[SignalBase] | None
    error: str | None = None
    signal_tokens: int = 0


class Team(Protocol):
    """The manager (candidate, revise, decide) and the frozen sub-agents, batched."""

    backend_calls: int  # backend requests sent (cached answers are not sent again)

    def candidates(self, views: list[AgentView]) -> list[Reply[Candidate]]: ...

    def consult(self, agent: str, states: list[State], sees_candidate: bool) -> list[Reply[Signal]]: ...

    def revise(self, pending: list[tuple[State, Consultation]]) -> list[Reply[Candidate]]: ...

    def decide(self, states: list[State], pool: tuple[str, ...]) -> list[Reply[Decision]]: ...


class GoldScorer:
    """Scores terminal candidates against gold. Nothing else in the study sees gold."""

    def __init__(self, items: list[Item], numeric_tolerance: float = 1e-6):
        self._gold = {item.item_id: (item.gold, len(item.choices or [])) for item in items}
        self._tol = numeric_tolerance

    def __contains__(self, item_id: str) -> bool:
        return item_id in self._gold

    def is_correct(self, item_id: str, answer: str | None) -> bool:
        gold, n_choices = self._gold[item_id]
        if gold is None or not answer:
            return False
        if n_choices:
            return parse_choice(answer, n_choices) == gold
        return numbers_match(parse_number_answer(answer), gold, self._tol)

    def score(self, item_ids: list[str], answers: list[str | None]) -> np.ndarray:
        return np.array([self.is_correct(i, a) for i, a in zip(item_ids, answers, strict=True)], dtype=bool)


def error_candidate(previous: Candidate | None) -> Candidate:
    """What stands when the manager's reply is malformed: the previous candidate, or no answer at all."""
    return previous if previous is not None else Candidate(answer="", confidence=0.0, rationale="(malformed reply)")


def rescue_kind(before: bool, after: bool) -> str:
    return "rescue" if after and not before else "corruption" if before and not after else "no_change"


__all__ = [
    "CANDIDATE_READERS", "Consultation", "GoldScorer", "Reply", "Team", "error_candidate", "rescue_kind",
]
