"""`dlab query`: one checked read statement over sealed DuckDB views, with a time and a row limit.

Two independent guards:
- the statement: DuckDB's own parser must find exactly one SELECT (WITH, VALUES, DESCRIBE, ...),
  or an EXPLAIN / EXPLAIN ANALYZE whose inner statement is itself one SELECT;
- the connection: the views are pyarrow datasets over the Parquet files listed when it opens (each
  file's real path must lie under the project's data/, results/ or DVC cache, so copies, hard links
  and symlinks into the cache all work), and DuckDB runs with external access off and its
  configuration locked. DuckDB itself then cannot open any file, to read or to write, whatever
  statement reaches it (its own spill files aside, see below).

And bounds on what one query may take: DuckDB's `memory_limit` (by default the smaller of 1 GiB
and a quarter of the machine's memory) with a private spill folder under the system's temporary
directory (never one of the data folders; at most `MAX_SPILL` of disk, removed when the query
ends), and the rows leave as Arrow record batches that `query_output` writes as they come. No
single value may pass MAX_CELL_BYTES (checked by DuckDB on each text or blob column, and on every
batch). DuckDB's memory limit does not cover every vector it builds (one `repeat('x', 1500000000)`
took 3 GB before the cell check could see it), so the statement runs in a forked child process
whose private memory is capped at the memory limit plus headroom (`query.process`): past the cap
the child fails or dies, and the parent says which bound it passed.
"""

from __future__ import annotations

import configparser
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from delegation_lab.errors import InputError
from delegation_lab.games.limits import fmt_bytes, parse_size
from delegation_lab.pipeline.layout import Layout
from delegation_lab.query.output import cell_text, limited
from delegation_lab.query.process import forked_rows
from delegation_lab.pipeline.views import empty_view, has_columns, view_layout

# `[comments] EXPLAIN [ANALYZE] [(options)] <inner>`; anything this does not match is refused
EXPLAIN_PREFIX = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*EXPLAIN\s+(?P<analyze>ANALY[SZ]E\s+)?(?:\([^()]*\)\s*)?(?P<inner>.*)$",
    re.S | re.I,
)
SEALED_CONFIG = {
    "enable_external_access": False,  # no file, extension or network access from any statement
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "python_enable_replacements": False,  # no Python variable stands in for a table
}
MAX_MEMORY_LIMIT = 1024**3  # DuckDB's memory per query: at most 1 GiB ...
MEMORY_SHARE = 4  # ... and at most a quarter of the machine
MAX_SPILL = "4GiB"  # disk a query may spill to once its memory is full
BATCH_ROWS = 1024
MAX_CELL_BYTES = 16 * 1024**2  # the largest single text or blob value a query may return
PROCESS_HEADROOM = 512 * 1024**2  # a query's process beyond DuckDB's memory limit: Arrow batches, vectors outside it
THREAD_HEADROOM = 16 * 1024**2  # and per DuckDB thread (one per core): its stack and its allocator's arena
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # --timeout at most a week (threading's timers overflow far above it)
CELL_CAP_MARK = "dlab-cell-cap:"
MEMORY_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*$", re.I)
HIVE_PARTITIONS = pa.schema([("study", pa.string()), ("method", pa.string()), ("seed", pa.int64())])


class QueryRefused(InputError):
    """A statement that is not a plain read, or a query stopped by a limit."""


@dataclass(frozen=True)
class QueryResult:
    frame: pl.DataFrame
    truncated: bool  # the query had more rows than max_rows


# ------------------------------------------------------------------------------------ statement


def check_statement(sql: str) -> None:
    """Refuse anything but one SELECT, or EXPLAIN [ANALYZE] of one SELECT."""
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as e:  # a shell argument with bytes that are not UTF-8 arrives as surrogates
        raise QueryRefused(f"the query is not valid UTF-8 (a byte that is not UTF-8 at character {e.start + 1}); "
                           "write it in UTF-8") from None
    statements = _parse(sql)
    if len(statements) != 1:
        raise QueryRefused(f"give exactly one statement (got {len(statements)})")
    statement = statements[0]
    if statement.type == duckdb.StatementType.SELECT:
        return
    if statement.type != duckdb.StatementType.EXPLAIN:
        raise QueryRefused(
            f"only read queries (SELECT, WITH ... SELECT, EXPLAIN SELECT) are allowed here, not {statement.type.name}"
        )
    match = EXPLAIN_PREFIX.match(statement.query)
    inner = _parse(match.group("inner")) if match else []
    what = "EXPLAIN ANALYZE" if match and match.group("analyze") else "EXPLAIN"
    if len(inner) != 1 or inner[0].type != duckdb.StatementType.SELECT:
        found = inner[0].type.name if len(inner) == 1 else f"{len(inner)} statements"
        raise QueryRefused(f"only read queries are allowed here: {what} of a single SELECT, not of {found}")


