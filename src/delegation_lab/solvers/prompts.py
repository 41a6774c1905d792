"""Versioned prompt templates. A template's name and version enter the request hash, so an edited
prompt gets new answers while an unchanged one is never paid for twice. Bump `version` whenever
the text or the parser changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from delegation_lab.data.items import Item
from delegation_lab.errors import InputError
from delegation_lab.parsing import parse_choice, parse_number_answer

Parser = Callable[[str, Item], "str | None"]


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: int
    system: str
    user: str  # str.format over {question}, {choices} and the request context
    parser: Parser = field(default=lambda text, item: None)

    def render(self, item: Item, context: dict[str, str]) -> list[dict[str, str]]:
        choices = "\n".join(f"{'ABCDE'[i]}) {c}" for i, c in enumerate(item.choices or []))
        values = {"question": item.question, "choices": choices, **context}
        try:
            user = self.user.format(**values)
        except KeyError as e:
            raise InputError(f"prompt template {self.name!r} needs context key {e.args[0]!r}") from None
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return messages + [{"role": "user", "content": user}]

    def parse(self, text: str | None, item: Item) -> str | None:
        return self.parser(text or "", item)


VERDICT = re.compile(r"\b(INCORRECT|CORRECT)\b", re.I)


def parse_verdict(text: str, item: Item) -> str | None:
    """'correct' / 'incorrect' from a judge's reply (the first explicit verdict wins)."""
    m = VERDICT.search(text)
    return m.group(1).lower() if m else None


TEMPLATES: dict[str, PromptTemplate] = {}


def register(template: PromptTemplate) -> PromptTemplate:
    existing = TEMPLATES.get(template.name)
    if existing is not None and existing != template:
        raise ValueError(f"prompt template {template.name!r} is already registered with other content")
    TEMPLATES[template.name] = template
    return template


MATH_COT = register(PromptTemplate(
    name="math_cot",
    version=1,
    system="You are a careful math tutor. Solve the problem step by step.",
    user="{question}\n\nThink step by step, then give the final answer on its own line as '#### <number>'.",
    parser=lambda text, item: parse_number_answer(text),
))

MULTIPLE_CHOICE = register(PromptTemplate(
    name="multiple_choice",
    version=1,
    system="You are a careful problem solver. Answer multiple-choice questions.",
    user="{question}\n\nOptions:\n{choices}\n\nReason briefly, then finish with 'Answer: <letter>'.",
    parser=lambda text, item: parse_choice(text, len(item.choices or []) or 5),
))

SERVED_SOURCE = "served"
"""`Item.source` of a request `dlab serve` answered (the `served` dataset's items): answered with CHAT."""


@dataclass(frozen=True)
class ChatTemplate(PromptTemplate):
    """A client's own conversation, sent as it came (`dlab serve`): the item's question as the one user
    turn, or the whole conversation when the request context carries it (`messages`, JSON), so the
    request hash covers exactly what the backend was sent."""

    def render(self, item: Item, context: dict[str, str]) -> list[dict[str, str]]:
        if "messages" in context:
            return json.loads(context["messages"])
        return [{"role": "user", "content": item.question}]


CHAT = register(ChatTemplate(
    name="chat",
    version=1,
    system="",
    user="{question}",
    parser=lambda text, item: parse_number_answer(text),
))

JUDGE = register(PromptTemplate(
    name="judge",
    version=1,
    system="You grade answers to math problems against a reference solution. Be strict about the final value.",
    user=(
        "Problem:\n{question}\n\nReference answer: {reference}\n\nCandidate answer:\n{candidate}\n\n"
        "Reply with 'VERDICT: CORRECT' or 'VERDICT: INCORRECT' on the first line, then one line "
        "'RATIONALE: ...'."
    ),
    parser=parse_verdict,
))

DEFAULT_FOR_ROLE = {"judge": "judge"}


def template_for(role: str, item: Item, override: str | None = None) -> PromptTemplate:
    name = override or DEFAULT_FOR_ROLE.get(role)
    if name is None and role == "answer":
        name = "chat" if item.source == SERVED_SOURCE else "multiple_choice" if item.choices else "math_cot"
    if name is None:
        raise InputError(f"no prompt template for role {role!r}; set solvers.<name>.role_prompts.{role}")
    if name not in TEMPLATES:
        raise InputError(f"unknown prompt template {name!r}; registered: {sorted(TEMPLATES)}")
    return TEMPLATES[name]
