"""`llmrouterbench_json`: LLMRouterBench's results (github.com/ynulihao/LLMRouterBench,
`data_collector/storage.py`): a JSON list, JSON lines, or an object holding a list of `records` with
`index`, `origin_query`, `prompt`, `prediction`, `raw_output`, `ground_truth`, `score`,
`prompt_tokens`, `completion_tokens`, `cost`, `extra_fields` and `model` / `model_name` (else the
file stem names the model). The object's own `model_name`, `dataset_name` (the domain), `split` (the
published split) and `demo` (a truncated test run) apply to every record. In its tree
`results/bench/<dataset>/<split>/<model>/<timestamp>.json` the folders name them where the file
does not; the newest timestamp of a model comes first (first row wins)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.data.sources import parse_json_lines
from delegation_lab.errors import InputError
from delegation_lab.json_input import loads
from delegation_lab.solvers.params import SCORE_THRESHOLD
from delegation_lab.solvers.replay.records import (
    OTHER_LAYOUT,
    CACHE_COLUMNS,
    PUBLISHED_SPLIT,
    CacheFormat,
    ReadOptions,
    ReplayError,
    cache_frame,
    cell_text,
    columns_hint,
    correctness,
    cost_value,
    read_utf8,
    token_count,
    score_value,
    threshold_of,
)

LLMROUTERBENCH_REQUIRED = ("origin_query", "prediction", "score")


FILE_FIELDS = {"model_name": "model", "dataset_name": "domain", "split": PUBLISHED_SPLIT, "demo": "demo"}
"""The result object's own fields that apply to every record, and the column each becomes."""


