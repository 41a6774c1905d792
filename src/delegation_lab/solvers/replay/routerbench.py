"""RouterBench's frames, whatever file they came from (`routerbench_pickle`, `routerbench_csv`), told
apart by their columns (github.com/withmartian/routerbench, `convertors/common.py`):

- wide (`routerbench_0shot.pkl`, `routerbench_5shot.pkl`): one row per prompt with `sample_id`,
  `prompt`, `eval_name` (the dataset: the rows' domain), `oracle_model_to_route_to` and, per model,
  `<model>` (a score in [0, 1]; empty where the model was not scored), `<model>|model_response` and
  `<model>|total_cost` (US$);
- long (`routerbench_raw.pkl`, what `convert_data.py` pivots): one row per (prompt, model) with
  `sample_id`, `prompt`, `eval_name`, `model_name`, `model_response`, `performance` (the score) and,
  where priced, `cost`.

RouterBench publishes no split (its `evaluate_routers.py` draws 70 / 30 per dataset with numpy seed
42); a `split` column a derived table adds is kept as the published split."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from delegation_lab.solvers.replay.records import (
    OTHER_LAYOUT,
    CACHE_COLUMNS,
    ReplayError,
    cache_frame,
    cell_text,
    columns_hint,
    cost_value,
    missing_column,
    unit_score,
    PUBLISHED_SPLIT,
)

if TYPE_CHECKING:
    import pandas as pd

ROUTERBENCH_META = ("sample_id", "prompt", "eval_name", "oracle_model_to_route_to")
RESPONSE = "|model_response"
COST = "|total_cost"
LONG_COLUMNS = ("model_name", "performance")
"""The columns that make a RouterBench frame the long (raw) layout."""


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


def read_frame(path: Path, raw: pd.DataFrame, what: str, threshold: float, first_row: int = 0) -> pl.DataFrame:
    """The cache rows of one RouterBench frame, wide or long by its columns (`what` names it in errors,
    its row i is row `first_row + i`): a score at or above `threshold` is correct, one outside [0, 1]
    fails naming the row, its sample_id and the model."""
    columns = [str(c) for c in raw.columns]
    raw.columns = columns
    if "prompt" not in columns:
        raise missing_column(path, what, "prompt", columns)
    if all(c in columns for c in LONG_COLUMNS):
        frame = read_long_frame(path, raw, what, threshold, first_row)
    else:
        frame = read_wide_frame(path, raw, what, threshold, first_row)
    if "eval_name" in frame.columns:  # RouterBench's dataset names the domain
        frame = frame.with_columns(pl.col("eval_name").cast(pl.String).alias("domain"))
    if "split" in frame.columns:  # a derived table's split column: the published split
        frame = frame.with_columns(pl.col("split").cast(pl.String).alias(PUBLISHED_SPLIT))
    return frame


def read_long_frame(path: Path, raw: pd.DataFrame, what: str, threshold: float, first_row: int) -> pl.DataFrame:
    """RouterBench's raw long frame: one row per (prompt, model), `performance` the score."""
    columns = list(raw.columns)
    used = {"sample_id", "prompt", "model_name", "model_response", "performance", "cost"}
    extra_cols = [c for c in columns if c not in used]
    n = len(raw)
    values = {c: (raw[c].tolist() if c in columns else [None] * n) for c in used}
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {c: raw[c].tolist() for c in extra_cols}
    extras["score"] = []
    for i in range(n):
        sample_id = cell_text(values["sample_id"][i])
        where = f"row {first_row + i}" + (f" (sample_id {sample_id!r})" if sample_id is not None else "")
        model = cell_text(values["model_name"][i])
        if not model:
            raise ReplayError(f"{path}: {where}: column 'model_name' is empty")
        score = unit_score(values["performance"][i], path, f"{where}, column 'performance'", nan_is_empty=True)
        rows["source_index"].append(sample_id if sample_id is not None else str(i))
        rows["prompt"].append(unwrap_list_text(cell_text(values["prompt"][i])))
        rows["model"].append(model)
        rows["response"].append(unwrap_list_text(cell_text(values["model_response"][i])))
        rows["correct"].append(None if score is None else score >= threshold)
        rows["tokens_in"].append(None)
        rows["tokens_out"].append(None)
        rows["cost_usd"].append(cost_value(values["cost"][i], path, f"{where}, column 'cost'", nan_is_empty=True))
        extras["score"].append(score)
    return cache_frame(rows, extras)


def read_wide_frame(path: Path, raw: pd.DataFrame, what: str, threshold: float, first_row: int = 0) -> pl.DataFrame:
    """RouterBench's wide frame: per model a score, a response and a cost column."""
    columns = list(raw.columns)
    models = [c for c in columns if "|" not in c and f"{c}{RESPONSE}" in columns]
    orphans = [c for c in columns if c.endswith(RESPONSE) and c[: -len(RESPONSE)] not in models]
    if orphans:
        raise missing_column(path, what, orphans[0][: -len(RESPONSE)], columns,
                             f" (the score column beside {orphans[0]!r})")
    if not models:
        raise ReplayError(
            f"{path}: {what} has no model: expected '<model>' score columns next to "
            f"'<model>{RESPONSE}' columns, or 'model_name' and 'performance' columns (columns: {columns_hint(columns)}); "
            f"{OTHER_LAYOUT}"
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
        responses = raw[f"{model}{RESPONSE}"].tolist()
        costs = raw[f"{model}{COST}"].tolist() if f"{model}{COST}" in columns else [None] * n
        for i in range(n):
            sample = f" (sample_id {ids[i]!r})" if "sample_id" in columns else ""
            score = unit_score(scores[i], path, f"row {first_row + i}{sample}, column {model!r}", nan_is_empty=True)
            rows["source_index"].append(ids[i] if ids[i] is not None else str(i))
            rows["prompt"].append(prompts[i])
            rows["model"].append(model)
            rows["response"].append(unwrap_list_text(cell_text(responses[i])))
            rows["correct"].append(None if score is None else score >= threshold)
            rows["tokens_in"].append(None)
            rows["tokens_out"].append(None)
            rows["cost_usd"].append(cost_value(costs[i], path, f"row {first_row + i}{sample}, column {model + COST!r}",
                                              nan_is_empty=True))
            extras["score"].append(score)
        for c in extra_cols:
            extras[c].extend(extra_values[c])
    return cache_frame(rows, extras)
