"""The solver protocol: `Solver.solve(items, role)` renders prompts, asks a backend in one batch,
parses and prices every answer. Backends only turn requests into generations.

Every text of an answer (`answer_text`, `error`, `extra`) passes through `mask_secrets` with the
solver's configured secrets before it exists as a row, so nothing downstream (cache, journal,
DVC cache, MLflow, stdout) can see a key a server echoed back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from delegation_lab.data.items import Item
from delegation_lab.hashing import stable_hash
from delegation_lab.solvers.params import OpenAICompatParams, SolverParams
from delegation_lab.solvers.pricing import cost_usd
from delegation_lab.solvers.prompts import PromptTemplate, template_for
from delegation_lab.solvers.storable_text import clean_text

MASK = "***"
MIN_SECRET_CHARS = 4
"""Shorter values are not secrets anyone issues; masking them would garble ordinary text."""
FRAGMENT_CHARS = 8
"""A run of this many characters of a secret is masked wherever it appears (a truncated or partly
echoed key leaks as much as the whole one)."""


def mask_secrets(text: str | None, secrets: Iterable[str]) -> str | None:
    """`text` with every secret, and every run of FRAGMENT_CHARS or more of its characters, as MASK.

    Apply it before any truncation or reformatting: a cut key is no longer found whole."""
    if not text:
        return text
    secrets = [s for s in secrets if len(s) >= MIN_SECRET_CHARS]
    for secret in secrets:
        if len(secret) < FRAGMENT_CHARS:
            text = text.replace(secret, MASK)
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        # any 8-run of the secret contains one of its 4-aligned 4-grams: a cheap pre-check
        if len(secret) < FRAGMENT_CHARS or not any(secret[i : i + 4] in text for i in range(0, len(secret) - 3, 4)):
            continue
        grams = {secret[i : i + FRAGMENT_CHARS] for i in range(len(secret) - FRAGMENT_CHARS + 1)}
        spans += [(j, j + FRAGMENT_CHARS) for j in range(len(text) - FRAGMENT_CHARS + 1)
                  if text[j : j + FRAGMENT_CHARS] in grams]
    merged: list[list[int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    out, pos = [], 0
    for start, stop in merged:
        out += [text[pos:start], MASK]
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def mask_value(value: Any, secrets: list[str]) -> Any:
    """`mask_secrets` applied to every string inside a JSON-like value (keys included)."""
    if isinstance(value, str):
        return mask_secrets(value, secrets)
    if isinstance(value, dict):
        return {mask_value(k, secrets): mask_value(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_value(v, secrets) for v in value]
    return value


def configured_secrets(section: OpenAICompatParams | None) -> list[str]:
    """The secret values an endpoint's params point at, read from the environment now: the API key,
    the `secret_envs`, and a password written into `base_url`."""
    if section is None:
        return []
    names = [section.api_key_env, *section.secret_envs]
    values = [os.environ.get(n) for n in names if n]
    try:
        values.append(urlsplit(section.base_url.strip()).password)
    except ValueError:
        pass
    return [v for v in values if v]


class Request(BaseModel):
    """One prompt for one item in one role, with the hash that keys its cached answer."""

    model_config = ConfigDict(frozen=True)

    item: Item
    role: str
    template: str
    messages: list[dict[str, str]]
    context: dict[str, str] = {}
    request_hash: str


class Generation(BaseModel):
    """What a backend returns for one request."""

    text: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    error: str | None = None
    cost_usd: float | None = None  # a cost the source already knows (replayed caches); else priced from tokens
    parsed_answer: str | None = None  # the answer the source parsed from `text` (a zeroeval cache), when source_parsed
    source_parsed: bool = False  # the source parsed `text`: parsed_answer is its answer, None = it found none
    extra: dict[str, Any] = {}

    def masked(self, secrets: list[str]) -> Generation:
        """This generation with every secret masked in every text it carries (see mask_secrets)."""
        if not secrets:
            return self
        return self.model_copy(update={
            "text": mask_secrets(self.text, secrets),
            "error": mask_secrets(self.error, secrets),
            "extra": mask_value(self.extra, secrets),
        })


class Answer(BaseModel):
    """One row of the answers table (DESIGN.md data contracts)."""

    solver: str
    item_id: str
    request_hash: str
    role: str
    backend: str
    model: str
    answer_text: str | None
    parsed_answer: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_s: float
    error: str | None
    created_at: datetime
    extra: str | None = None  # JSON


@runtime_checkable
class Backend(Protocol):
    """Turns a batch of requests into generations, one per request, in order."""

    def fingerprint(self) -> dict[str, Any]:
        """Settings that change answers beyond model and decoding (they enter the request hash)."""
        ...

    def generate(self, requests: list[Request]) -> list[Generation]: ...


@runtime_checkable
class StreamingBackend(Backend, Protocol):
    """A backend that reports each generation the moment it is done, so the cache can checkpoint it
    while slower requests of the same call are still in flight (remote endpoints)."""

    def generate_each(
        self, requests: list[Request], on_generation: Callable[[int, Generation], None]
    ) -> list[Generation]:
        """Like `generate`; also calls `on_generation(index, generation)` as each one completes."""
        ...


class Solver:
    """A named solver: params (model, prices, decoding) + a backend."""

    def __init__(self, name: str, params: SolverParams, backend: Backend):
        self.name = name
        self.params = params
        self.backend = backend
        self.backend_calls = 0  # requests sent to the backend by this process

    def template(self, role: str, item: Item) -> PromptTemplate:
        return template_for(role, item, self.params.role_prompts.get(role))

    def request(self, item: Item, role: str = "answer", context: dict[str, str] | None = None) -> Request:
        context = dict(context or {})
        template = self.template(role, item)
        messages = template.render(item, context)
        key = {
            "backend": self.params.backend,
            "model": self.params.model,
            "backend_settings": self.backend.fingerprint(),
            "template": template.name,
            "template_version": template.version,
            "messages": messages,
            "decoding": self.params.decoding.model_dump(),
            "role": role,
        }
        return Request(
            item=item, role=role, template=template.name, messages=messages, context=context,
            request_hash=stable_hash(key),
        )

    def solve(
        self, items: list[Item], role: str = "answer", contexts: list[dict[str, str]] | None = None
    ) -> list[Answer]:
        contexts = contexts or [{}] * len(items)
        return self.solve_requests([self.request(i, role, c) for i, c in zip(items, contexts, strict=True)])

    @property
    def streams(self) -> bool:
        """Whether answers arrive one by one (see StreamingBackend) rather than batch by batch."""
        return isinstance(self.backend, StreamingBackend)

    def solve_requests(
        self, requests: list[Request], on_answer: Callable[[Answer], None] | None = None
    ) -> list[Answer]:
        """Answers in request order; `on_answer` sees each as soon as it exists (at once for a
        streaming backend, else when the whole batch is back)."""
        if not requests:
            return []
        answers, finish = self._finisher(requests, on_answer)
        if on_answer and isinstance(self.backend, StreamingBackend):
            generations = self.backend.generate_each(requests, finish)
        else:
            generations = self.backend.generate(requests)
        return self._finish_all(requests, generations, answers, finish)

    def answers_for(
        self, requests: list[Request], generations: list[Generation], on_answer: Callable[[Answer], None] | None = None
    ) -> list[Answer]:
        """The rows for generations another process's backend made for these requests (a Ray worker): masked,
        parsed and priced here exactly as `solve_requests` does, so an executor changes who calls the backend,
        never what a row holds."""
        answers, finish = self._finisher(requests, on_answer)
        return self._finish_all(requests, generations, answers, finish)

    def _finisher(self, requests: list[Request], on_answer: Callable[[Answer], None] | None):
        """The answer slots and the callback that masks, parses and prices generation i into slot i."""
        secrets = configured_secrets(self.params.openai_compat)
        answers: list[Answer | None] = [None] * len(requests)

        def finish(i: int, gen: Generation) -> None:
            answers[i] = self._answer(requests[i], gen, datetime.now(UTC), secrets)
            if on_answer:
                on_answer(answers[i])

        return answers, finish

    def _finish_all(self, requests, generations, answers, finish) -> list[Answer]:
        if len(generations) != len(requests):
            raise RuntimeError(f"backend of solver {self.name} returned {len(generations)} for {len(requests)} requests")
        self.backend_calls += len(requests)
        for i, gen in enumerate(generations):
            if answers[i] is None:
                finish(i, gen)
        return answers  # type: ignore[return-value]

    def _cost(self, gen: Generation) -> float:
        if gen.error is not None:
            return 0.0
        if gen.cost_usd is not None:
            return gen.cost_usd
        return cost_usd(gen.tokens_in, gen.tokens_out, self.params.price)

    def _answer(self, request: Request, gen: Generation, now: datetime, secrets: list[str]) -> Answer:
        gen = gen.masked(secrets)  # before parsing, so a parsed answer cannot carry a key either
        gen = storable(gen)
        template = self.template(request.role, request.item)
        parsed = None
        if gen.error is None and gen.text is not None:
            parsed = gen.parsed_answer if gen.source_parsed else template.parse(gen.text, request.item)
        return Answer(
            solver=self.name,
            item_id=request.item.item_id,
            request_hash=request.request_hash,
            role=request.role,
            backend=self.params.backend,
            model=self.params.model,
            answer_text=gen.text,
            parsed_answer=parsed,
            tokens_in=gen.tokens_in,
            tokens_out=gen.tokens_out,
            cost_usd=self._cost(gen),
            latency_s=gen.latency_s,
            error=gen.error,
            created_at=now,
            extra=json.dumps(gen.extra, sort_keys=True) if gen.extra else None,
        )


def storable(gen: Generation) -> Generation:
    """`gen` with every text a row stores as UTF-8 can hold it (`clean_text`: a lone surrogate from any
    backend becomes U+FFFD, the row flagged `text_replaced`), so the cache never meets a row it cannot
    write; any other generation is returned as it is."""
    texts = {name: getattr(gen, name) for name in ("text", "error", "parsed_answer")}
    cleaned = {name: clean_text(value) for name, value in texts.items()}
    if all(cleaned[name] is texts[name] for name in texts):
        return gen
    return gen.model_copy(update={**cleaned, "extra": {**gen.extra, "text_replaced": True}})


def batches_of(items: list[Request], size: int) -> Iterator[list[Request]]:
    """`items` in consecutive batches of at most `size` (the executors' unit of work)."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