def _parse(sql: str) -> list[Any]:
    try:
        return duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryRefused(f"cannot parse the query: {e}") from None


# ----------------------------------------------------------------------------------- connection


def readable_roots(root: Path) -> list[Path]:
    """Where a view's file may really live: data/, results/, and the DVC cache (.dvc/cache, or the
    `cache.dir` of .dvc/config / .dvc/config.local)."""
    layout = Layout(root)
    roots = [layout.data_dir, layout.results_dir, layout.dvc_dir / "cache"]
    for name in ("config", "config.local"):
        config = configparser.ConfigParser(interpolation=None)
        try:
            config.read(layout.dvc_dir / name)
        except configparser.Error:
            continue
        cache_dir = config.get("cache", "dir", fallback=None)
        if cache_dir:
            roots.append(layout.dvc_dir / Path(cache_dir).expanduser())
    return [r.resolve() for r in roots]


def _checked_files(folder: Path, pattern: str, roots: list[Path]) -> list[Path]:
    files = sorted(folder.glob(pattern)) if folder.is_dir() else []
    for path in files:
        real = path.resolve()
        if not any(real.is_relative_to(r) for r in roots):
            raise QueryRefused(
                f"{path}: resolves to {real}, outside the project's data/, results/ and DVC cache; not reading it"
            )
    return files


def _dataset(files: list[Path], hive_base: Path | None) -> ds.Dataset:
    schemas = []
    for path in files:
        try:
            schemas.append(pq.read_schema(path))
        except (OSError, pa.ArrowException) as e:
            raise QueryRefused(f"{path}: not a readable Parquet file ({e})") from None
    try:
        schema = pa.unify_schemas(schemas, promote_options="permissive")
    except pa.ArrowException as e:
        raise QueryRefused(f"{files[0].parent}: the files' columns do not agree ({e})") from None
    if hive_base is None:
        return ds.dataset([str(f) for f in files], schema=schema, format="parquet")
    for field in HIVE_PARTITIONS:
        if field.name not in schema.names:
            schema = schema.append(field)
    partitioning = ds.partitioning(HIVE_PARTITIONS, flavor="hive")
    return ds.dataset(
        [str(f) for f in files], schema=schema, format="parquet", partitioning=partitioning,
        partition_base_dir=str(hive_base),
    )


def machine_memory() -> int:
    """Bytes of memory this process may use: physical memory, or the container's cgroup (v2) limit
    when that is smaller."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system
        physical = MAX_MEMORY_LIMIT * MEMORY_SHARE
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return physical
    return min(physical, int(limit)) if limit.isdigit() else physical


def default_memory_limit() -> str:
    """The smaller of MAX_MEMORY_LIMIT and a MEMORY_SHARE-th of the machine's memory."""
    return f"{min(MAX_MEMORY_LIMIT, machine_memory() // MEMORY_SHARE) // 1024**2}MiB"


def checked_memory_limit(memory_limit: str | None) -> str | None:
    """`memory_limit` if it is a positive size DuckDB reads (512MiB, 2GB, 1.5 GiB); QueryRefused naming
    it otherwise (DuckDB itself reads `-1` or `-5GB` as "no limit", which is never meant here)."""
    if memory_limit is None:
        return None
    found = MEMORY_SIZE.match(memory_limit)
    if not found or float(found.group(1)) <= 0:
        raise QueryRefused(f"--memory-limit {memory_limit[:40]!r}: give a positive size with a unit, e.g. 512MiB or 2GB")
    return memory_limit


def process_bound(memory_limit: str) -> int:
    """Bytes of private memory a query's process may take beyond what it held when it started:
    DuckDB's `memory_limit` plus PROCESS_HEADROOM and THREAD_HEADROOM per core."""
    return parse_size(memory_limit) + PROCESS_HEADROOM + THREAD_HEADROOM * (os.cpu_count() or 1)


def checked_timeout(timeout_s: float | None) -> float | None:
    """`timeout_s` (None / 0: no limit) if it is a finite number of seconds up to MAX_TIMEOUT_S."""
    if timeout_s is None or timeout_s == 0:
        return timeout_s
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= MAX_TIMEOUT_S):
        raise QueryRefused(f"--timeout {timeout_s!r}: give seconds between 0 (no limit) and {MAX_TIMEOUT_S:g}")
    return timeout_s


