"""What crosses between the manager, the sub-agents and the collector, as pydantic models.

The gold answer has no place in any of them: `AgentView` is the question as agents see it (built
from an `Item` by dropping gold and every solved value), `State` is s_t = (x, h_t, ŷ_t, U_t), and
every model refuses unknown fields, so gold cannot be smuggled in. Only `scoring.GoldScorer`
holds gold, and it scores terminal candidates.

Sub-agents return structured signals, never an answer: a signal whose text contains a final
answer or a choice label is rejected (`SignalError`), and so is one that breaks its schema.
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, model_validator

from delegation_lab.data.items import Item
from delegation_lab.errors import InputError
from delegation_lab.margent.params import SUBAGENTS, SubAgent


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# ---------------------------------------------------------------------------------------------
# the question as agents see it


class Step(Frozen):
    """One element of a question's structure: the starting quantity or an operation and its argument
    (never its result)."""

    op: str
    value: float


class AgentView(Frozen):
    """The question x, as the manager and the sub-agents see it. There is no gold field."""

    item_id: str
    question: str
    choices: tuple[str, ...] | None = None
    difficulty: int = 1
    domain: str = ""
    structure: tuple[Step, ...] | None = None

    @classmethod
    def from_item(cls, item: Item) -> AgentView:
        """Drop gold and every solved value: a structured question keeps its operations only."""
        structure = None
        steps = item.steps()
        if steps and steps[0].get("op") == "start":
            structure = tuple(
                Step(op="start", value=float(s["value"])) if s["op"] == "start" else Step(op=s["op"], value=float(s["arg"]))
                for s in steps
            )
        return cls(
            item_id=item.item_id, question=item.question, choices=tuple(item.choices) if item.choices else None,
            difficulty=item.difficulty, domain=item.domain, structure=structure,
        )

    def as_item(self) -> Item:
        """The solver protocol's record for this question, with gold and program left empty."""
        return Item(
            item_id=self.item_id, split="", question=self.question, gold=None,
            choices=list(self.choices) if self.choices else None, difficulty=self.difficulty, domain=self.domain,
        )


# ---------------------------------------------------------------------------------------------
# no answers in signals

# A number as a signal states it: an optional sign or currency, digits, decimals, a percent sign.
_NUM = r"[-−]?\$?\d[\d,]*(?:\.\d+)?%?"

_PHRASES = re.compile(
    # Answer markers: "####", \boxed, "final answer", "the answer is", "Answer:", "correct option", "result is".
    r"####|\\boxed|final\s+answer|(?:the\s+)?(?:correct\s+)?answer\s+(?:is|would\s+be|should\s+be)\b"
    r"|\banswer\s*[:=]|\bcorrect\s+(?:option|choice)\b|\bsolution\s+is\b|\bresult\s+is\b"
    # A conclusion that ends on a bare number ("Therefore 42.", "The total comes to 42."); a number
    # inside a computation ("so 6 + 4 = 10", "which comes to $6, then add 4") is left alone.
    r"|(?:\b(?:therefore|thus|hence)|^\s*so\b|\b(?:comes?|came)\s+(?:out\s+)?to|\bworks?\s+out\s+(?:to|at)"
    r"|\bends?\s+up\s+(?:at|as|with|being))[\s,:]*" + _NUM + r"(?:\s+[a-z]+)?\s*(?:[.!](?:\s|$)|$)"
    # A replacement value for the candidate ("Candidate should be 17 instead", "the total must be 42").
    r"|\b(?:candidate|answer|total|result)\s+(?:should|must)\s+(?:be|have\s+been|equal|read)\s+" + _NUM,
    re.I | re.M,
)
_LABELS = re.compile(
    # A label named as an option ("Option C", "choice (B)").
    r"(?i:\b(?:option|choice)\s*)\(?[A-E]\)?(?![\w])"
    # A label picked ("Choose D", "I would pick C.", "go with (B)"); the letter must be upper case,
    # so "pick a number" passes.
    r"|(?i:\b(?:choose|chose|choosing|pick|picked|picking|select|selected|go\s+with|opt\s+for)\s+)\(?[A-E]\)?(?![\w'])"
    # A label declared right ("(C) is correct", "B is the right one").
    r"|(?<![\w(])\(?[A-E]\)?\s+(?i:is|seems|looks|must\s+be)\s+(?i:correct|right|the\s+(?:right|correct|best)\b)"
    # A signal that is nothing but a label or a number ("B", "(C).", "42").
    r"|^\s*(?:\(?[A-E]\)?|" + _NUM + r")[.:)]?\s*$",
    re.M,
)


