"""`routerarena_jsonl`: RouterArena's `cached_results/<model>.jsonl` (the stem names the model):
`global_index` (`<dataset>_<n>`), `question`, `generated_answer`, `token_usage`, `success`, and
`evaluation_result.score` (null = unlabelled). Its `inference_cost` is ignored when 0 (RouterArena
priced unregistered models at $0): such answers are priced from tokens."""

from __future__ import annotations

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
    cost_value,
    numbered_records,
    score_value,
    threshold_of,
    token_count,
)

ROUTERARENA_REQUIRED = ("global_index", "question", "generated_answer")


def _routerarena_domain(global_index: str) -> str | None:
    """RouterArena's global index is `<dataset>_<n>`: the dataset is the domain."""
    head, sep, tail = global_index.rpartition("_")
    return head if sep and head else None


def read_routerarena_jsonl(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """RouterArena: cached_results/<model>.jsonl, one record per question, scored in evaluation_result."""
    records = numbered_records(path)
    if not records:
        raise ReplayError(f"{path}: no records")
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {"domain": [], "score": [], "ground_truth": []}
    for lineno, r in records:
        where = f"{path}: line {lineno}"
        for key in ROUTERARENA_REQUIRED:
            if key not in r:
                raise ReplayError(f"{where}: missing field {key!r} (fields: {columns_hint(sorted(r))})")
        usage = r.get("token_usage") or {}
        result = r.get("evaluation_result")
        if not isinstance(usage, dict) or not (result is None or isinstance(result, dict)):
            raise ReplayError(f"{where}: 'token_usage' and 'evaluation_result' must be JSON objects or null")
        result = result or {}
        failed = r.get("success") is False
        cost = cost_value(result.get("inference_cost"), path, f"line {lineno}, field 'evaluation_result.inference_cost'")
        index = str(r["global_index"])
        rows["source_index"].append(index)
        rows["prompt"].append(cell_text(r["question"]))
        rows["model"].append(path.stem)
        rows["response"].append(None if failed else cell_text(r["generated_answer"]))
        rows["correct"].append(None if failed else correctness(result.get("score"), path, f"line {lineno}, field 'evaluation_result.score'", threshold_of(options)))
        rows["tokens_in"].append(token_count(usage.get("input_tokens"), path, f"line {lineno}, field 'token_usage.input_tokens'"))
        rows["tokens_out"].append(token_count(usage.get("output_tokens"), path, f"line {lineno}, field 'token_usage.output_tokens'"))
        rows["cost_usd"].append(cost if cost else None)  # a $0 cost is RouterArena's unregistered-model default
        extras["domain"].append(_routerarena_domain(index))
        extras["score"].append(score_value(result.get("score")))
        extras["ground_truth"].append(cell_text(result.get("ground_truth")))
    return cache_frame(rows, extras)


ROUTERARENA_JSONL = CacheFormat(read=read_routerarena_jsonl, suffixes=(".jsonl",))
