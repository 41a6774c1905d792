"""The answer cache: one Parquet file per solver, keyed by (solver, item_id, request_hash).

Resumable by construction: answers are checkpointed into a journal of small atomic part files;
`compact()` folds the journal into the main file atomically and only then removes the parts. A
batch backend's answers are checkpointed batch by batch; a streaming one's (remote endpoints) as
they complete — every `batch_size` answers and at least every JOURNAL_FLUSH_S seconds — and all
its requests share one call, so a stuck item holds up neither the journal nor the items after it.
A run killed at any moment loses at most what was answered in the last JOURNAL_FLUSH_S seconds
(or the batch in flight), and a rerun sends only what is missing (or, with retry_errors, what
failed) to the backend.

One `fill` at a time per cache: it holds `<journal>.lock` (an OS file lock, released when the
process dies; see file_lock.py), so a second process waits, then finds the first one's answers
cached, instead of paying for the same items again.
"""

from __future__ import annotations

import io
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from tqdm import tqdm

from delegation_lab.errors import InputError
from delegation_lab.pipeline.schemas import ANSWERS_SCHEMA
from delegation_lab.solvers.base import Answer, Request, Solver
from delegation_lab.solvers.executor import Executor, LocalExecutor
from delegation_lab.solvers.file_lock import LockHeld, exclusive_lock
from delegation_lab.pipeline.tables import conform, write_parquet_atomic

KEY = ["solver", "item_id", "request_hash"]
JOURNAL_FLUSH_S = 0.5
"""Longest time a completed answer of a streaming backend waits in memory before it is on disk."""


def answers_frame(answers: list[Answer]) -> pl.DataFrame:
    if not answers:
        return pl.DataFrame(schema=ANSWERS_SCHEMA)
    return conform(pl.DataFrame([a.model_dump() for a in answers], schema=ANSWERS_SCHEMA), ANSWERS_SCHEMA, "answers")


def unstorable_row(answer: Answer, error: Exception) -> Answer:
    """The error row kept for an answer whose values a table cannot hold: its key, backend and model,
    no text or counts, and why (so `--retry-errors` asks again)."""
    why = " ".join(f"{type(error).__name__}: {error}".split())[:200].encode("utf-8", "replace").decode()
    return Answer.model_construct(**{
        **{k: getattr(answer, k) for k in ("solver", "item_id", "request_hash", "role", "backend", "model")},
        "answer_text": None, "parsed_answer": None, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "latency_s": 0.0,
        "error": f"answer could not be stored: {why}", "created_at": answer.created_at, "extra": None})


def _storable_frame(answer: Answer) -> pl.DataFrame:
    try:
        frame = answers_frame([answer])
        frame.write_parquet(io.BytesIO())  # every value encodes
        return frame
    except Exception as e:  # noqa: BLE001 - this row, whatever it holds, becomes an error row
        return answers_frame([unstorable_row(answer, e)])


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
    answered: int = 0  # requests whose cached answer (old or new) is a success, after the run
    error_rows: int = 0  # requests whose cached answer is an error row, after the run
    executor: str = "local"
    workers: int = 1
    batches: int = 0  # backend tasks finished (one per batch; one for a streaming backend's whole run)
    retries: int = 0  # tasks sent again because their worker died


class CacheLocked(InputError):
    """Another process is filling the same cache."""


