"""`parquet`: our own answers table (tables.ANSWERS_SCHEMA) with a `question` (or `prompt`) column
joined in; correctness from `imported_correct` / `correct` columns or the `extra` JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.solvers.replay.records import (
    CacheFormat,
    ReadOptions,
    ReplayError,
    cache_frame,
    correctness,
    missing_column,
)


def read_answers_parquet(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """Our own answers table with the question text joined in (column `question` or `prompt`)."""
    try:
        raw = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as e:
        raise ReplayError(f"{path}: not a readable Parquet file ({e})") from None
    columns = raw.columns
    prompt_col = next((c for c in ("question", "prompt") if c in columns), None)
    if prompt_col is None:
        raise missing_column(
            path, "the answers table", "question", columns,
            "; join the items' question text first, e.g. dlab query \"SELECT a.*, i.question FROM answers a "
            "JOIN items i USING (item_id)\"",
        )
    response_col = next((c for c in ("answer_text", "response") if c in columns), None)
    if response_col is None:
        raise missing_column(path, "the answers table", "answer_text", columns)
    model_col = next((c for c in ("model", "solver") if c in columns), None)
    if model_col is None:
        raise missing_column(path, "the answers table", "model", columns)
    if "role" in columns:
        raw = raw.filter(pl.col("role").is_null() | (pl.col("role") == "answer"))
    n = raw.height

    def col(name: str) -> list[Any]:
        return raw[name].to_list() if name in columns else [None] * n

    extra_json = [json.loads(e) if e else {} for e in col("extra")]
    correct_col = next((c for c in ("imported_correct", "correct") if c in columns), None)
    labels = []
    for i in range(n):
        value = raw[correct_col][i] if correct_col else None
        if value is None:
            value = extra_json[i].get("imported_correct", extra_json[i].get("correct"))
        labels.append(correctness(value, path, f"row {i}"))
    ids = col("item_id") if "item_id" in columns else [str(i) for i in range(n)]
    errors = col("error")
    responses = [None if errors[i] is not None else r for i, r in enumerate(col(response_col))]
    rows = {
        "source_index": [str(v) for v in ids],
        "prompt": col(prompt_col),
        "model": [str(v) for v in raw[model_col].to_list()],
        "response": responses,
        "correct": labels,
        "tokens_in": [None if errors[i] is not None else v for i, v in enumerate(col("tokens_in"))],
        "tokens_out": [None if errors[i] is not None else v for i, v in enumerate(col("tokens_out"))],
        "cost_usd": [None if errors[i] is not None else v for i, v in enumerate(col("cost_usd"))],
    }
    skip = {prompt_col, response_col, model_col, "imported_correct", "correct", "tokens_in", "tokens_out",
            "cost_usd", "extra", "created_at", "request_hash"}
    extras = {c: raw[c].to_list() for c in columns if c not in skip}
    return cache_frame(rows, extras)


PARQUET = CacheFormat(read=read_answers_parquet, suffixes=(".parquet",))
