"""Served traffic, journalled so `dvc repro` can label and evaluate it later (the `served` dataset).

Every call a policy makes is an answer row in `data/served/answers/<solver>.parquet`, an answer
cache like `solve`'s (`solvers.cache.AnswerCache`: same columns, same (solver, item_id,
request_hash) key and request hash, secrets masked by the solver before the row exists). Beside
them, `data/served/decisions.parquet` holds one row per request: the policy, its routing decision,
who answered, every call's request hash, the cost. Rows are checkpointed as small atomic part files
(at most JOURNAL_FLUSH_S after they exist, by `solvers.cache`'s journal writer) and folded into the
tables when the server stops. One server per project at a time: it holds `data/served/.lock`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.solvers.base import Answer
from delegation_lab.solvers.cache import JOURNAL_FLUSH_S, AnswerCache, _JournalWriter
from delegation_lab.solvers.file_lock import LockHeld, exclusive_lock
from delegation_lab.pipeline.tables import conform, write_parquet_atomic

DECISIONS_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String,
    "created_at": pl.Datetime("us", "UTC"),
    "model": pl.String,  # the policy's name, as the client sent it
    "policy": pl.String,  # solver | router | cascade
    "item_id": pl.String,
    "question": pl.String,  # the last user turn (masked)
    "gold": pl.String,  # the client's metadata.gold, when it sent one
    "answered_by": pl.String,
    "called": pl.List(pl.String),
    "request_hashes": pl.List(pl.String),  # of each call, in `called` order: the keys into the answer caches
    "cost_usd": pl.Float64,
    "tokens_in": pl.Int64,
    "tokens_out": pl.Int64,
    "latency_s": pl.Float64,
    "status": pl.Int64,  # the HTTP status the client got
    "error": pl.String,
    "decision": pl.String,  # JSON: router scores and operating point, cascade steps and verdicts
}


class DecisionTable:
    """The decisions table: a main file and journal parts, read as one."""

    def __init__(self, path: Path, journal: Path):
        self.path, self.journal = path, journal

    def _parts(self) -> list[Path]:
        return sorted(self.journal.glob("part-*.parquet")) if self.journal.exists() else []

    def append(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self.journal.mkdir(parents=True, exist_ok=True)
            frame = conform(pl.DataFrame(rows, schema=DECISIONS_SCHEMA), DECISIONS_SCHEMA, "served decisions")
            write_parquet_atomic(frame, self.journal / f"part-{time.time_ns():020d}.parquet")

    def read(self) -> pl.DataFrame:
        files = ([self.path] if self.path.exists() else []) + self._parts()
        if not files:
            return pl.DataFrame(schema=DECISIONS_SCHEMA)
        frame = pl.concat([conform(pl.read_parquet(f), DECISIONS_SCHEMA, str(f)) for f in files], how="vertical_relaxed")
        return frame.unique("request_id", keep="last", maintain_order=True).sort("created_at", "request_id")

    def compact(self) -> pl.DataFrame:
        frame = self.read()
        write_parquet_atomic(frame, self.path)
        for part in self._parts():
            part.unlink()
        return frame


def read_served_answers(layout: Layout, solver: str) -> pl.DataFrame:
    return _cache(layout, solver).read()


def read_decisions(layout: Layout) -> pl.DataFrame:
    return DecisionTable(layout.served_decisions, layout.served_journal("decisions")).read()


def _cache(layout: Layout, solver: str) -> AnswerCache:
    return AnswerCache(layout.served_answers(solver), layout.served_journal(solver))


class ServedJournal:
    """Checkpoints answers per solver and decisions as they happen; `close()` flushes and compacts."""

    def __init__(self, layout: Layout, solvers: list[str], rows: int = 256, interval_s: float = JOURNAL_FLUSH_S):
        self.layout = layout
        self.caches = {s: _cache(layout, s) for s in solvers}
        self.answers = {s: _JournalWriter(c, rows, interval_s) for s, c in self.caches.items()}
        self.table = DecisionTable(layout.served_decisions, layout.served_journal("decisions"))
        self.decisions = _JournalWriter(self.table, rows, interval_s)  # type: ignore[arg-type]  # same append()
        self.rows = 0
        self.closed = False

    def record(self, calls: list[Answer], decision: dict[str, Any]) -> None:
        for answer in calls:
            self.answers[answer.solver].add([answer])
        self.decisions.add([decision])
        self.rows += 1

    def close(self) -> None:
        """Flush everything pending and fold the parts into the tables (once)."""
        if self.closed:
            return
        self.closed = True
        for writer in [*self.answers.values(), self.decisions]:
            writer.close()
        for cache in self.caches.values():
            if cache.journal.exists():
                cache.compact()
        self.table.compact()


@contextmanager
def served_lock(layout: Layout) -> Iterator[None]:
    """One server per project: a second one would compact away the first one's parts."""
    lock = layout.served_dir / ".lock"
    with ExitStack() as stack:
        try:
            stack.enter_context(exclusive_lock(lock, 0))
        except LockHeld:
            raise InputError(f"{lock} is held: another `dlab serve` journals into {layout.served_dir}") from None
        yield


def adopt_served_answers(cache: AnswerCache, layout: Layout, solver: str, request_hashes: set[tuple[str, str]]) -> int:
    """Copy into `cache` the answers the server got for these (item_id, request_hash) keys that the
    cache lacks (successes only: a served error is asked again), so `solve` on the `served` dataset
    pays for nothing the server paid for. Returns how many rows were adopted."""
    from delegation_lab.solvers.base import Answer

    served = _cache(layout, solver).read().filter(pl.col("error").is_null())
    if served.is_empty():
        return 0
    have = {(r["item_id"], r["request_hash"]) for r in cache.read().select("item_id", "request_hash").iter_rows(named=True)}
    rows = [Answer(**r) for r in served.iter_rows(named=True)
            if (r["item_id"], r["request_hash"]) in request_hashes and (r["item_id"], r["request_hash"]) not in have]
    cache.append(rows)
    return len(rows)
