"""The study's independent computations (each a pure function of its arguments: its own seeded
generator travels with it) in `redref.workers` spawned processes, so the two cores of a laptop work
at once. `workers: 1` runs every job in this process at submit time, the old single-process path;
the figures are the same either way (tests/test_redref_jobs.py)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from delegation_lab.pipeline.parallel import spawn_pool


class Jobs:
    """`submit(fn, *args)` -> a Future; a context manager that waits for every job on exit."""

    def __init__(self, workers: int):
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Jobs:
        if self.workers > 1:
            self._pool = spawn_pool(self.workers, deterministic=False)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=exc[0] is not None)
            self._pool = None

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        if self._pool is not None:
            return self._pool.submit(fn, *args, **kwargs)
        done: Future = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - re-raised by .result(), as from a process
            done.set_exception(e)
        return done


def serial() -> Jobs:
    """The single-process path (the default of every function that takes `jobs`)."""
    return Jobs(1)
