"""The answer cache: one Parquet file per solver, keyed by (solver, item_id, request_hash).

Resumable by construction: answers are checkpointed batch by batch into a journal of small
atomic part files; `compact()` folds the journal into the main file atomically and only then
removes the parts. A run killed at any moment loses at most the batch in flight, and a rerun
sends only what is missing (or, with retry_errors, what failed) to the backend.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from tqdm import tqdm

from delegation_lab.solvers.base import Answer, Request, Solver
from delegation_lab.tables import ANSWERS_SCHEMA, conform, write_parquet_atomic

KEY = ["solver", "item_id", "request_hash"]


def answers_frame(answers: list[Answer]) -> pl.DataFrame:
    if not answers:
        return pl.DataFrame(schema=ANSWERS_SCHEMA)
    return conform(pl.DataFrame([a.model_dump() for a in answers], schema=ANSWERS_SCHEMA), ANSWERS_SCHEMA, "answers")


@dataclass
class CacheRun:
    """What one `fill` did: the numbers behind metrics/solve_runs/<solver>.json."""

    requested: int = 0
    cached: int = 0
    backend_calls: int = 0
    errors: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    error_examples: list[str] = field(default_factory=list)


class AnswerCache:
    def __init__(self, path: Path, journal: Path):
        self.path = path
        self.journal = journal

    def _parts(self) -> list[Path]:
        return sorted(self.journal.glob("part-*.parquet")) if self.journal.exists() else []

    def read(self) -> pl.DataFrame:
        """Main file + journal, one row per key: the newest, preferring a success over an error."""
        frames = [pl.read_parquet(self.path)] if self.path.exists() else []
        frames += [pl.read_parquet(p) for p in self._parts()]
        if not frames:
            return pl.DataFrame(schema=ANSWERS_SCHEMA)
        df = pl.concat([conform(f, ANSWERS_SCHEMA, str(self.path)) for f in frames], how="vertical_relaxed")
        return (
            df.with_columns(pl.col("error").is_null().alias("_ok"))
            .sort(["_ok", "created_at"])
            .unique(subset=KEY, keep="last", maintain_order=True)
            .drop("_ok")
            .sort(KEY)
        )

    def append(self, answers: list[Answer]) -> None:
        if not answers:
            return
        self.journal.mkdir(parents=True, exist_ok=True)
        name = f"part-{time.time_ns():020d}.parquet"
        write_parquet_atomic(answers_frame(answers), self.journal / name)

    def compact(self) -> pl.DataFrame:
        df = self.read()
        write_parquet_atomic(df, self.path)
        shutil.rmtree(self.journal, ignore_errors=True)
        return df

    def fill(
        self,
        solver: Solver,
        requests: list[Request],
        retry_errors: bool = False,
        batch_size: int = 256,
        progress: bool = True,
        on_batch: Callable[[list[Answer]], None] | None = None,
    ) -> CacheRun:
        """Answer every request not yet cached (and failed ones if retry_errors), batch by batch."""
        start = time.perf_counter()
        run = CacheRun(requested=len(requests))
        have = self.read().select(["item_id", "request_hash", "error"])
        done = {
            (r["item_id"], r["request_hash"])
            for r in have.iter_rows(named=True)
            if r["error"] is None or not retry_errors
        }
        todo = [r for r in requests if (r.item.item_id, r.request_hash) not in done]
        run.cached = len(requests) - len(todo)
        bar = tqdm(total=len(todo), desc=f"solve {solver.name}", unit="item", disable=not progress, dynamic_ncols=True)
        for batch in _batches(todo, batch_size):
            answers = solver.solve_requests(batch)
            self.append(answers)
            run.backend_calls += len(batch)
            run.errors += sum(a.error is not None for a in answers)
            run.cost_usd += sum(a.cost_usd for a in answers)
            run.error_examples += [a.error for a in answers if a.error][: max(0, 5 - len(run.error_examples))]
            bar.update(len(batch))
            bar.set_postfix(spent=f"${run.cost_usd:.4f}", errors=run.errors)
            if on_batch:
                on_batch(answers)
        bar.close()
        self.compact()
        run.seconds = time.perf_counter() - start
        return run


def _batches(items: list[Request], size: int) -> Iterator[list[Request]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def current_answers(cache_df: pl.DataFrame, requests: list[Request]) -> pl.DataFrame:
    """The cached rows that answer exactly these requests (stale prompts / settings excluded)."""
    keys = pl.DataFrame(
        {"item_id": [r.item.item_id for r in requests], "request_hash": [r.request_hash for r in requests]},
        schema={"item_id": pl.String, "request_hash": pl.String},
    )
    return cache_df.join(keys, on=["item_id", "request_hash"], how="inner")
