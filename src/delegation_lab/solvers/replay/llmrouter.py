"""`llmrouter`: LLMRouter's routing data (github.com/ulab-uiuc/LLMRouter, its `data/` folder):
`dcrouter_preprocessed/<split>.json`, a JSON list of `{question, scores: {model: score in [0, 1]}}`
(train also `cluster_id`), joined by question text to the query records of
`example_data/query_data/default_query_<split>.jsonl` (`task_name`, `query`, `ground_truth`,
`metric`, `task_id`; `query_file` records which file); the split's own query file first, then the
others, first record wins (8 train questions appear twice, under two tasks).

Name the `data/` folder (its price table `llm_candidates/default_llm.json` is not a score file) or
one score file. The task becomes the row's domain; `score` is kept and `correct` is score >=
`score_threshold` (0.5 unless the replay section says otherwise; the metrics `em_mc`, `GSM8K`,
`MATH` score 0 or 1, `f1_score`, `code_eval` and `commongen_coverage` anything between). There is
no answer text (empty replies, as RouteLLM's correctness-only CSVs) and no token count.

LLMRouter's routing data (`example_data/routing_data/default_routing_<split>_data.jsonl`, what its
`api_calling_evaluation.py` and `data_processing.process_final_data` write; the file is detected by
its records, which carry `model_name` and `performance`) is the same split long: one record per
(query, model) with `task_name`, `query`, `ground_truth`, `metric`, `choices`, `task_id`,
`model_name`, `response`, `input_tokens`, `output_tokens`, `token_num`, `response_time`,
`performance` (the score) and `embedding_id`. Its replies and token counts are kept; it has no cost.

The split is the file's: `source_split` is the score file's stem (train / test) or the routing
file's `<split>`, what `data.split: as_published` keeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import json
import re

import polars as pl

from delegation_lab.solvers.replay.records import (
    OTHER_LAYOUT,
    CACHE_COLUMNS,
    CacheFormat,
    ReadOptions,
    MAX_MODELS,
    PUBLISHED_SPLIT,
    ReplayError,
    cache_frame,
    cell_text,
    columns_hint,
    json_list,
    numbered_records,
    threshold_of,
    token_count,
    unit_score,
)

SCORES_FOLDER = "dcrouter_preprocessed"
QUERY_FOLDER = Path("example_data", "query_data")
QUERY_FIELDS = ("task_name", "ground_truth", "metric", "task_id", "query_file")


ROUTING_FIELDS = ("query", "model_name", "performance")
"""What makes a JSON lines record LLMRouter's routing data."""
_ROUTING_SPLIT = re.compile(r"_routing_(?P<split>[a-z]+)_data$")


def is_score_file(path: Path) -> bool:
    return path.parent.name == SCORES_FOLDER and path.suffix == ".json"