def answer_leak(text: str) -> str | None:
    """The piece of `text` that states a final answer or a choice label, or None."""
    for pattern in (_PHRASES, _LABELS):
        m = pattern.search(text)
        if m:
            return m.group(0).strip()
    return None


def _check_texts(texts: list[str], who: str) -> None:
    for text in texts:
        leak = answer_leak(text)
        if leak is not None:
            raise ValueError(f"{who} signal contains a final answer or a choice label ({leak!r} in {text[:80]!r})")


Text = Field(min_length=1, max_length=400)


class Fact(Frozen):
    statement: str = Text
    polarity: Literal["supports", "contradicts", "neutral"]
    """Whether the fact supports or contradicts the natural reading of the question (a contradicting
    fact is one a solver is likely to overlook)."""


class SignalBase(Frozen):
    """What every sub-agent signal offers the manager's features: whether it raises an issue."""

    @cached_property
    def raises_issue(self) -> bool:  # pragma: no cover - every signal type overrides it
        return False


class ExtractorSignal(SignalBase):
    """Decision-relevant facts and their polarity."""

    facts: tuple[Fact, ...] = Field(min_length=1, max_length=16)

    @model_validator(mode="after")
    def _no_answer(self) -> ExtractorSignal:
        _check_texts([f.statement for f in self.facts], "Extractor")
        return self

    @cached_property
    def raises_issue(self) -> bool:
        return any(f.polarity == "contradicts" for f in self.facts)


class ReasonerSignal(SignalBase):
    """A decomposition of the problem and the reasoning steps missing from it so far."""

    decomposition: tuple[str, ...] = Field(min_length=1, max_length=16)
    missing_steps: tuple[str, ...] = Field(default=(), max_length=16)

    @model_validator(mode="after")
    def _no_answer(self) -> ReasonerSignal:
        _check_texts([*self.decomposition, *self.missing_steps], "Reasoner")
        for text in (*self.decomposition, *self.missing_steps):
            if not text.strip():
                raise ValueError("Reasoner signal has an empty step")
        return self

    @cached_property
    def raises_issue(self) -> bool:
        return bool(self.missing_steps)


class VerifierSignal(SignalBase):
    """An audit of the current candidate (never a replacement for it)."""

    verdict: Literal["consistent", "inconsistent", "uncertain"]
    issues: tuple[str, ...] = Field(default=(), max_length=16)

    @model_validator(mode="after")
    def _no_answer(self) -> VerifierSignal:
        _check_texts(list(self.issues), "Verifier")
        return self

    @cached_property
    def raises_issue(self) -> bool:
        return self.verdict == "inconsistent"


Signal = ExtractorSignal | ReasonerSignal | VerifierSignal
SIGNAL_TYPES: dict[str, type[Signal]] = {"Extractor": ExtractorSignal, "Reasoner": ReasonerSignal, "Verifier": VerifierSignal}


class SignalError(InputError):
    """A sub-agent (or manager) reply that breaks its schema; the collection records it as an error branch."""


# ---------------------------------------------------------------------------------------------
# the manager's outputs


class Candidate(Frozen):
    """The answer the manager would submit now. An empty answer means it gave none (scored wrong)."""

    answer: str = Field(max_length=200)
    confidence: float = Field(ge=0, le=1)
    rationale: str = Field(default="", max_length=2000)


