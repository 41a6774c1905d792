"""RouterBench's wide frame, whatever file it came from (`routerbench_pickle`, `routerbench_csv`): one
row per prompt with `sample_id`, `prompt`, `eval_name` (the dataset: the rows' domain) and, per
model, `<model>` (a score in [0, 1]), `<model>|model_response` and `<model>|total_cost` (US$)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from delegation_lab.solvers.replay.records import (
    CACHE_COLUMNS,
    ReplayError,
    cache_frame,
    cell_text,
    columns_hint,
    cost_value,
    missing_column,
    unit_score,
)

if TYPE_CHECKING:
    import pandas as pd

ROUTERBENCH_META = ("sample_id", "prompt", "eval_name", "oracle_model_to_route_to")
RESPONSE = "|model_response"
COST = "|total_cost"


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


def read_wide_frame(path: Path, raw: pd.DataFrame, what: str, threshold: float, first_row: int = 0) -> pl.DataFrame:
    """The cache rows of one RouterBench frame (`what` names it in errors, its row i is row
    `first_row + i`): a score at or above `threshold` is correct, one outside [0, 1] fails naming the
    row, its sample_id and the model."""
    columns = [str(c) for c in raw.columns]
    raw.columns = columns
    if "prompt" not in columns:
        raise missing_column(path, what, "prompt", columns)
    models = [c for c in columns if "|" not in c and f"{c}{RESPONSE}" in columns]
    orphans = [c for c in columns if c.endswith(RESPONSE) and c[: -len(RESPONSE)] not in models]
    if orphans:
        raise missing_column(path, what, orphans[0][: -len(RESPONSE)], columns,
                             f" (the score column beside {orphans[0]!r})")
    if not models:
        raise ReplayError(
            f"{path}: {what} has no model: expected '<model>' score columns next to "
            f"'<model>{RESPONSE}' columns (columns: {columns_hint(columns)})"
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
    if "eval_name" in extra_cols:  # RouterBench's dataset names the domain
        extras["domain"] = [cell_text(v) for v in extras["eval_name"]]
    return cache_frame(rows, extras)