def is_routing_file(path: Path) -> bool:
    """A JSON lines file whose first record is LLMRouter routing data (its query files are not)."""
    if path.suffix != ".jsonl":
        return False
    try:
        with path.open(encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
        record = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(record, dict) and all(k in record for k in ROUTING_FIELDS)


def belongs(path: Path) -> bool:
    return is_score_file(path) or is_routing_file(path)


def routing_split(path: Path) -> str | None:
    """The split a routing file's name publishes (`default_routing_train_data` -> train)."""
    match = _ROUTING_SPLIT.search(path.stem)
    return match["split"] if match else None


def _query_file(path: Path) -> dict[str, dict[str, Any]]:
    """One query file's records by query text (first wins), each with its `query_file`; a bad line
    fails naming file and line."""
    out: dict[str, dict[str, Any]] = {}
    for lineno, r in numbered_records(path):
        missing = [k for k in ("query", "task_name") if k not in r]
        if missing:
            raise ReplayError(f"{path}: line {lineno}: missing field {missing[0]!r} (fields: {columns_hint(sorted(r))})")
        out.setdefault(str(r["query"]), {**r, "query_file": str(path)})
    return out


def query_files(score_file: Path) -> list[Path]:
    """The query files a score file joins to, in reading order: its split's file first, then the others
    (the memory budget counts them: `CacheFormat.companions`)."""
    folder = score_file.parent.parent / QUERY_FOLDER
    own = folder / f"default_query_{score_file.stem}.jsonl"
    return sorted(folder.glob("*.jsonl"), key=lambda p: p != own)


def queries_for(score_file: Path) -> dict[str, dict[str, Any]]:
    """The query records a score file joins to: its split's file first, then the others."""
    files = query_files(score_file)
    if not files:
        own = score_file.parent.parent / QUERY_FOLDER / f"default_query_{score_file.stem}.jsonl"
        raise ReplayError(f"{score_file}: LLMRouter's query files are missing: expected {own} (the layout of "
                          "LLMRouter's data/ folder: the task, gold and metric of each question live there)")
    merged: dict[str, dict[str, Any]] = {}
    for f in files:
        for query, record in _query_file(f).items():
            merged.setdefault(query, record)
    return merged


def _scores(record: Any, path: Path, where: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise ReplayError(f"{path}: {where}: expected a JSON object, got {type(record).__name__}")
    for key in ("question", "scores"):
        if key not in record:
            raise ReplayError(f"{path}: {where}: missing field {key!r} (fields: {columns_hint(sorted(record))})")
    if not isinstance(record["scores"], dict) or not record["scores"]:
        raise ReplayError(f"{path}: {where}: field 'scores' must be a non-empty object of model -> score")
    return record["scores"]


def read_llmrouter(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """A routing data file (JSON lines), or one dcrouter_preprocessed file joined to its query records
    (labels only: empty replies)."""
    if path.suffix == ".jsonl":
        return read_routing_data(path, threshold_of(options))
    records = json_list(path, "LLMRouter questions with per-model scores")
    models: set[str] = set()
    for i, record in enumerate(records):  # before any row is built: one record can name a million models
        models.update(map(str, _scores(record, path, f"record {i}")))
        if len(models) > MAX_MODELS:
            raise ReplayError(f"{path}: record {i}: the scores name more than {MAX_MODELS} models; import the "
                              "models you route among")
    queries = queries_for(path)
    threshold = threshold_of(options)
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {k: [] for k in ("domain", "score", *QUERY_FIELDS[1:], "cluster_id", PUBLISHED_SPLIT)}
    for i, record in enumerate(records):
        scores = _scores(record, path, f"record {i}")
        question = cell_text(record["question"])
        query = queries.get(question or "", {})
        for model, value in scores.items():
            score = unit_score(value, path, f"record {i}, scores[{model!r}]")
            rows["source_index"].append(str(i))
            rows["prompt"].append(question)
            rows["model"].append(str(model))
            rows["response"].append("")  # no answer text: labels only
            rows["correct"].append(None if score is None else score >= threshold)
            for k in ("tokens_in", "tokens_out", "cost_usd"):
                rows[k].append(None)
            extras["domain"].append(cell_text(query.get("task_name")))
            extras["score"].append(score)
            for k in QUERY_FIELDS[1:]:
                extras[k].append(cell_text(query.get(k)))
            extras["cluster_id"].append(record.get("cluster_id"))
            extras[PUBLISHED_SPLIT].append(path.stem)
    return cache_frame(rows, extras)


def read_routing_data(path: Path, threshold: float) -> pl.DataFrame:
    """LLMRouter's routing data: one record per (query, model), its reply, tokens and score."""
    records = numbered_records(path)
    if not records:
        raise ReplayError(f"{path}: no records")
    split = routing_split(path)
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {k: [] for k in ("domain", "score", "ground_truth", "metric", "task_id",
                                                    "embedding_id", PUBLISHED_SPLIT)}
    for lineno, r in records:
        missing = [k for k in ROUTING_FIELDS if k not in r]
        if missing:
            raise ReplayError(f"{path}: line {lineno}: missing field {missing[0]!r} (fields: {columns_hint(sorted(r))}); {OTHER_LAYOUT}")
        score = unit_score(r["performance"], path, f"line {lineno}, field 'performance'")
        tokens_in = r.get("input_tokens", r.get("prompt_tokens"))
        tokens_out = r.get("output_tokens", r.get("completion_tokens"))
        rows["source_index"].append(cell_text(r.get("embedding_id")) or str(lineno))
        rows["prompt"].append(cell_text(r["query"]))
        rows["model"].append(str(r["model_name"]))
        rows["response"].append(cell_text(r.get("response")))
        rows["correct"].append(None if score is None else score >= threshold)
        rows["tokens_in"].append(token_count(tokens_in, path, f"line {lineno}, field 'input_tokens'"))
        rows["tokens_out"].append(token_count(tokens_out, path, f"line {lineno}, field 'output_tokens'"))
        rows["cost_usd"].append(None)
        extras["domain"].append(cell_text(r.get("task_name")))
        extras["score"].append(score)
        extras["ground_truth"].append(cell_text(r.get("ground_truth", r.get("gt"))))
        extras["metric"].append(cell_text(r.get("metric")))
        extras["task_id"].append(cell_text(r.get("task_id")))
        extras["embedding_id"].append(cell_text(r.get("embedding_id")))
        extras[PUBLISHED_SPLIT].append(split)
    return cache_frame(rows, extras)


def llmrouter_notes(frame: pl.DataFrame) -> list[str]:
    """What `dlab import` says about a loaded LLMRouter cache."""
    first = frame.unique(subset="key", keep="first", maintain_order=True)
    unmatched = first.filter(pl.col("metric").is_null()).height
    splits = frame.group_by("key").agg(pl.col(PUBLISHED_SPLIT).n_unique().alias("n"))
    shared = splits.filter(pl.col("n") > 1).height
    lines = []
    if (frame["response"].fill_null("") == "").all():
        lines.append("no answer texts (labels and scores only): output tokens cannot be estimated, so a price "
                     "charges the question's input tokens alone")
    if unmatched:
        lines.append(f"{unmatched} question(s) match no query record: no task, gold or metric; their domain is "
                     "the file's stem")
    if shared:
        lines.append(f"{shared} question(s) appear in more than one split file; the first file's row is kept "
                     f"({first['source_file'][0]} is read first)")
    return lines


def companions(path: Path) -> list[Path]:
    return query_files(path) if is_score_file(path) else []


LLMROUTER = CacheFormat(read=read_llmrouter, suffixes=(".json", ".jsonl"), belongs=belongs, notes=llmrouter_notes,
                        companions=companions)