class _JournalWriter:
    """Buffers completed answers; writes them as one journal part at `rows` answers, on `flush()`,
    and from a background thread every `interval_s` so none waits long behind a stuck request."""

    def __init__(self, cache: AnswerCache, rows: int, interval_s: float):
        self.cache, self.rows, self.interval_s = cache, rows, interval_s
        self._pending: list[Answer] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="answer-journal", daemon=True)
        self._thread.start()

    def add(self, answers: list[Answer]) -> None:
        with self._lock:
            self._pending += answers
            if len(self._pending) >= self.rows:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._pending:
            self.cache.append_storable(self._pending)
            self._pending = []

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.flush()


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

    def append_storable(self, answers: list[Answer]) -> None:
        """`append`, and when the part cannot be made from these rows (a value its columns cannot hold),
        each row on its own: a row that still cannot be written is kept as an error row naming why
        (`unstorable_row`), so one bad value never costs the answers paid for beside it. A failure to
        write at all (disk full) propagates with the rows still pending."""
        try:
            frame = answers_frame(answers)
        except Exception:  # noqa: BLE001 - any value the schema refuses: sort it out row by row
            frame = pl.concat([_storable_frame(a) for a in answers], how="vertical_relaxed")
        if frame.height:
            self.journal.mkdir(parents=True, exist_ok=True)
            write_parquet_atomic(frame, self.journal / f"part-{time.time_ns():020d}.parquet")

    def compact(self) -> pl.DataFrame:
        df = self.read()
        write_parquet_atomic(df, self.path)
        shutil.rmtree(self.journal, ignore_errors=True)
        return df

    @property
    def lock_path(self) -> Path:
        return self.journal.with_name(self.journal.name + ".lock")

    @contextmanager
    def locked(self, wait_s: float | None = None) -> Iterator[None]:
        """Hold the cache's file lock; wait for another holder up to `wait_s` (None: as long as it
        takes), saying so once on stderr; CacheLocked naming the lock file when the wait runs out."""
        def say_waiting() -> None:
            print(f"waiting for {self.lock_path}: another process is filling this answer cache", file=sys.stderr,
                  flush=True)

        try:
            with exclusive_lock(self.lock_path, wait_s, on_wait=say_waiting):
                yield
        except LockHeld:
            waited = "is held" if not wait_s else f"still held after {wait_s:g} s"
            raise CacheLocked(f"{self.lock_path} {waited}: another process is filling this answer cache") from None

    def fill(
        self,
        solver: Solver,
        requests: list[Request],
        retry_errors: bool = False,
        batch_size: int = 256,
        progress: bool = True,
        on_batch: Callable[[list[Answer]], None] | None = None,
        lock_wait_s: float | None = None,
        executor: Executor | None = None,
    ) -> CacheRun:
        """Answer every request not yet cached (and failed ones if retry_errors), under the cache's lock;
        `executor` says who calls the backend (default: this process)."""
        start = time.perf_counter()
        executor = executor or LocalExecutor()
        with self.locked(lock_wait_s):
            run = self._fill(solver, requests, retry_errors, batch_size, progress, on_batch, executor)
        run.seconds = time.perf_counter() - start
        return run

    def _fill(
        self,
        solver: Solver,
        requests: list[Request],
        retry_errors: bool,
        batch_size: int,
        progress: bool,
        on_batch: Callable[[list[Answer]], None] | None,
        executor: Executor,
    ) -> CacheRun:
        run = CacheRun(requested=len(requests), executor=executor.kind, workers=executor.workers)
        have = self.read().select(["item_id", "request_hash", "error"])
        done = {
            (r["item_id"], r["request_hash"])
            for r in have.iter_rows(named=True)
            if r["error"] is None or not retry_errors
        }
        todo = [r for r in requests if (r.item.item_id, r.request_hash) not in done]
        run.cached = len(requests) - len(todo)
        bar = tqdm(total=len(todo), desc=f"solve {solver.name}", unit="item", disable=not progress, dynamic_ncols=True)
        spent = [0.0, 0]  # running cost and errors, for the progress bar

        def completed(answer: Answer) -> None:
            spent[0] += answer.cost_usd
            spent[1] += answer.error is not None
            bar.update(1)
            fields = {"spent": f"${spent[0]:.4f}", "errors": spent[1]}
            if executor.kind != "local":
                fields.update(workers=executor.workers, batches=executor.batches, retries=executor.retries)
            bar.set_postfix(fields, refresh=False)

        journal = _JournalWriter(self, rows=batch_size, interval_s=JOURNAL_FLUSH_S)
        seen: set[tuple[str, str]] = set()  # keys answered in this run: a retried batch never writes a row twice

        def streamed(answer: Answer) -> None:
            key = (answer.item_id, answer.request_hash)
            if key in seen:
                return
            seen.add(key)
            journal.add([answer])
            completed(answer)

        try:
            for answers in executor.run(solver, todo, batch_size, streamed):
                journal.flush()
                run.backend_calls += len(answers)
                run.errors += sum(a.error is not None for a in answers)
                run.cost_usd += sum(a.cost_usd for a in answers)
                run.error_examples += [a.error for a in answers if a.error][: max(0, 5 - len(run.error_examples))]
                run.batches, run.retries = executor.batches, executor.retries
                if on_batch:
                    on_batch(answers)
        finally:
            journal.close()
            bar.close()
        current = current_answers(self.compact(), requests)
        run.error_rows = current["error"].is_not_null().sum()
        run.answered = current.height - run.error_rows
        return run


def current_answers(cache_df: pl.DataFrame, requests: list[Request]) -> pl.DataFrame:
    """The cached rows that answer exactly these requests (stale prompts / settings excluded)."""
    keys = pl.DataFrame(
        {"item_id": [r.item.item_id for r in requests], "request_hash": [r.request_hash for r in requests]},
        schema={"item_id": pl.String, "request_hash": pl.String},
    )
    return cache_df.join(keys, on=["item_id", "request_hash"], how="inner")