def connect_sealed(layout: Layout, memory_limit: str | None = None, spill: Path | None = None) -> duckdb.DuckDBPyConnection:
    """The views of `store.connect`, but read through pyarrow by a DuckDB that can open no file;
    it works within `memory_limit` (default `default_memory_limit()`) and spills to `spill` (a
    private empty folder; None: no spilling, a query past the memory limit fails)."""
    root = layout.root.resolve()
    roots = readable_roots(root)
    config = {**SEALED_CONFIG, "memory_limit": memory_limit or default_memory_limit(),
              "temp_directory": str(spill) if spill else "", "max_temp_directory_size": MAX_SPILL}
    try:
        con = duckdb.connect(":memory:", config=config)
    except duckdb.Error as e:
        raise QueryRefused(f"--memory-limit {memory_limit!r}: {str(e).strip().splitlines()[0]}") from None
    try:
        for name, (folder, pattern, schema, hive) in view_layout(root).items():
            files = [f for f in _checked_files(folder, pattern, roots) if has_columns(f)]  # not a skipped column-less table
            if files:
                con.register(name, _dataset(files, folder if hive else None))
            else:
                empty_view(con, name, schema)
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


# ---------------------------------------------------------------------------------------- query


class QueryStream:
    """The record batches of one running statement; whatever stops it mid-stream (the --timeout
    timer, DuckDB's memory limit, a bad cast) surfaces as one QueryRefused line, never a traceback."""

    def __init__(self, con: duckdb.DuckDBPyConnection, sql: str, timeout_s: float | None, memory_limit: str,
                 batch_rows: int = BATCH_ROWS):
        self.con, self.timeout_s, self.memory_limit = con, timeout_s, memory_limit
        self.fired = threading.Event()
        self.timer = threading.Timer(timeout_s, self._stop) if timeout_s else None
        if self.timer:
            self.timer.daemon = True
            self.timer.start()
        try:
            relation = con.sql(sql)  # lazy: rows stream in batches, never all at once
            if relation is None:  # not a query with rows
                raise QueryRefused("the statement returns no rows")
            _unique_columns(relation.columns)
            relation = _cell_capped(con, sql, relation)
            stream = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch  # duckdb 2 / 1
            self.reader = stream(batch_rows)
        except (duckdb.Error, pa.ArrowException, OSError) as e:
            raise self.refusal(e) from None

    def _stop(self) -> None:
        self.fired.set()
        self.con.interrupt()

    @property
    def schema(self) -> pa.Schema:
        return self.reader.schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            try:
                batch = self.reader.read_next_batch()
            except StopIteration:
                return
            except (duckdb.Error, pa.ArrowException, OSError) as e:  # DuckDB's errors reach Arrow's reader as OSError
                raise self.refusal(e) from None
            if self.fired.is_set():  # the timer fired and DuckDB went on: stop at this batch
                raise self.refusal(TimeoutError())
            _check_cells(batch)
            yield batch

    def refusal(self, error: BaseException) -> QueryRefused:
        """One line saying which limit stopped the query, or DuckDB's own first line."""
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        if CELL_CAP_MARK in first:
            column = first.split(CELL_CAP_MARK, 1)[1].strip()
            return QueryRefused(f"a value in column {column} is over {MAX_CELL_BYTES // 1024**2} MiB, the most one "
                                "value may hold here; select a part of it (left(col, n)) or its length")
        if self.fired.is_set() or isinstance(error, duckdb.InterruptException):
            return QueryRefused(f"query stopped after {self.timeout_s:g} s (--timeout); narrow it or raise the limit")
        if isinstance(error, duckdb.OutOfMemoryException) or "Out of Memory" in first:
            return QueryRefused(f"query needs more than its memory limit {self.memory_limit} (--memory-limit; its process "
                                f"may grow by {fmt_bytes(process_bound(self.memory_limit))}) even spilling to disk; narrow "
                                f"it (fewer columns, a LIMIT, an aggregate, left(col, n)) or raise the limit ({first})")
        return QueryRefused(f"query failed: {first}")

    def close(self) -> None:
        if self.timer:
            self.timer.cancel()
        self.con.close()


