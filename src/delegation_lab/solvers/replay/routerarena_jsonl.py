"""`routerarena_jsonl`: RouterArena's two answer layouts (github.com/RouteWorks/RouterArena), told
apart by their content:

- `cached_results/<model>.jsonl` (the stem names the model): `global_index` (`<dataset>_<n>`),
  `question`, `llm_selected`, `generated_answer`, `token_usage`, `success`, `provider`, `error`,
  `batch_*`, `processing_mode` and `evaluation_result` (`extracted_answer`, `ground_truth`, `score`,
  `metric`, `inference_cost`; null = not evaluated yet, so unlabelled);
- a router's prediction file `router_inference/predictions/<router>.json` (a JSON list): `global
  index` (or `global_index`), `prompt`, `prediction` (the model the router chose), `generated_result`
  (`generated_answer`, `success`, `token_usage`, `provider`, `error`; null before inference), `cost`
  and `accuracy` (the score; null where the split hides the gold: `full`). One row per question, by
  the chosen model; the router is kept in `router`.

A negative score (its `meteor_score` where the fragmentation penalty passes 1) counts as wrong, the
raw score kept. A cost of 0 is ignored (RouterArena prices unregistered models at $0): such answers are priced from
tokens. The dataset of the global index is the domain. RouterArena publishes two splits of one set of
questions (`sub_10`, 809 with gold, inside `full`, 8,400): a subset, not a train / test split."""

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
    cell_text,
    columns_hint,
    correctness,
    cost_value,
    json_list,
    numbered_records,
    score_value,
    threshold_of,
    token_count,
)

ROUTERARENA_REQUIRED = ("global_index", "question", "generated_answer")


def _floored(score: Any) -> Any:
    """A negative score read as 0 (wrong): RouterArena's `meteor_score` is F x (1 - penalty) and its
    fragmentation penalty can pass 1 (NarrativeQA_4102 scores -0.033 in cached_results @ 4714a9a).
    The raw score stays in `score`."""
    return 0.0 if isinstance(score, (int, float)) and not isinstance(score, bool) and score < 0 else score


def _routerarena_domain(global_index: str) -> str | None:
    """RouterArena's global index is `<dataset>_<n>`: the dataset is the domain."""
    head, sep, tail = global_index.rpartition("_")
    return head if sep and head else None


PREDICTION_FIELDS = ("prompt", "prediction", "generated_result")
"""What makes a JSON record a RouterArena prediction entry."""


def is_prediction_file(path: Path) -> bool:
    """A JSON list whose first entry is a RouterArena prediction (not a config or a price table)."""
    try:
        with path.open(encoding="utf-8") as f:
            head = f.read(1 << 16)
    except (OSError, UnicodeDecodeError):
        return False
    return head.lstrip().startswith("[") and all(f'"{k}"' in head for k in PREDICTION_FIELDS)


def belongs(path: Path) -> bool:
    return path.suffix == ".jsonl" or is_prediction_file(path)


def read_routerarena(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """Either RouterArena layout, by its content."""
    if path.suffix == ".json":
        return read_routerarena_predictions(path, options)
    return read_routerarena_jsonl(path, options)


def read_routerarena_predictions(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """A router's prediction file: each question answered by the model the router chose."""
    records = json_list(path, "RouterArena prediction entries")
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {"domain": [], "score": [], "router": []}
    for i, r in enumerate(records):
        where = f"record {i}"
        if not isinstance(r, dict):
            raise ReplayError(f"{path}: {where}: expected a JSON object, got {type(r).__name__}")
        index = r.get("global index", r.get("global_index"))
        missing = [k for k in PREDICTION_FIELDS if k not in r] or ([] if index is not None else ["global index"])
        if missing:
            raise ReplayError(f"{path}: {where}: missing field {missing[0]!r} (fields: {columns_hint(sorted(r))}); {OTHER_LAYOUT}")
        result = r["generated_result"]
        if not (result is None or isinstance(result, dict)):
            raise ReplayError(f"{path}: {where}: 'generated_result' must be a JSON object or null")
        result = result or {}
        usage = result.get("token_usage") or {}
        if not isinstance(usage, dict):
            raise ReplayError(f"{path}: {where}: 'generated_result.token_usage' must be a JSON object or null")
        answered = result.get("success") is True
        cost = cost_value(r.get("cost"), path, f"{where}, field 'cost'")
        rows["source_index"].append(str(index))
        rows["prompt"].append(cell_text(r["prompt"]))
        rows["model"].append(str(r["prediction"]))
        rows["response"].append(cell_text(result.get("generated_answer")) if answered else None)
        rows["correct"].append(correctness(_floored(r.get("accuracy")), path, f"{where}, field 'accuracy'", threshold_of(options))
                               if answered else None)
        rows["tokens_in"].append(token_count(usage.get("input_tokens"), path, f"{where}, field 'generated_result.token_usage.input_tokens'"))
        rows["tokens_out"].append(token_count(usage.get("output_tokens"), path, f"{where}, field 'generated_result.token_usage.output_tokens'"))
        rows["cost_usd"].append(cost if cost else None)
        extras["domain"].append(_routerarena_domain(str(index)))
        extras["score"].append(score_value(r.get("accuracy")))
        extras["router"].append(path.stem)
    return cache_frame(rows, extras)


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
                raise ReplayError(f"{where}: missing field {key!r} (fields: {columns_hint(sorted(r))}); {OTHER_LAYOUT}")
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
        rows["correct"].append(None if failed else correctness(_floored(result.get("score")), path,
                                                               f"line {lineno}, field 'evaluation_result.score'",
                                                               threshold_of(options)))
        rows["tokens_in"].append(token_count(usage.get("input_tokens"), path, f"line {lineno}, field 'token_usage.input_tokens'"))
        rows["tokens_out"].append(token_count(usage.get("output_tokens"), path, f"line {lineno}, field 'token_usage.output_tokens'"))
        rows["cost_usd"].append(cost if cost else None)  # a $0 cost is RouterArena's unregistered-model default
        extras["domain"].append(_routerarena_domain(index))
        extras["score"].append(score_value(result.get("score")))
        extras["ground_truth"].append(cell_text(result.get("ground_truth")))
    return cache_frame(rows, extras)


ROUTERARENA_JSONL = CacheFormat(read=read_routerarena, suffixes=(".jsonl", ".json"), belongs=belongs)
