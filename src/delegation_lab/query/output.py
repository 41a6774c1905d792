"""Write a query's rows to a text stream one Arrow record batch at a time.

`dlab query` results can be far larger than memory (every trajectory step of every study), so no
writer here keeps more than the batch in hand: each batch is turned into text and written before
the next one is read. csv puts nested cells as JSON text; json is one array of row objects, written
row by row (`[`, rows separated by `,`, `]`), so its text is the same as a `json.dumps` of all rows.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TextIO

import pyarrow as pa

FORMATS = ("csv", "json")


@dataclass(frozen=True)
class Written:
    rows: int
    truncated: bool  # the query had more rows than max_rows


def plain(value: Any) -> Any:
    """A JSON-ready copy: lists, structs and maps stay nested; other types become text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    names = getattr(value, "_fields", None) or getattr(type(value), "__match_args__", None)
    if isinstance(value, tuple) and names:  # named tuples, e.g. an INTERVAL (months, days, nanoseconds)
        value = dict(zip(names, value, strict=False))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() and value.is_finite() else float(value)
    if isinstance(value, (dt.date, dt.time, dt.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def cell_text(value: Any) -> str | None:
    """One csv cell: nested values as JSON, booleans as true / false, null as empty."""
    value = plain(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def limited(batches: Iterable[pa.RecordBatch], max_rows: int | None) -> Iterable[pa.RecordBatch | None]:
    """The batches cut at `max_rows` rows (None or 0: every row); a final None when rows were left over."""
    rows = 0
    for batch in batches:
        if max_rows and rows + batch.num_rows > max_rows:
            if max_rows > rows:
                yield batch.slice(0, max_rows - rows)
            yield None
            return
        rows += batch.num_rows
        yield batch


def _rows(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
    columns = [column.to_pylist() for column in batch.columns]
    return list(zip(*columns, strict=True)) if columns else [()] * batch.num_rows


def write_csv(schema: pa.Schema, batches: Iterable[pa.RecordBatch], out: TextIO, max_rows: int | None = None) -> Written:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(schema.names)
    rows = 0
    for batch in limited(batches, max_rows):
        if batch is None:
            return Written(rows, True)
        writer.writerows([cell_text(v) for v in row] for row in _rows(batch))
        rows += batch.num_rows
    return Written(rows, False)


def write_json(schema: pa.Schema, batches: Iterable[pa.RecordBatch], out: TextIO, max_rows: int | None = None) -> Written:
    names, rows, truncated = schema.names, 0, False
    out.write("[")
    for batch in limited(batches, max_rows):
        if batch is None:
            truncated = True
            break
        for row in _rows(batch):
            out.write((", " if rows else "") + json.dumps(dict(zip(names, map(plain, row), strict=True)), ensure_ascii=False))
            rows += 1
    out.write("]\n")
    return Written(rows, truncated)


def write_rows(fmt: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch], out: TextIO,
               max_rows: int | None = None) -> Written:
    """csv or json rows of `batches` written to `out` as they arrive."""
    if fmt == "csv":
        return write_csv(schema, batches, out, max_rows)
    if fmt == "json":
        return write_json(schema, batches, out, max_rows)
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