def _unique_columns(names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise QueryRefused(f"the result has two columns named {name!r}; give each a name of its own (AS ...)")
        seen.add(name)


def _cell_capped(con: duckdb.DuckDBPyConnection, sql: str, relation: Any) -> Any:
    """`relation` with each text or blob column checked by DuckDB against MAX_CELL_BYTES, so a huge
    value fails where it is made instead of being copied to Arrow and Python. A statement that cannot
    be wrapped (EXPLAIN, a trailing comment after `;`) is returned as it is: `_check_cells` still
    refuses its big values batch by batch."""
    capped = {i: "strlen" if str(t) == "VARCHAR" else "octet_length" for i, t in enumerate(relation.types)
              if str(t) in ("VARCHAR", "BLOB")}  # both count bytes, without a copy
    if not capped:
        return relation
    columns = []
    for i, name in enumerate(relation.columns):
        quoted = '"' + name.replace('"', '""') + '"'
        if i in capped:
            mark = f"{CELL_CAP_MARK} {name!r}".replace("'", "''")
            columns.append(f"CASE WHEN {capped[i]}({quoted}) > {MAX_CELL_BYTES} THEN error('{mark}') "
                           f"ELSE {quoted} END AS {quoted}")
        else:
            columns.append(quoted)
    body = sql.rstrip().rstrip(";")
    try:
        return con.sql(f"SELECT {', '.join(columns)} FROM (\n{body}\n) AS dlab_capped")
    except duckdb.Error:
        return relation


def _check_cells(batch: pa.RecordBatch) -> None:
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if (pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or pa.types.is_binary(column.type)
                or pa.types.is_large_binary(column.type)) and len(column):
            longest = pc.max(pc.binary_length(column)).as_py()
            if longest is not None and longest > MAX_CELL_BYTES:
                raise QueryRefused(f"a value in column {name!r} is over {MAX_CELL_BYTES // 1024**2} MiB, the most one "
                                   "value may hold here; select a part of it (left(col, n)) or its length")


@contextmanager
def stream_query(layout: Layout, sql: str, timeout_s: float | None = 30.0, memory_limit: str | None = None,
                 batch_rows: int = BATCH_ROWS) -> Iterator[Any]:
    """Run one checked read statement over the sealed views and stream its record batches (an object
    with `.schema`, iterated for the batches); stop it after `timeout_s` seconds (None or 0: no
    limit). DuckDB works within `memory_limit` (default `default_memory_limit()`) and spills the rest
    to a private folder under the system's temporary directory, removed afterwards; the statement
    runs in a child process that may take at most `process_bound(memory_limit)` more memory."""
    check_statement(sql)
    timeout_s = checked_timeout(timeout_s)
    limit = checked_memory_limit(memory_limit) or default_memory_limit()
    with tempfile.TemporaryDirectory(prefix="dlab-query-") as spill:

        @contextmanager
        def open_stream() -> Iterator[QueryStream]:
            con = connect_sealed(layout, limit, Path(spill))
            try:
                stream = QueryStream(con, sql, timeout_s, limit, batch_rows)
            except BaseException:
                con.close()
                raise
            try:
                yield stream
            finally:
                stream.close()

        if not hasattr(os, "fork"):  # no fork on this system: in this process, bounded by DuckDB's limit alone
            with open_stream() as stream:
                yield stream
            return
        bound = process_bound(limit)
        died = (f"it passed its memory bound of {fmt_bytes(bound)} (--memory-limit {limit} plus "
                f"{fmt_bytes(bound - parse_size(limit))} for the process), or crashed; narrow the query (fewer columns, "
                "a LIMIT, left(col, n) of a long value) or raise --memory-limit")
        with forked_rows(open_stream, bound, QueryRefused, died) as rows:
            yield rows


def query_rows(layout: Layout, sql: str, timeout_s: float | None = 30.0, max_rows: int | None = 10_000,
               memory_limit: str | None = None) -> QueryResult:
    """Run one checked read statement; stop it after `timeout_s` seconds, keep at most `max_rows`
    rows (None or 0: no limit) and say whether more were left. The rows are kept in memory, at most
    `memory_limit` of them (QueryRefused past it): for output of any size, write them as they arrive
    with `stream_query` and `query_output`."""
    limit = checked_memory_limit(memory_limit) or default_memory_limit()
    with stream_query(layout, sql, timeout_s, limit) as stream:
        batches, truncated, held = [], False, 0
        for batch in limited(stream, max_rows):
            if batch is None:
                truncated = True
                break
            held += batch.nbytes
            if held > parse_size(limit):
                raise QueryRefused(f"the rows kept in memory passed the memory limit {limit} (--memory-limit); "
                                   "write them as they arrive with --format csv or json, or narrow the query")
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=stream.schema)
    return QueryResult(_to_polars(table), truncated)


def _to_polars(table: pa.Table) -> pl.DataFrame:
    """Polars frame of the result; a column polars cannot hold (INTERVAL, UNION) becomes text."""
    columns = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            columns.append(pl.from_arrow(column).alias(name))
        except Exception:  # noqa: BLE001 - polars raises several kinds for unsupported Arrow types
            columns.append(pl.Series(name, [cell_text(v) for v in column.to_pylist()], dtype=pl.String))
    return pl.DataFrame(columns)


def run_query(layout: Layout, sql: str, timeout_s: float = 30.0) -> pl.DataFrame:
    """Every row of one checked read statement over the sealed views."""
    return query_rows(layout, sql, timeout_s=timeout_s, max_rows=None).frame
