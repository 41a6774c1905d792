"""Who calls a solver's backend while `AnswerCache.fill` journals the answers: this process
(`LocalExecutor`) or an actor pool on a Ray cluster (`ray_executor.RayExecutor`).

An executor only produces answers; the cache alone writes them. Contract of `run`: every request
of `todo` is answered exactly once, `on_answer` sees each answer as soon as this process has it,
and each finished batch's answers are then yielded (the cache flushes its journal there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from delegation_lab.solvers.base import Answer, Request, Solver, batches_of
from delegation_lab.solvers.params import SolverParams


class Executor(Protocol):
    kind: str
    workers: int
    batches: int  # tasks finished so far
    retries: int  # tasks sent again because their worker died

    def run(
        self, solver: Solver, todo: list[Request], batch_size: int, on_answer: Callable[[Answer], None]
    ) -> Iterator[list[Answer]]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """The backend in this process. A streaming backend (remote endpoints) gets everything at once: its
    own concurrency bound paces it, and no batch waits for the slowest item of the one before."""

    kind = "local"
    workers = 1

    def __init__(self) -> None:
        self.batches = 0
        self.retries = 0

    def run(
        self, solver: Solver, todo: list[Request], batch_size: int, on_answer: Callable[[Answer], None]
    ) -> Iterator[list[Answer]]:
        for batch in [todo] if solver.streams else batches_of(todo, batch_size):
            answers = solver.solve_requests(batch, on_answer=on_answer)
            self.batches += 1
            yield answers

    def close(self) -> None:
        pass


def build_executor(name: str, params: SolverParams) -> Executor:
    """The executor of `solvers.<name>.executor`; a Ray one is connected and its actors have built their
    backends (or a clear InputError names the key or the address) before any request is sent."""
    if params.executor.kind == "local":
        return LocalExecutor()
    from delegation_lab.solvers.ray_executor import RayExecutor

    executor = RayExecutor(name, params.executor)
    try:
        executor.start(params)
    except BaseException:
        executor.close()
        raise
    return executor
