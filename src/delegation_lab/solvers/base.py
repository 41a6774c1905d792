"""The solver protocol: `Solver.solve(items, role)` renders prompts, asks a backend in one batch,
parses and prices every answer. Backends only turn requests into generations.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from delegation_lab.config import SolverParams
from delegation_lab.data.items import Item
from delegation_lab.hashing import stable_hash
from delegation_lab.solvers.pricing import cost_usd
from delegation_lab.solvers.prompts import PromptTemplate, template_for


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
    extra: dict[str, Any] = {}


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

    def solve_requests(self, requests: list[Request]) -> list[Answer]:
        if not requests:
            return []
        generations = self.backend.generate(requests)
        if len(generations) != len(requests):
            raise RuntimeError(f"backend of solver {self.name} returned {len(generations)} for {len(requests)} requests")
        self.backend_calls += len(requests)
        now = datetime.now(UTC)
        return [self._answer(r, g, now) for r, g in zip(requests, generations, strict=True)]

    def _cost(self, gen: Generation) -> float:
        if gen.error is not None:
            return 0.0
        if gen.cost_usd is not None:
            return gen.cost_usd
        return cost_usd(gen.tokens_in, gen.tokens_out, self.params.price)

    def _answer(self, request: Request, gen: Generation, now: datetime) -> Answer:
        template = self.template(request.role, request.item)
        parsed = template.parse(gen.text, request.item) if gen.error is None and gen.text is not None else None
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
