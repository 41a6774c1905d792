"""`routerbench_pickle`: RouterBench's pandas DataFrame pickle with `sample_id`, `prompt`,
`eval_name` and per model `<model>` (score), `<model>|model_response`, `<model>|total_cost`.
Unpickling runs code: refused unless trusted (`trust_pickle: true`, `dlab import --trust-pickle`)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.solvers.replay.records import (
    CACHE_COLUMNS,
    CacheFormat,
    ReadOptions,
    ReplayError,
    cache_frame,
    cell_text,
    columns_hint,
    correctness,
    float_or_none,
    missing_column,
    score_value,
)

PICKLE_WARNING = (
    "unpickling runs arbitrary code: a RouterBench .pkl can do anything your user can (delete files, "
    "read keys, open connections). Load only a pickle you trust, e.g. one you downloaded yourself from "
    "RouterBench's own release and checked against its published hash."
)


ROUTERBENCH_META = ("sample_id", "prompt", "eval_name", "oracle_model_to_route_to")


def unwrap_list_text(text: str | None) -> str | None:
    """RouterBench stores some prompts as the string form of a Python list: "['...']"."""
    if text is None:
        return None
    s = text.strip()
    if s.startswith("[") and s.endswith("]"):
        try:
            value = ast.literal_eval(s)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return "\n\n".join(value)
    return text


def read_routerbench_pickle(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """RouterBench: wide pandas pickle, `<model>` score, `<model>|model_response`, `<model>|total_cost`."""
    import pandas as pd

    try:
        raw = pd.read_pickle(path)
    except Exception as e:  # noqa: BLE001 - any unpickling failure is bad input
        raise ReplayError(f"{path}: not a readable pandas pickle ({type(e).__name__}: {e})") from None
    if not isinstance(raw, pd.DataFrame):
        raise ReplayError(f"{path}: expected a pickled pandas DataFrame, got {type(raw).__name__}")
    columns = [str(c) for c in raw.columns]
    raw.columns = columns
    if "prompt" not in columns:
        raise missing_column(path, "the RouterBench pickle", "prompt", columns)
    models = [c for c in columns if "|" not in c and f"{c}|model_response" in columns]
    if not models:
        raise ReplayError(
            f"{path}: the RouterBench pickle has no model: expected '<model>' score columns next to "
            f"'<model>|model_response' columns (columns: {columns_hint(columns)})"
        )
    model_cols = {c for m in models for c in columns if c == m or c.startswith(f"{m}|")}
    extra_cols = [c for c in columns if c not in model_cols and c not in ("prompt", "sample_id")]
    n = len(raw)
    ids = [cell_text(v) for v in raw["sample_id"].tolist()] if "sample_id" in columns else [str(i) for i in range(n)]
    prompts = [unwrap_list_text(cell_text(v)) for v in raw["prompt"].tolist()]
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {c: [] for c in [*extra_cols, "score"]}
    extra_values = {c: raw[c].tolist() for c in extra_cols}
    for model in models:
        scores = raw[model].tolist()
        responses = raw[f"{model}|model_response"].tolist()
        costs = raw[f"{model}|total_cost"].tolist() if f"{model}|total_cost" in columns else [None] * n
        for i in range(n):
            rows["source_index"].append(ids[i] if ids[i] is not None else str(i))
            rows["prompt"].append(prompts[i])
            rows["model"].append(model)
            rows["response"].append(unwrap_list_text(cell_text(responses[i])))
            rows["correct"].append(correctness(scores[i], path, f"row {i}, column {model!r}"))
            rows["tokens_in"].append(None)
            rows["tokens_out"].append(None)
            rows["cost_usd"].append(float_or_none(costs[i]))
            extras["score"].append(score_value(scores[i]))
        for c in extra_cols:
            extras[c].extend(extra_values[c])
    return cache_frame(rows, extras)


ROUTERBENCH_PICKLE = CacheFormat(
    read=read_routerbench_pickle, suffixes=(".pkl", ".pickle"), trust_warning=PICKLE_WARNING)
