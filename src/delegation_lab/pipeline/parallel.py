"""The one way the studies start worker processes.

Spawned, never forked: a fork would copy torch's intra-op threads and open MLflow/SQLite handles
into the child. With `deterministic` each worker runs `torch_runtime.make_deterministic` before its
first job (deterministic kernels, one intra-op thread), so a job gives the numbers it gives in the
main process and two workers on two cores do not oversubscribe them. Torch is imported only inside
the workers that ask for it: this module stays importable where torch is not needed.
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor


def _deterministic_worker() -> None:
    from .torch_runtime import make_deterministic

    make_deterministic()


def spawn_pool(workers: int, *, deterministic: bool = True) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes (a context manager: leaving it waits for every job)."""
    if workers < 1:
        raise ValueError(f"spawn_pool: workers must be at least 1, got {workers}")
    return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                               initializer=_deterministic_worker if deterministic else None)
