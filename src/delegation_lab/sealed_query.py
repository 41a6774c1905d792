"""`dlab query`: one checked read statement over sealed DuckDB views, with a time and a row limit.

Two independent guards:
- the statement: DuckDB's own parser must find exactly one SELECT (WITH, VALUES, DESCRIBE, ...),
  or an EXPLAIN / EXPLAIN ANALYZE whose inner statement is itself one SELECT;
- the connection: the views are pyarrow datasets over the Parquet files listed when it opens (each
  file's real path must lie under the project's data/, results/ or DVC cache, so copies, hard links
  and symlinks into the cache all work), and DuckDB runs with external access off, no temp
  directory, and its configuration locked. DuckDB itself then cannot open any file, to read or to
  write, whatever statement reaches it.
"""

from __future__ import annotations

import configparser
import csv
import datetime as dt
import decimal
import io
import json
import math
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from delegation_lab.errors import InputError
from delegation_lab.layout import Layout
from delegation_lab.views import empty_view, view_layout

# `[comments] EXPLAIN [ANALYZE] [(options)] <inner>`; anything this does not match is refused
EXPLAIN_PREFIX = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*EXPLAIN\s+(?P<analyze>ANALY[SZ]E\s+)?(?:\([^()]*\)\s*)?(?P<inner>.*)$",
    re.S | re.I,
)
SEALED_CONFIG = {
    "enable_external_access": False,  # no file, extension or network access from any statement
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "temp_directory": "",  # nothing spills to disk
    "python_enable_replacements": False,  # no Python variable stands in for a table
}
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


def connect_sealed(layout: Layout) -> duckdb.DuckDBPyConnection:
    """The views of `store.connect`, but read through pyarrow by a DuckDB that can open no file."""
    root = layout.root.resolve()
    roots = readable_roots(root)
    con = duckdb.connect(":memory:", config=SEALED_CONFIG)
    try:
        for name, (folder, pattern, schema, hive) in view_layout(root).items():
            files = _checked_files(folder, pattern, roots)
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


def query_rows(layout: Layout, sql: str, timeout_s: float | None = 30.0, max_rows: int | None = 10_000) -> QueryResult:
    """Run one checked read statement; stop it after `timeout_s` seconds, keep at most `max_rows`
    rows (None or 0: no limit) and say whether more were left."""
    check_statement(sql)
    con = connect_sealed(layout)
    timer = threading.Timer(timeout_s, con.interrupt) if timeout_s else None
    try:
        if timer:
            timer.daemon = True
            timer.start()
        relation = con.sql(sql)  # lazy: rows stream in batches, never all at once
        stream = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch  # duckdb 2 / 1
        reader = stream(1024)
        batches, rows, truncated = [], 0, False
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            if max_rows and rows > max_rows:
                truncated = True
                break
        table = pa.Table.from_batches(batches, schema=reader.schema)
        if truncated:
            table = table.slice(0, max_rows)
    except duckdb.InterruptException:
        raise QueryRefused(f"query stopped after {timeout_s:g} s (--timeout); narrow it or raise the limit") from None
    except duckdb.Error as e:
        raise QueryRefused(f"query failed: {e}") from None
    finally:
        if timer:
            timer.cancel()
        con.close()
    return QueryResult(_to_polars(table), truncated)


def _to_polars(table: pa.Table) -> pl.DataFrame:
    """Polars frame of the result; a column polars cannot hold (INTERVAL, UNION) becomes text."""
    columns = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            columns.append(pl.from_arrow(column).alias(name))
        except Exception:  # noqa: BLE001 - polars raises several kinds for unsupported Arrow types
            columns.append(pl.Series(name, [_text(v) for v in column.to_pylist()], dtype=pl.String))
    return pl.DataFrame(columns)


# ------------------------------------------------------------------------------------ rendering


def _plain(value: Any) -> Any:
    """A JSON-ready copy: lists, structs and maps stay nested; other types become text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    names = getattr(value, "_fields", None) or getattr(type(value), "__match_args__", None)
    if isinstance(value, tuple) and names:  # named tuples, e.g. an INTERVAL (months, days, nanoseconds)
        value = dict(zip(names, value, strict=False))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() and value.is_finite() else float(value)
    if isinstance(value, (dt.date, dt.time, dt.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def _text(value: Any) -> str | None:
    """One csv cell: nested values as JSON, booleans as true / false, null as empty."""
    plain = _plain(value)
    if plain is None or isinstance(plain, str):
        return plain
    if isinstance(plain, bool):
        return "true" if plain else "false"
    if isinstance(plain, (list, dict)):
        return json.dumps(plain, ensure_ascii=False)
    return str(plain)


def render(frame: pl.DataFrame, fmt: str) -> str:
    """csv (nested cells as JSON text) or json (a list of row objects, nested values kept)."""
    rows = frame.rows()
    if fmt == "json":
        return json.dumps([dict(zip(frame.columns, map(_plain, row), strict=True)) for row in rows], ensure_ascii=False)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(frame.columns)
        writer.writerows([_text(v) for v in row] for row in rows)
        return out.getvalue()
    raise ValueError(f"unknown format {fmt!r}")


def run_query(layout: Layout, sql: str, timeout_s: float = 30.0) -> pl.DataFrame:
    """Every row of one checked read statement over the sealed views."""
    return query_rows(layout, sql, timeout_s=timeout_s, max_rows=None).frame
