"""Served traffic, journalled so `dvc repro` can label and evaluate it later (the `served` dataset).

Every call a policy makes is an answer row in `data/served/answers/<solver>.parquet`, an answer
cache like `solve`'s (`solvers.cache.AnswerCache`: same columns, same (solver, item_id,
request_hash) key and request hash, secrets masked by the solver before the row exists). Beside
them, `data/served/decisions.parquet` holds one row per request: the policy, its routing decision,
who answered, every call's request hash, the cost. Rows are checkpointed as small atomic part files
(at most JOURNAL_FLUSH_S after they exist, by `solvers.cache`'s journal writer) and folded into the
tables when the server stops. One server per project at a time: it holds `data/served/.lock`.

Nothing is lost silently: every row is made storable before it is queued (`storable_answer`,
`storable_decision`: text with lone surrogates replaced, every secret masked, numbers checked), a
batch the table refuses is written row by row with a row that still fails replaced by an error row,
and a write that fails even so (a full disk) keeps its rows queued for the next flush and marks the
journal failed: the server then answers 503 and /health says why, and the count it prints at
shutdown is the count of decision rows on disk.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.wire import clean_text
from delegation_lab.solvers.base import Answer, mask_secrets
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


DECISIONS_JOURNAL = "_decisions"
"""The decisions' journal folder under data/served/.journal/: a solver's name starts with a letter
(config._SOLVER_NAME), so no solver's answer journal can share it (a solver may be named `decisions`)."""
INT64_MAX = 2**63 - 1


def _text(value: str | None, secrets: list[str]) -> str | None:
    return mask_secrets(clean_text(value), secrets)


