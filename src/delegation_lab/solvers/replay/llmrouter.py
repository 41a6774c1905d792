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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.solvers.replay.records import (
    CACHE_COLUMNS,
    CacheFormat,
    ReadOptions,
    MAX_MODELS,
    ReplayError,
    cache_frame,
    cell_text,
    columns_hint,
    json_list,
    numbered_records,
    threshold_of,
    unit_score,
)

SCORES_FOLDER = "dcrouter_preprocessed"
QUERY_FOLDER = Path("example_data", "query_data")
QUERY_FIELDS = ("task_name", "ground_truth", "metric", "task_id", "query_file")


def is_score_file(path: Path) -> bool:
    return path.parent.name == SCORES_FOLDER and path.suffix == ".json"


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
    """One dcrouter_preprocessed file joined to its query records; labels only (empty replies)."""
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
    extras: dict[str, list[Any]] = {k: [] for k in ("domain", "score", *QUERY_FIELDS[1:], "cluster_id", "source_split")}
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
            extras["source_split"].append(path.stem)
    return cache_frame(rows, extras)


def llmrouter_notes(frame: pl.DataFrame) -> list[str]:
    """What `dlab import` says about a loaded LLMRouter cache."""
    first = frame.unique(subset="key", keep="first", maintain_order=True)
    unmatched = first.filter(pl.col("metric").is_null()).height
    splits = frame.group_by("key").agg(pl.col("source_split").n_unique().alias("n"))
    shared = splits.filter(pl.col("n") > 1).height
    lines = ["no answer texts (labels and scores only): output tokens cannot be estimated, so a price "
             "charges the question's input tokens alone"]
    if unmatched:
        lines.append(f"{unmatched} question(s) match no query record: no task, gold or metric; their domain is "
                     "the file's stem")
    if shared:
        lines.append(f"{shared} question(s) appear in more than one split file; the first file's row is kept "
                     f"({first['source_file'][0]} is read first)")
    return lines


LLMROUTER = CacheFormat(read=read_llmrouter, suffixes=(".json",), belongs=is_score_file, notes=llmrouter_notes,
                        companions=query_files)