def _json_records(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records of a JSON list / JSON lines / object holding a list; plus the object's `FILE_FIELDS`."""
    text = read_utf8(path)
    stripped = text.lstrip()
    file_meta: dict[str, Any] = {}
    if stripped.startswith("[") or stripped.startswith("{"):
        try:
            data = loads(text, str(path), ReplayError)
        except json.JSONDecodeError:
            data = None  # maybe JSON lines whose first record is an object
        if isinstance(data, list):
            records = data
        elif isinstance(data, dict):
            file_meta = {column: data[key] for key, column in FILE_FIELDS.items() if data.get(key) is not None}
            if data.get("model") is not None:
                file_meta["model"] = data["model"]
            lists = [k for k in ("records", "results", "data", "samples") if isinstance(data.get(k), list)]
            if lists:
                records = data[lists[0]]
            elif "origin_query" in data:
                records = [data]
            else:
                raise ReplayError(
                    f"{path}: a JSON object without a list of records (keys: {columns_hint(sorted(data))}); "
                    "expected a list, JSON lines, or an object with 'records'"
                )
        else:
            records = None
        if records is not None:
            for i, r in enumerate(records):
                if not isinstance(r, dict):
                    raise ReplayError(f"{path}: record {i}: expected a JSON object, got {type(r).__name__}")
            return records, file_meta
    try:
        return parse_json_lines(text, path), file_meta
    except InputError as e:
        refusal = ReplayError(str(e))
        refusal.exit_code = e.exit_code
        raise refusal from None


def read_llmrouterbench_json(path: Path, model_hint: str | None = None, threshold: float = SCORE_THRESHOLD) -> pl.DataFrame:
    """LLMRouterBench: records with origin_query / prediction / score / tokens / cost; `model_hint`
    (the model folder of its results tree) names the model where the records do not; a score at or
    above `threshold` is correct."""
    records, file_meta = _json_records(path)
    if not records:
        raise ReplayError(f"{path}: no records")
    file_model = file_meta.get("model")
    known = {"index", "origin_query", "prediction", "score", "prompt_tokens", "completion_tokens", "cost",
             "model", "model_name"}
    extra_keys: list[str] = []
    for r in records:
        for k in r:
            if k not in known and k not in extra_keys:
                extra_keys.append(k)
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {k: [] for k in [*extra_keys, "score"]}
    for i, r in enumerate(records):
        for key in LLMROUTERBENCH_REQUIRED:
            if key not in r:
                raise ReplayError(
                    f"{path}: record {i}: missing field {key!r} (fields: {columns_hint(sorted(r))}); {OTHER_LAYOUT}"
                )
        model = r.get("model") or r.get("model_name") or file_model or model_hint or path.stem
        rows["source_index"].append(str(r["index"]) if r.get("index") is not None else str(i))
        rows["prompt"].append(cell_text(r["origin_query"]))
        rows["model"].append(str(model))
        rows["response"].append(cell_text(r["prediction"]))
        rows["correct"].append(correctness(r["score"], path, f"record {i}, field 'score'", threshold))
        rows["tokens_in"].append(token_count(r.get("prompt_tokens"), path, f"record {i}, field 'prompt_tokens'"))
        rows["tokens_out"].append(token_count(r.get("completion_tokens"), path, f"record {i}, field 'completion_tokens'"))
        rows["cost_usd"].append(cost_value(r.get("cost"), path, f"record {i}, field 'cost'"))
        extras["score"].append(score_value(r["score"]))
        for k in extra_keys:
            v = r.get(k)
            extras[k].append(v if v is None or isinstance(v, (int, float, str, bool)) else json.dumps(v))
    frame = cache_frame(rows, extras)
    for column in ("domain", PUBLISHED_SPLIT, "demo"):  # the result object's own, where records name none
        if column in file_meta:
            own = frame[column] if column in frame.columns else pl.Series(column, [None] * frame.height)
            frame = frame.with_columns(own.fill_null(file_meta[column]).alias(column))
    return frame


def _tree_parts(file: Path, root: Path | None) -> tuple[str, str, str] | None:
    """(dataset, split, model) of a file in LLMRouterBench's results/bench/<dataset>/<split>/<model>/ tree:
    in a named folder, any file two folders deep or more; otherwise a path through `bench/`."""
    if root is not None:
        in_tree = len(file.relative_to(root).parts) >= 3
    else:
        in_tree = len(file.parts) >= 5 and file.parents[3].name == "bench"
    return (file.parents[2].name, file.parents[1].name, file.parent.name) if in_tree else None


def read_llmrouterbench_file(path: Path, options: ReadOptions) -> pl.DataFrame:
    """One results file; inside LLMRouterBench's tree its folders name the model, the split
    (`source_split`) and the domain (where the records name none)."""
    tree = _tree_parts(path, options.root)
    if tree is None:
        return read_llmrouterbench_json(path, threshold=threshold_of(options))
    frame = read_llmrouterbench_json(path, model_hint=tree[2], threshold=threshold_of(options))
    for column, value in (("domain", tree[0]), (PUBLISHED_SPLIT, tree[1])):
        own = pl.col(column).cast(pl.String) if column in frame.columns else pl.lit(None, dtype=pl.String)
        frame = frame.with_columns(own.fill_null(value).alias(column))
    return frame


def llmrouterbench_notes(frame: pl.DataFrame) -> list[str]:
    """What `dlab import` says about a loaded LLMRouterBench cache: rows of demo runs."""
    if "demo" not in frame.columns:
        return []
    demo = frame.filter(pl.col("demo").cast(pl.Boolean, strict=False).fill_null(False))
    if not demo.height:
        return []
    return [f"{demo.height} row(s) come from demo runs (`demo: true`: the first records only), which "
            "LLMRouterBench's own loader skips; name the full runs' files to leave them out"]


def newest_first(files: list[Path]) -> list[Path]:
    """Folders in path order, each folder's files by name descending: its `<timestamp>.json` runs
    newest first, so a model's latest run is the one whose answers are kept."""
    by_folder: dict[Path, list[Path]] = {}
    for p in files:
        by_folder.setdefault(p.parent, []).append(p)
    return [p for folder in sorted(by_folder) for p in sorted(by_folder[folder], key=lambda q: q.name, reverse=True)]


LLMROUTERBENCH_JSON = CacheFormat(read=read_llmrouterbench_file, suffixes=(".json", ".jsonl"), order=newest_first,
                                  notes=llmrouterbench_notes)
