"""`long_table`: CSV, Parquet or JSON lines, one row per question x model, columns named by
`fields` (question, model, correct or score, optional response, tokens, cost, id, domain, split, gold):
SPROUT- or EmbedLLM-style matrices. A `gold` column (named by `fields.gold`) is graded by our labeler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.solvers.params import SCORE_THRESHOLD, LongTableFields
from delegation_lab.solvers.replay.records import (
    CACHE_COLUMNS,
    PUBLISHED_SPLIT,
    CacheFormat,
    ReadOptions,
    ReplayError,
    cache_frame,
    cell_text,
    check_csv,
    columns_hint,
    correctness,
    cost_value,
    missing_column,
    numbered_records,
    score_value,
    token_count,
)


def _read_table_file(path: Path) -> pl.DataFrame:
    try:
        if path.suffix == ".parquet":
            return pl.read_parquet(path)
        if path.suffix == ".csv":
            check_csv(path)
            return pl.read_csv(path, infer_schema=False)
    except pl.exceptions.PolarsError as e:
        raise ReplayError(f"{path}: not a readable {path.suffix[1:]} table ({e})") from None
    return pl.DataFrame([r for _, r in numbered_records(path)], infer_schema_length=None)


def read_long_table(path: Path, fields: LongTableFields, threshold: float = SCORE_THRESHOLD) -> pl.DataFrame:
    """One row per question x model; columns named by `fields` (explicitly named ones must exist); a
    score at or above `threshold` is correct."""
    raw = _read_table_file(path)
    columns = raw.columns
    explicit = fields.model_fields_set
    for name in explicit:
        column = getattr(fields, name)
        if column is not None and column not in columns:
            raise missing_column(path, f"the long table (fields.{name})", column, columns)
    for name in ("question", "model"):
        if getattr(fields, name) not in columns:
            raise missing_column(path, "the long table", getattr(fields, name), columns, f"; set fields.{name}")

    def col(name: str) -> str | None:
        column = getattr(fields, name)
        return column if column is not None and column in columns else None

    label_cols = [c for c in (col("correct"), col("score")) if c]
    if not label_cols:
        raise ReplayError(
            f"{path}: the long table has neither a correctness column ({fields.correct!r}) nor a score column "
            f"({fields.score!r}) (columns: {columns_hint(columns)}); set fields.correct or fields.score"
        )
    n = raw.height
    values = {name: (raw[c].to_list() if (c := col(name)) else [None] * n)
              for name in ("question", "model", "correct", "score", "response", "tokens_in", "tokens_out", "cost_usd", "id", "domain",
                           "split", "gold")}
    line = (lambda i: f"row {i + 2}") if path.suffix == ".csv" else (lambda i: f"row {i + 1}")
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = ({"domain": [], "score": []} | ({PUBLISHED_SPLIT: []} if col("split") else {})
                                    | ({"gold": []} if col("gold") else {}))
    for i in range(n):
        model = cell_text(values["model"][i])
        if not model:
            raise ReplayError(f"{path}: {line(i)}: column {fields.model!r} is empty")
        label = correctness(values["correct"][i], path, f"{line(i)}, column {fields.correct!r}", threshold)
        if label is None:
            label = correctness(values["score"][i], path, f"{line(i)}, column {fields.score!r}", threshold)
        raw_id = cell_text(values["id"][i])
        rows["source_index"].append(raw_id if raw_id is not None else str(i))
        rows["prompt"].append(cell_text(values["question"][i]))
        rows["model"].append(model)
        rows["response"].append(cell_text(values["response"][i]) if col("response") else "")
        rows["correct"].append(label)
        rows["tokens_in"].append(token_count(values["tokens_in"][i], path, f"{line(i)}, column {fields.tokens_in!r}"))
        rows["tokens_out"].append(token_count(values["tokens_out"][i], path, f"{line(i)}, column {fields.tokens_out!r}"))
        rows["cost_usd"].append(cost_value(values["cost_usd"][i], path, f"{line(i)}, column {fields.cost_usd!r}"))
        extras["domain"].append(cell_text(values["domain"][i]))
        extras["score"].append(score_value(values["score"][i]))
        if col("split"):
            extras[PUBLISHED_SPLIT].append(cell_text(values["split"][i]))
        if "gold" in extras:
            extras["gold"].append(cell_text(values["gold"][i]))
    return cache_frame(rows, extras)


def read_long_table_file(path: Path, options: ReadOptions) -> pl.DataFrame:
    return read_long_table(path, options.fields, options.score_threshold)


LONG_TABLE = CacheFormat(read=read_long_table_file, suffixes=(".csv", ".parquet", ".jsonl"),
                         fields=tuple(LongTableFields.model_fields))