class Decision(Frozen):
    action: Literal["commit", "delegate"]
    agent: SubAgent | None = None

    @model_validator(mode="after")
    def _agent(self) -> Decision:
        if self.action == "delegate" and self.agent is None:
            raise ValueError("delegate needs an agent")
        if self.action == "commit" and self.agent is not None:
            raise ValueError("commit takes no agent")
        return self


# ---------------------------------------------------------------------------------------------
# the state


class Call(Frozen):
    """One delegation in the history: who was called, what came back, and the revision around it."""

    agent: SubAgent
    sees_candidate: bool
    signal: SerializeAsAny[SignalBase] | None  # an instance of a signal type (already validated; never re-run)
    error: str | None = None
    before: Candidate
    after: Candidate
    signal_tokens: int = 0

    @property
    def raises_issue(self) -> bool:
        return self.signal is not None and self.signal.raises_issue

    @property
    def changed(self) -> bool:
        return self.after.answer != self.before.answer


class State(Frozen):
    """s_t = (x, h_t, ŷ_t, U_t): question, history of calls, current candidate; U_t = the agents in the history."""

    x: AgentView
    history: tuple[Call, ...] = ()
    candidate: Candidate

    @model_validator(mode="after")
    def _distinct(self) -> State:
        agents = [c.agent for c in self.history]
        if len(set(agents)) != len(agents):
            raise ValueError(f"a sub-agent is called at most once per trajectory: {agents}")
        return self

    @cached_property
    def used(self) -> frozenset[str]:
        return frozenset(c.agent for c in self.history)

    @cached_property
    def sequence(self) -> tuple[str, ...]:
        return tuple(c.agent for c in self.history)

    @property
    def root_candidate(self) -> Candidate:
        return self.history[0].before if self.history else self.candidate

    def available(self, pool: tuple[str, ...] | list[str]) -> list[str]:
        return [a for a in pool if a not in self.used]


# ---------------------------------------------------------------------------------------------
# parsing replies

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str | None) -> dict:
    """The JSON object in a reply (inside a code fence or between the first '{' and the last '}')."""
    if not text or not text.strip():
        raise ValueError("empty reply")
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    try:
        obj = json.loads(body[start : end + 1])
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON ({e.msg} at char {e.pos})") from None
    if not isinstance(obj, dict):
        raise ValueError("the reply's JSON is not an object")
    return obj


def _explain(error: ValidationError) -> str:
    parts = []
    for err in error.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(object)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def parse_reply(model: type[Frozen], text: str | None, who: str) -> Frozen:
    """Validate a JSON reply against `model`; SignalError names who replied and what is wrong."""
    try:
        return model.model_validate(extract_json(text))
    except ValidationError as e:
        raise SignalError(f"{who} reply breaks the {model.__name__} schema: {_explain(e)}") from None
    except ValueError as e:
        raise SignalError(f"{who} reply is not valid JSON: {e}") from None


def parse_signal(agent: str, text: str | None) -> Signal:
    if agent not in SIGNAL_TYPES:
        raise SignalError(f"unknown sub-agent {agent!r}; the pool is {list(SUBAGENTS)}")
    return parse_reply(SIGNAL_TYPES[agent], text, agent)  # type: ignore[return-value]


def signal_for(agent: str, data: dict) -> Signal:
    """Validate a signal given as a dict (e.g. from a Python caller); errors name the agent."""
    if agent not in SIGNAL_TYPES:
        raise SignalError(f"unknown sub-agent {agent!r}; the pool is {list(SUBAGENTS)}")
    try:
        return SIGNAL_TYPES[agent].model_validate(data)
    except ValidationError as e:
        raise SignalError(f"{agent} signal breaks the {SIGNAL_TYPES[agent].__name__} schema: {_explain(e)}") from None
