"""`routellm_csv`: RouteLLM's layout: columns `prompt`, then per model `<model>` (correct:
True/False) and `<model>_response` (RouteLLM's `gsm8k_responses.csv`); without any `_response`
column, every other column is one model's correctness (RouteLLM's per-subject MMLU CSVs): answers
are empty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.solvers.replay.records import (
    OTHER_LAYOUT,
    CACHE_COLUMNS,
    CacheFormat,
    ReadOptions,
    ReplayError,
    cache_frame,
    check_csv,
    columns_hint,
    correctness,
    missing_column,
    threshold_of,
)


def read_routellm_csv(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """RouteLLM: `prompt` + `<model>` (True/False) + `<model>_response` per model."""
    check_csv(path)
    try:
        raw = pl.read_csv(path, infer_schema=False)  # every cell as text; quoted newlines kept
    except pl.exceptions.PolarsError as e:
        raise ReplayError(f"{path}: not a readable CSV ({e})") from None
    columns = raw.columns
    if "prompt" not in columns:
        raise missing_column(path, "the RouteLLM CSV", "prompt", columns)
    models = [c for c in columns if c != "prompt" and f"{c}_response" in columns]
    labels_only = not any(c.endswith("_response") for c in columns)
    if labels_only:  # RouteLLM's per-subject MMLU CSVs: prompt, then one True/False column per model
        models = [c for c in columns if c != "prompt"]
    if not models:
        raise ReplayError(
            f"{path}: the RouteLLM CSV has no model: expected '<model>' True/False correctness columns, "
            f"optionally each beside a '<model>_response' column (columns: {columns_hint(columns)}); {OTHER_LAYOUT}"
        )
    used = {"prompt", *models, *(f"{m}_response" for m in models)}
    extra_cols = [c for c in columns if c not in used]
    prompts = raw["prompt"].to_list()
    threshold = threshold_of(options)
    n = raw.height
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {c: [] for c in extra_cols}
    for model in models:
        labels = raw[model].to_list()
        responses = [""] * n if labels_only else raw[f"{model}_response"].to_list()
        for i in range(n):
            rows["source_index"].append(str(i))
            rows["prompt"].append(prompts[i])
            rows["model"].append(model)
            rows["response"].append(responses[i])
            rows["correct"].append(correctness(labels[i], path, f"row {i + 2}, column {model!r}", threshold))
            rows["tokens_in"].append(None)
            rows["tokens_out"].append(None)
            rows["cost_usd"].append(None)
        for c in extra_cols:
            extras[c].extend(raw[c].to_list())
    return cache_frame(rows, extras)


ROUTELLM_CSV = CacheFormat(read=read_routellm_csv, suffixes=(".csv",))