def _number(value: Any, integer: bool) -> bool:
    """A finite, non-negative number that fits its column."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if integer:
        return isinstance(value, int) and 0 <= value <= INT64_MAX
    return math.isfinite(value) and value >= 0


def storable_answer(answer: Answer, secrets: list[str]) -> Answer:
    """`answer` as its table can hold it and nothing secret: every text cleaned (clean_text) and
    masked with `secrets` (the backend's keys and the server's own); a count or cost that is not a
    finite, non-negative number within int64 makes it an error row naming the field."""
    update: dict[str, Any] = {name: _text(getattr(answer, name), secrets)
                              for name in ("answer_text", "parsed_answer", "error", "extra", "model", "backend")}
    bad = [f"{name}={getattr(answer, name)!r}" for name, integer in
           (("tokens_in", True), ("tokens_out", True), ("cost_usd", False), ("latency_s", False))
           if not _number(getattr(answer, name), integer)]
    if bad:
        update.update(answer_text=None, parsed_answer=None, tokens_in=0, tokens_out=0, cost_usd=0.0,
                      latency_s=answer.latency_s if _number(answer.latency_s, False) else 0.0,
                      error=f"not journalled as returned: {', '.join(bad)[:200]}")
    return answer.model_copy(update=update)


def storable_decision(row: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    """A decision row as DECISIONS_SCHEMA can hold it: texts cleaned and masked, lists of texts too,
    numbers that are not finite and non-negative set to null and named in `error`."""
    out = dict(row)
    for name, dtype in DECISIONS_SCHEMA.items():
        value = row.get(name)
        if dtype == pl.String and isinstance(value, str):
            out[name] = _text(value, secrets)
        elif isinstance(dtype, pl.List) and isinstance(value, list):
            out[name] = [_text(str(v), secrets) for v in value]
        elif name in ("cost_usd", "tokens_in", "tokens_out", "latency_s") and value is not None \
                and not _number(value, name.startswith("tokens")):
            out[name] = None
            out["error"] = "; ".join(filter(None, [out.get("error"), f"{name} not journalled ({value!r})"]))
    return out


def _decision_error_row(row: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """What is left of a decision row the table refused: its key, when, the model and the status."""
    keep = {k: row.get(k) for k in ("request_id", "created_at", "status")}
    return {**{k: None for k in DECISIONS_SCHEMA}, **keep, "model": _text(str(row.get("model")), []),
            "error": f"not journalled as recorded: {type(error).__name__}: {clean_text(str(error))[:200]}"}


def _answer_error_row(answer: Answer, error: BaseException) -> Answer:
    return answer.model_copy(update={
        "answer_text": None, "parsed_answer": None, "extra": None, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0,
        "error": f"not journalled as returned: {type(error).__name__}: {clean_text(str(error))[:200]}"})


class SafeWriter(_JournalWriter):
    """A journal writer that never dies on a value and never drops a row: a refused batch is written
    row by row, a refused row as `error_row(row, exception)`; a write that still fails keeps the rows
    queued (retried at the next flush) and sets `failure`. `written` counts the rows on disk."""

    def __init__(self, cache: Any, rows: int, interval_s: float, error_row: Callable[[Any, BaseException], Any],
                 what: str):
        self.error_row, self.what = error_row, what
        self.written = 0
        self.failure: str | None = None
        super().__init__(cache, rows, interval_s)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        try:
            self.cache.append(self._pending)
            self.written += len(self._pending)
            self._pending = []
            return
        except Exception:  # noqa: BLE001 - one bad row must not cost the batch: write them one by one
            pass
        while self._pending:
            row = self._pending[0]
            try:
                try:
                    self.cache.append([row])
                except Exception as e:  # noqa: BLE001 - this row cannot be stored as it is
                    self.cache.append([self.error_row(row, e)])
            except Exception as e:  # noqa: BLE001 - nothing can be stored: keep the rows, say so
                self._fail(e)
                return
            self._pending.pop(0)
            self.written += 1

    def _fail(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = f"the {self.what} journal cannot be written ({type(error).__name__}: {error})"[:500]
            print(f"dlab serve: {self.failure}; answering 503 until restarted, rows kept in memory",
                  file=sys.stderr, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.flush()
            except BaseException as e:  # noqa: BLE001 - the thread stays alive whatever happens
                self._fail(e)


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
    return DecisionTable(layout.served_decisions, layout.served_journal(DECISIONS_JOURNAL)).read()


def _cache(layout: Layout, solver: str) -> AnswerCache:
    return AnswerCache(layout.served_answers(solver), layout.served_journal(solver))


class ServedJournal:
    """Checkpoints answers per solver and decisions as they happen; `close()` flushes and compacts."""

    def __init__(self, layout: Layout, solvers: list[str], rows: int = 256, interval_s: float = JOURNAL_FLUSH_S,
                 secrets: list[str] | None = None):
        self.layout = layout
        self.secrets = list(secrets or [])
        self.caches = {s: _cache(layout, s) for s in solvers}
        self.answers = {s: SafeWriter(c, rows, interval_s, _answer_error_row, f"{s!r} answers")
                        for s, c in self.caches.items()}
        self.table = DecisionTable(layout.served_decisions, layout.served_journal(DECISIONS_JOURNAL))
        self.decisions = SafeWriter(self.table, rows, interval_s, _decision_error_row, "decisions")
        self.recorded = 0
        self.closed = False
        self._close_failure: str | None = None
        self._lock = threading.Lock()

    @property
    def rows(self) -> int:
        """Decision rows on disk (journal parts or the compacted table), one per request journalled."""
        return self.decisions.written

    @property
    def pending(self) -> int:
        """Decision rows recorded and not (yet) on disk."""
        return self.decisions.pending

    @property
    def failure(self) -> str | None:
        """Why the journal cannot be trusted any more (None: every write so far succeeded)."""
        for writer in [self.decisions, *self.answers.values()]:
            if writer.failure:
                return writer.failure
        return self._close_failure

    def record(self, calls: list[Answer], decision: dict[str, Any]) -> None:
        with self._lock:  # rows are made storable here, in the request's thread: a bad value never reaches a writer
            for answer in calls:
                self.answers[answer.solver].add([storable_answer(answer, self.secrets)])
            self.decisions.add([storable_decision(decision, self.secrets)])
            self.recorded += 1

    def close(self) -> None:
        """Flush everything pending and fold the parts into the tables (once). A table that cannot be
        compacted keeps its parts (read as part of it) and sets `failure`."""
        if self.closed:
            return
        self.closed = True
        for writer in [*self.answers.values(), self.decisions]:
            writer.close()
        compactions = [(f"{name!r} answers", cache) for name, cache in self.caches.items() if cache.journal.exists()]
        for what, table in [*compactions, ("decisions", self.table)]:
            try:
                table.compact()
            except Exception as e:  # noqa: BLE001 - the parts stay and are read: nothing is lost
                self._close_failure = self._close_failure or f"the {what} journal was not compacted ({type(e).__name__}: {e})"


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
