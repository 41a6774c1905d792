"""One solver answering one served request, through the backend `solve` uses, so a served answer is
the same row the `solve` stage makes for that solver: the same request hash (the `chat` prompt template over
the client's conversation), masked, parsed and priced by `Solver.answers_for`.

Remote backends (`openai_compat`: their own retries, per-attempt deadline and Retry-After handling
from the solver's params) are awaited on the server's event loop; in-process ones (llama.cpp,
transformers, vLLM, simulated) run on a worker thread, one request at a time per solver, since their
models are not safe to call from several threads.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from delegation_lab.data.items import Item, make_item_id
from delegation_lab.hashing import stable_hash
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.base import Answer, Generation, Request, configured_secrets
from delegation_lab.solvers.params import SolverParams
from delegation_lab.solvers.prompts import SERVED_SOURCE
from delegation_lab.solvers.usage import checked_generation

SERVED_SPLIT = "served"
"""Split of an item while it is being served (the `served` dataset assigns the real ones)."""


def served_item(conversation: list[dict[str, str]], gold: str | None = None) -> Item:
    """The item a conversation is: its last user turn as the question, its id a hash of the whole
    conversation (the same conversation is the same item, whoever sends it)."""
    source_id = stable_hash(conversation)
    return Item(item_id=make_item_id(SERVED_SOURCE, source_id), split=SERVED_SPLIT, question=conversation[-1]["content"],
                gold=gold, source=SERVED_SOURCE, source_id=source_id)


def plain_question(conversation: list[dict[str, str]]) -> bool:
    """One user turn and nothing else: the `chat` template renders it from the item alone."""
    return len(conversation) == 1 and conversation[0]["role"] == "user"


class ServedSolver:
    """A solver of params.yaml as the server calls it."""

    def __init__(self, name: str, params: SolverParams):
        self.name = name
        # the client's conversation is sent as it came: a role_prompts.answer override is not applied
        params = params.model_copy(update={"role_prompts": {k: v for k, v in params.role_prompts.items() if k != "answer"}})
        self.solver = build_solver(name, params)
        self.params = params
        self._lock = threading.Lock()
        self.remote = hasattr(self.solver.backend, "agenerate")
        self._session: tuple[Any, asyncio.Semaphore] | None = None

    @property
    def secrets(self) -> list[str]:
        return configured_secrets(self.params.openai_compat)

    def request(self, item: Item, conversation: list[dict[str, str]]) -> Request:
        """The request `solve` would make for this item: the same hash for a plain question, and a hash
        of the whole conversation otherwise."""
        context = {} if plain_question(conversation) else {"messages": json.dumps(conversation)}
        return self.solver.request(item, "answer", context)

    def session(self) -> tuple[Any, asyncio.Semaphore]:
        """A remote backend's HTTP client and in-flight gate, opened on first use and shared by every
        request: connections are reused, and the solver's `concurrency` bounds what is in flight."""
        if self._session is None:
            self._session = (self.solver.backend.client(), asyncio.Semaphore(self.params.openai_compat.concurrency))
        return self._session

    async def answer(self, request: Request) -> Answer:
        if self.remote:
            client, gate = self.session()
            generations = await self.solver.backend.agenerate([request], client=client, gate=gate)
            return self.finish(request, generations[0])
        return await asyncio.to_thread(self._solve_locked, request)

    def finish(self, request: Request, gen: Generation) -> Answer:
        """The answer row of a generation, its endpoint's words checked first (`checked_generation`)."""
        return self.solver.answers_for([request], [checked_generation(gen, request, self.params.decoding.max_tokens)])[0]

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session[0].aclose()
            self._session = None

    def _solve_locked(self, request: Request) -> Answer:
        with self._lock:
            try:
                gen = self.solver.backend.generate([request])[0]
            except Exception as e:  # an in-process backend's failure is this request's error row
                gen = Generation(text=None, error=f"{type(e).__name__}: {e}")
            return self.finish(request, gen)
