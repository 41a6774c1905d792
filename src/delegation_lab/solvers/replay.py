"""The `replay` backend: answers imported from another benchmark's cache, so every policy can run on
real model outputs without calling a model.

Each cache layout is read into one normalised polars frame (`CACHE_COLUMNS`, plus extra columns a
source has, such as RouterBench's `eval_name`), one row per (question, model). Items find their row
by `normalise_question(question)`. A cache file is read and indexed once per process, keyed by its
path, size and modification time, so an edited file is read again.

A cache (`path`) is one file, a folder (every file of the format inside it, recursively) or a glob;
each row records its `source_file`, that file's `source_sha256`, and a `domain`: what the layout
says (RouterArena's dataset prefix, LLMRouterBench's dataset folder, a long table's domain column),
else the file's stem when the cache has several files, else "replay".

Supported layouts (`format`):
- `routellm_csv`: columns `prompt`, then per model `<model>` (correct: True/False) and
  `<model>_response` (RouteLLM's `gsm8k_responses.csv`); without any `_response` column, every
  other column is one model's correctness (RouteLLM's per-subject MMLU CSVs): answers are empty.
- `routerbench_pickle`: a pandas DataFrame pickle with `sample_id`, `prompt`, `eval_name` and per
  model `<model>` (score), `<model>|model_response`, `<model>|total_cost` (RouterBench). Unpickling
  runs code: refused unless trusted (`trust_pickle: true`, `dlab import --trust-pickle`).
- `llmrouterbench_json`: a JSON list, JSON lines, or an object holding a list of `records` with
  `index`, `origin_query`, `prediction`, `ground_truth`, `score`, `prompt_tokens`,
  `completion_tokens`, `cost` and `model` / `model_name` (else the file stem names the model).
  In LLMRouterBench's tree `results/bench/<dataset>/<split>/<model>/<timestamp>.json` the folders
  name the model and the domain; the newest timestamp of a model comes first (first row wins).
- `routerarena_jsonl`: RouterArena's `cached_results/<model>.jsonl` (the stem names the model):
  `global_index` (`<dataset>_<n>`), `question`, `generated_answer`, `token_usage`, `success`, and
  `evaluation_result.score` (null = unlabelled). Its `inference_cost` is ignored when 0 (RouterArena
  priced unregistered models at $0): such answers are priced from tokens.
- `long_table`: CSV, Parquet or JSON lines, one row per question x model, columns named by
  `fields` (question, model, correct or score, optional response, tokens, cost, id, domain):
  SPROUT- or EmbedLLM-style matrices.
- `parquet`: our own answers table (tables.ANSWERS_SCHEMA) with a `question` (or `prompt`) column
  joined in; correctness from `imported_correct` / `correct` columns or the `extra` JSON.

A score that is not a boolean counts as correct when it is >= 0.5 (`SCORE_THRESHOLD`); the raw
score is kept in a `score` column.
"""

from __future__ import annotations

import ast
import glob
import hashlib
import json
import math
import re
import textwrap
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.config import PRICE_TODO, LongTableFields, Price, ReplayParams
from delegation_lab.data.sources import numbered_json_lines, parse_json_lines
from delegation_lab.errors import InputError
from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.pricing import estimate_tokens, messages_tokens

FORMATS = ("routellm_csv", "routerbench_pickle", "llmrouterbench_json", "routerarena_jsonl", "long_table", "parquet")
SUFFIXES = {
    "routellm_csv": (".csv",),
    "routerbench_pickle": (".pkl", ".pickle"),
    "llmrouterbench_json": (".json", ".jsonl"),
    "routerarena_jsonl": (".jsonl",),
    "long_table": (".csv", ".parquet", ".jsonl"),
    "parquet": (".parquet",),
}
"""The files of a folder or glob that a format reads."""

CACHE_COLUMNS: dict[str, pl.DataType] = {
    "source_index": pl.String,
    "prompt": pl.String,
    "model": pl.String,
    "response": pl.String,
    "correct": pl.Boolean,
    "tokens_in": pl.Int64,
    "tokens_out": pl.Int64,
    "cost_usd": pl.Float64,
}

SCORE_THRESHOLD = 0.5
"""A float score (RouterBench, LLMRouterBench) at or above this counts as a correct answer."""


class ReplayError(InputError):
    """A cache file that cannot be replayed; the message names the file, the key and what exists."""


# ------------------------------------------------------------------------------- question keys

_QUOTES = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\u00b4": "'", "`": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
})


def normalise_question(text: str) -> str:
    """The key items and cache rows are matched by: NFKC, straight quotes, lowercase, single spaces."""
    text = unicodedata.normalize("NFKC", text or "").translate(_QUOTES)
    return " ".join(text.lower().split())


# ------------------------------------------------------------------------------------- readers


def _columns_hint(columns: list[str], limit: int = 30) -> str:
    shown = ", ".join(repr(c) for c in columns[:limit])
    more = f", ... ({len(columns) - limit} more)" if len(columns) > limit else ""
    return f"[{shown}{more}]"


def _missing(path: Path, what: str, missing: str, have: list[str], fix: str = "") -> ReplayError:
    return ReplayError(f"{path}: {what} has no column {missing!r} (columns: {_columns_hint(have)}){fix}")


def _text(value: Any) -> str | None:
    """A cell as text: None / NaN -> None; a list of strings (RouterBench) -> joined paragraphs."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple)):
        parts = [p for p in (_text(v) for v in value) if p is not None]
        return "\n\n".join(parts)
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays
        return _text(value.tolist())
    return str(value)


def _unwrap_list_text(text: str | None) -> str | None:
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


_TRUE = {"true", "t", "yes", "y", "1", "1.0", "correct"}
_FALSE = {"false", "f", "no", "n", "0", "0.0", "incorrect", "wrong"}


def _bool_label(value: Any, path: Path, where: str) -> bool | None:
    """True / False from a boolean-ish cell; None when empty."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return None
        return bool(value >= SCORE_THRESHOLD)
    s = str(value).strip().lower()
    if not s or s in ("nan", "none", "null"):
        return None
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    try:
        return float(s) >= SCORE_THRESHOLD
    except ValueError:
        raise ReplayError(f"{path}: {where}: correctness value {value!r} is not True/False or a score") from None


def _score(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else int(round(f))


def _float_or_none(value: Any) -> float | None:
    return _score(value)


def _frame(rows: dict[str, list[Any]], extras: dict[str, list[Any]] | None = None) -> pl.DataFrame:
    df = pl.DataFrame(rows, schema=CACHE_COLUMNS)
    for name, values in (extras or {}).items():
        if name in CACHE_COLUMNS:
            continue
        try:
            series = pl.Series(name, values, strict=False)
        except (TypeError, ValueError, pl.exceptions.PolarsError):
            series = pl.Series(name, [_text(v) for v in values], dtype=pl.String)
        if series.dtype == pl.Object:
            series = pl.Series(name, [_text(v) for v in values], dtype=pl.String)
        df = df.with_columns(series)
    return df


def read_routellm_csv(path: Path) -> pl.DataFrame:
    """RouteLLM: `prompt` + `<model>` (True/False) + `<model>_response` per model."""
    try:
        raw = pl.read_csv(path, infer_schema=False)  # every cell as text; quoted newlines kept
    except pl.exceptions.PolarsError as e:
        raise ReplayError(f"{path}: not a readable CSV ({e})") from None
    columns = raw.columns
    if "prompt" not in columns:
        raise _missing(path, "the RouteLLM CSV", "prompt", columns)
    models = [c for c in columns if c != "prompt" and f"{c}_response" in columns]
    labels_only = not any(c.endswith("_response") for c in columns)
    if labels_only:  # RouteLLM's per-subject MMLU CSVs: prompt, then one True/False column per model
        models = [c for c in columns if c != "prompt"]
    if not models:
        raise ReplayError(
            f"{path}: the RouteLLM CSV has no model: expected '<model>' True/False correctness columns, "
            f"optionally each beside a '<model>_response' column (columns: {_columns_hint(columns)})"
        )
    used = {"prompt", *models, *(f"{m}_response" for m in models)}
    extra_cols = [c for c in columns if c not in used]
    prompts = raw["prompt"].to_list()
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
            rows["correct"].append(_bool_label(labels[i], path, f"row {i + 2}, column {model!r}"))
            rows["tokens_in"].append(None)
            rows["tokens_out"].append(None)
            rows["cost_usd"].append(None)
        for c in extra_cols:
            extras[c].extend(raw[c].to_list())
    return _frame(rows, extras)


ROUTERBENCH_META = ("sample_id", "prompt", "eval_name", "oracle_model_to_route_to")


def read_routerbench_pickle(path: Path) -> pl.DataFrame:
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
        raise _missing(path, "the RouterBench pickle", "prompt", columns)
    models = [c for c in columns if "|" not in c and f"{c}|model_response" in columns]
    if not models:
        raise ReplayError(
            f"{path}: the RouterBench pickle has no model: expected '<model>' score columns next to "
            f"'<model>|model_response' columns (columns: {_columns_hint(columns)})"
        )
    model_cols = {c for m in models for c in columns if c == m or c.startswith(f"{m}|")}
    extra_cols = [c for c in columns if c not in model_cols and c not in ("prompt", "sample_id")]
    n = len(raw)
    ids = [_text(v) for v in raw["sample_id"].tolist()] if "sample_id" in columns else [str(i) for i in range(n)]
    prompts = [_unwrap_list_text(_text(v)) for v in raw["prompt"].tolist()]
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
            rows["response"].append(_unwrap_list_text(_text(responses[i])))
            rows["correct"].append(_bool_label(scores[i], path, f"row {i}, column {model!r}"))
            rows["tokens_in"].append(None)
            rows["tokens_out"].append(None)
            rows["cost_usd"].append(_float_or_none(costs[i]))
            extras["score"].append(_score(scores[i]))
        for c in extra_cols:
            extras[c].extend(extra_values[c])
    return _frame(rows, extras)


LLMROUTERBENCH_REQUIRED = ("origin_query", "prediction", "score")


def _json_records(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """Records of a JSON list / JSON lines / object holding a list; plus a file-level model name."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    file_model = None
    if stripped.startswith("[") or stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None  # maybe JSON lines whose first record is an object
        if isinstance(data, list):
            records = data
        elif isinstance(data, dict):
            file_model = data.get("model") or data.get("model_name")
            lists = [k for k in ("records", "results", "data", "samples") if isinstance(data.get(k), list)]
            if lists:
                records = data[lists[0]]
            elif "origin_query" in data:
                records = [data]
            else:
                raise ReplayError(
                    f"{path}: a JSON object without a list of records (keys: {_columns_hint(sorted(data))}); "
                    "expected a list, JSON lines, or an object with 'records'"
                )
        else:
            records = None
        if records is not None:
            for i, r in enumerate(records):
                if not isinstance(r, dict):
                    raise ReplayError(f"{path}: record {i}: expected a JSON object, got {type(r).__name__}")
            return records, file_model
    try:
        return parse_json_lines(text, path), file_model
    except InputError as e:
        raise ReplayError(str(e)) from None


def read_llmrouterbench_json(path: Path, model_hint: str | None = None) -> pl.DataFrame:
    """LLMRouterBench: records with origin_query / prediction / score / tokens / cost; `model_hint`
    (the model folder of its results tree) names the model where the records do not."""
    records, file_model = _json_records(path)
    if not records:
        raise ReplayError(f"{path}: no records")
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
                    f"{path}: record {i}: missing field {key!r} (fields: {_columns_hint(sorted(r))})"
                )
        model = r.get("model") or r.get("model_name") or file_model or model_hint or path.stem
        rows["source_index"].append(str(r["index"]) if r.get("index") is not None else str(i))
        rows["prompt"].append(_text(r["origin_query"]))
        rows["model"].append(str(model))
        rows["response"].append(_text(r["prediction"]))
        rows["correct"].append(_bool_label(r["score"], path, f"record {i}, field 'score'"))
        rows["tokens_in"].append(_int_or_none(r.get("prompt_tokens")))
        rows["tokens_out"].append(_int_or_none(r.get("completion_tokens")))
        rows["cost_usd"].append(_float_or_none(r.get("cost")))
        extras["score"].append(_score(r["score"]))
        for k in extra_keys:
            v = r.get(k)
            extras[k].append(v if v is None or isinstance(v, (int, float, str, bool)) else json.dumps(v))
    return _frame(rows, extras)


def read_answers_parquet(path: Path) -> pl.DataFrame:
    """Our own answers table with the question text joined in (column `question` or `prompt`)."""
    try:
        raw = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as e:
        raise ReplayError(f"{path}: not a readable Parquet file ({e})") from None
    columns = raw.columns
    prompt_col = next((c for c in ("question", "prompt") if c in columns), None)
    if prompt_col is None:
        raise _missing(
            path, "the answers table", "question", columns,
            "; join the items' question text first, e.g. dlab query \"SELECT a.*, i.question FROM answers a "
            "JOIN items i USING (item_id)\"",
        )
    response_col = next((c for c in ("answer_text", "response") if c in columns), None)
    if response_col is None:
        raise _missing(path, "the answers table", "answer_text", columns)
    model_col = next((c for c in ("model", "solver") if c in columns), None)
    if model_col is None:
        raise _missing(path, "the answers table", "model", columns)
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
        labels.append(_bool_label(value, path, f"row {i}"))
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
    return _frame(rows, extras)


def _numbered_json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of every non-blank line; a bad line fails naming file and line."""
    return numbered_json_lines(path.read_text(encoding="utf-8"), path, ReplayError)


ROUTERARENA_REQUIRED = ("global_index", "question", "generated_answer")


def _routerarena_domain(global_index: str) -> str | None:
    """RouterArena's global index is `<dataset>_<n>`: the dataset is the domain."""
    head, sep, tail = global_index.rpartition("_")
    return head if sep and head else None


def read_routerarena_jsonl(path: Path) -> pl.DataFrame:
    """RouterArena: cached_results/<model>.jsonl, one record per question, scored in evaluation_result."""
    records = _numbered_json_lines(path)
    if not records:
        raise ReplayError(f"{path}: no records")
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {"domain": [], "score": [], "ground_truth": []}
    for lineno, r in records:
        where = f"{path}: line {lineno}"
        for key in ROUTERARENA_REQUIRED:
            if key not in r:
                raise ReplayError(f"{where}: missing field {key!r} (fields: {_columns_hint(sorted(r))})")
        usage = r.get("token_usage") or {}
        result = r.get("evaluation_result")
        if not isinstance(usage, dict) or not (result is None or isinstance(result, dict)):
            raise ReplayError(f"{where}: 'token_usage' and 'evaluation_result' must be JSON objects or null")
        result = result or {}
        failed = r.get("success") is False
        cost = _float_or_none(result.get("inference_cost"))
        index = str(r["global_index"])
        rows["source_index"].append(index)
        rows["prompt"].append(_text(r["question"]))
        rows["model"].append(path.stem)
        rows["response"].append(None if failed else _text(r["generated_answer"]))
        rows["correct"].append(None if failed else _bool_label(result.get("score"), path, f"line {lineno}, field 'evaluation_result.score'"))
        rows["tokens_in"].append(_int_or_none(usage.get("input_tokens")))
        rows["tokens_out"].append(_int_or_none(usage.get("output_tokens")))
        rows["cost_usd"].append(cost if cost else None)  # a $0 cost is RouterArena's unregistered-model default
        extras["domain"].append(_routerarena_domain(index))
        extras["score"].append(_score(result.get("score")))
        extras["ground_truth"].append(_text(result.get("ground_truth")))
    return _frame(rows, extras)


def _read_table_file(path: Path) -> pl.DataFrame:
    try:
        if path.suffix == ".parquet":
            return pl.read_parquet(path)
        if path.suffix == ".csv":
            return pl.read_csv(path, infer_schema=False)
    except pl.exceptions.PolarsError as e:
        raise ReplayError(f"{path}: not a readable {path.suffix[1:]} table ({e})") from None
    return pl.DataFrame([r for _, r in _numbered_json_lines(path)], infer_schema_length=None)


def read_long_table(path: Path, fields: LongTableFields) -> pl.DataFrame:
    """One row per question x model; columns named by `fields` (explicitly named ones must exist)."""
    raw = _read_table_file(path)
    columns = raw.columns
    explicit = fields.model_fields_set
    for name in explicit:
        column = getattr(fields, name)
        if column is not None and column not in columns:
            raise _missing(path, f"the long table (fields.{name})", column, columns)
    for name in ("question", "model"):
        if getattr(fields, name) not in columns:
            raise _missing(path, "the long table", getattr(fields, name), columns, f"; set fields.{name}")

    def col(name: str) -> str | None:
        column = getattr(fields, name)
        return column if column is not None and column in columns else None

    label_cols = [c for c in (col("correct"), col("score")) if c]
    if not label_cols:
        raise ReplayError(
            f"{path}: the long table has neither a correctness column ({fields.correct!r}) nor a score column "
            f"({fields.score!r}) (columns: {_columns_hint(columns)}); set fields.correct or fields.score"
        )
    n = raw.height
    values = {name: (raw[c].to_list() if (c := col(name)) else [None] * n)
              for name in ("question", "model", "correct", "score", "response", "tokens_in", "tokens_out", "cost_usd", "id", "domain")}
    line = (lambda i: f"row {i + 2}") if path.suffix == ".csv" else (lambda i: f"row {i + 1}")
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {"domain": [], "score": []}
    for i in range(n):
        model = _text(values["model"][i])
        if not model:
            raise ReplayError(f"{path}: {line(i)}: column {fields.model!r} is empty")
        label = _bool_label(values["correct"][i], path, f"{line(i)}, column {fields.correct!r}")
        if label is None:
            label = _bool_label(values["score"][i], path, f"{line(i)}, column {fields.score!r}")
        raw_id = _text(values["id"][i])
        rows["source_index"].append(raw_id if raw_id is not None else str(i))
        rows["prompt"].append(_text(values["question"][i]))
        rows["model"].append(model)
        rows["response"].append(_text(values["response"][i]) if col("response") else "")
        rows["correct"].append(label)
        rows["tokens_in"].append(_int_or_none(values["tokens_in"][i]))
        rows["tokens_out"].append(_int_or_none(values["tokens_out"][i]))
        rows["cost_usd"].append(_float_or_none(values["cost_usd"][i]))
        extras["domain"].append(_text(values["domain"][i]))
        extras["score"].append(_score(values["score"][i]))
    return _frame(rows, extras)


READERS = {
    "routellm_csv": read_routellm_csv,
    "routerbench_pickle": read_routerbench_pickle,
    "llmrouterbench_json": read_llmrouterbench_json,
    "routerarena_jsonl": read_routerarena_jsonl,
    "long_table": read_long_table,
    "parquet": read_answers_parquet,
}


# ----------------------------------------------------------------------------- the loaded cache


@dataclass
class ModelIndex:
    """One model's answers by question key (first row wins) and how many duplicates were skipped."""

    rows: dict[str, dict[str, Any]]
    n_rows: int
    duplicates: int


@dataclass
class ReplayCache:
    """A cache read once: its normalised frame (with `key`, `domain`, `source_file`, `source_sha256`
    columns), its files with their sha256, and per-model indexes."""

    path: Path
    format: str
    sha256: str
    frame: pl.DataFrame
    files: list[tuple[str, str]] = field(default_factory=list)
    _indexes: dict[str, ModelIndex] = field(default_factory=dict)

    @property
    def models(self) -> list[str]:
        return self.frame["model"].unique(maintain_order=True).to_list()

    def model_frame(self, model: str) -> pl.DataFrame:
        """The rows of one model; for our own answers a solver name works too."""
        rows = self.frame.filter(pl.col("model") == model)
        if rows.height == 0 and "solver" in self.frame.columns:
            rows = self.frame.filter(pl.col("solver") == model)
        if rows.height == 0:
            extra = ""
            if "solver" in self.frame.columns:
                extra = f" (solvers: {self.frame['solver'].unique(maintain_order=True).to_list()})"
            raise ReplayError(
                f"{self.path}: no model {model!r} in this {self.format} cache; models: {self.models}{extra}"
            )
        return rows

    def index(self, model: str) -> ModelIndex:
        if model not in self._indexes:
            rows = self.model_frame(model)
            first = rows.unique(subset="key", keep="first", maintain_order=True)
            self._indexes[model] = ModelIndex(
                rows={r["key"]: r for r in first.iter_rows(named=True)},
                n_rows=rows.height,
                duplicates=rows.height - first.height,
            )
        return self._indexes[model]


_LOADED: dict[tuple[Any, ...], ReplayCache] = {}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_GLOB = re.compile(r"[*?\[]")


def cache_files(path: str | Path, fmt: str) -> list[Path]:
    """The files a cache names: the file itself, or every file of the format in a folder or glob.

    Sorted by path; for LLMRouterBench the names in one folder sort newest first (its
    `<timestamp>.json`), so a model's latest run is the one whose answers are kept.
    """
    text = str(path)
    if _GLOB.search(text):
        found = [Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file()]
        what = f"the glob {text!r}"
    elif Path(text).is_dir():
        found = [p for p in Path(text).rglob("*") if p.is_file() and p.suffix in SUFFIXES[fmt]
                 and not any(part.startswith(".") for part in p.relative_to(text).parts)]
        what = f"the folder {text}"
    else:
        if not Path(text).exists():
            raise ReplayError(f"{text}: replay cache not found (check the `path` of the replay section)")
        return [Path(text)]
    if not found:
        raise ReplayError(f"{text}: {what} holds no {fmt} files ({', '.join('*' + x for x in SUFFIXES[fmt])})")
    if fmt != "llmrouterbench_json":
        return sorted(found)
    by_folder: dict[Path, list[Path]] = {}
    for p in found:
        by_folder.setdefault(p.parent, []).append(p)
    return [p for folder in sorted(by_folder) for p in sorted(by_folder[folder], key=lambda q: q.name, reverse=True)]


def _stat_key(files: list[Path], spec: str, fmt: str, fields: LongTableFields | None) -> tuple[Any, ...]:
    stats = []
    for p in files:
        try:
            st = p.stat()
        except FileNotFoundError:
            raise ReplayError(f"{p}: replay cache file not found (check the `path` of the replay section)") from None
        stats.append((str(p.resolve()), st.st_mtime_ns, st.st_size))
    return (spec, fmt, fields.model_dump_json() if fields else None, tuple(stats))


def _tree_parts(file: Path, root: Path | None) -> tuple[str, str, str] | None:
    """(dataset, split, model) of a file in LLMRouterBench's results/bench/<dataset>/<split>/<model>/ tree:
    in a named folder, any file two folders deep or more; otherwise a path through `bench/`."""
    if root is not None:
        in_tree = len(file.relative_to(root).parts) >= 3
    else:
        in_tree = len(file.parts) >= 5 and file.parents[3].name == "bench"
    return (file.parents[2].name, file.parents[1].name, file.parent.name) if in_tree else None


def _read_one(file: Path, fmt: str, fields: LongTableFields | None, root: Path | None, several: bool) -> pl.DataFrame:
    tree = _tree_parts(file, root) if fmt == "llmrouterbench_json" else None
    if fmt == "long_table":
        frame = read_long_table(file, fields or LongTableFields())
    elif tree is not None:
        frame = read_llmrouterbench_json(file, model_hint=tree[2]).with_columns(pl.lit(tree[1]).alias("source_split"))
    else:
        frame = READERS[fmt](file)
    fallback = tree[0] if tree else (file.stem if several else "replay")
    domain = pl.col("domain").cast(pl.String) if "domain" in frame.columns else pl.lit(None, dtype=pl.String)
    frame = frame.with_columns(
        domain.fill_null(fallback).alias("domain"),
        pl.lit(str(file)).alias("source_file"),
        pl.lit(file_sha256(file)).alias("source_sha256"),
    )
    if several:  # source indexes restart in every file: keep them unique across the cache
        frame = frame.with_columns((pl.lit(f"{file.stem}#") + pl.col("source_index")).alias("source_index"))
    return frame


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    try:
        return pl.concat(frames, how="diagonal_relaxed")
    except pl.exceptions.PolarsError:  # extra columns of clashing types across files: keep them as text
        extra = {c for f in frames for c in f.columns if c not in CACHE_COLUMNS}
        return pl.concat([f.with_columns([pl.col(c).cast(pl.String) for c in extra if c in f.columns]) for f in frames],
                         how="diagonal_relaxed")


PICKLE_WARNING = (
    "unpickling runs arbitrary code: a RouterBench .pkl can do anything your user can (delete files, "
    "read keys, open connections). Load only a pickle you trust, e.g. one you downloaded yourself from "
    "RouterBench's own release and checked against its published hash."
)


def load_cache(path: str | Path, fmt: str, fields: LongTableFields | None = None, trust_pickle: bool = False) -> ReplayCache:
    """The normalised cache of a file, folder or glob, read once per process (again when a file
    changes). A pickle is refused unless `trust_pickle` (checked before any file is opened)."""
    spec = str(path)
    if fmt not in READERS:
        raise ReplayError(f"{spec}: unknown replay format {fmt!r}; use one of {list(FORMATS)}")
    if fmt == "routerbench_pickle" and not trust_pickle:
        raise ReplayError(f"{spec}: not loaded: {PICKLE_WARNING} If you trust this file, pass --trust-pickle "
                          "(dlab import) or set `trust_pickle: true` in its replay section of params.yaml.")
    files = cache_files(spec, fmt)
    key = _stat_key(files, spec, fmt, fields)
    cached = _LOADED.get(key)
    if cached is not None:
        return cached
    several = len(files) > 1 or Path(spec).is_dir() or bool(_GLOB.search(spec))
    root = Path(spec) if Path(spec).is_dir() else None
    frame = _concat([_read_one(f, fmt, fields, root, several) for f in files])
    if frame.height == 0:
        raise ReplayError(f"{spec}: the {fmt} cache has no rows")
    bad = frame.filter(pl.col("prompt").is_null())
    if bad.height:
        raise ReplayError(
            f"{bad['source_file'][0]}: {bad.height} row(s) have an empty prompt (e.g. source index {bad['source_index'][0]!r})"
        )
    distinct = frame["prompt"].unique().to_list()
    keys = {p: normalise_question(p) for p in distinct}
    frame = frame.with_columns(pl.col("prompt").replace_strict(keys, return_dtype=pl.String).alias("key"))
    for old in [k for k in _LOADED if k[0] == spec and k[1] == fmt]:
        del _LOADED[old]
    shas = [(str(f), sha) for f, sha in frame.select("source_file", "source_sha256").unique(maintain_order=True).iter_rows()]
    sha = shas[0][1] if not several else hashlib.sha256("\n".join(f"{f} {h}" for f, h in shas).encode()).hexdigest()
    cache = ReplayCache(path=Path(spec), format=fmt, sha256=sha, frame=frame, files=shas)
    _LOADED[key] = cache
    return cache


def read_cache(path: str | Path, fmt: str, fields: LongTableFields | None = None, trust_pickle: bool = False) -> pl.DataFrame:
    """The normalised frame of a cache (`CACHE_COLUMNS`, extra columns, provenance, and `key`)."""
    return load_cache(path, fmt, fields, trust_pickle).frame


# ----------------------------------------------------------------------------------- backend


class ReplayBackend:
    """Answers each request with the cache's answer of `source_model` to the same question."""

    def __init__(self, params: ReplayParams, price: Price):
        if params is None:
            raise ReplayError("backend is 'replay' but the solver has no `replay:` section (path, format, source_model)")
        self.params = params
        self.price = price
        self.path = Path(params.path)

    def cache(self) -> ReplayCache:
        return load_cache(self.params.path, self.params.format, self.params.fields, self.params.trust_pickle)

    def fingerprint(self) -> dict[str, Any]:
        return {
            "format": self.params.format,
            "source_model": self.params.source_model,
            "sha256": self.cache().sha256,
        }

    def generate(self, requests: list[Request]) -> list[Generation]:
        index = self.cache().index(self.params.source_model)
        return [self._generation(r, index) for r in requests]

    def _generation(self, request: Request, index: ModelIndex) -> Generation:
        row = index.rows.get(normalise_question(request.item.question))
        if row is None:
            return Generation(text=None, error=f"no answer in replay cache {self.path} for this question")
        extra: dict[str, Any] = {
            "replay_source_index": row["source_index"],
            # provenance: which file (and which bytes) the answer came from, whose it is, and the price's source
            "replay_source_file": row["source_file"],
            "replay_source_sha256": row["source_sha256"],
            "replay_source_model": row["model"],
            "price_source": self.price.source,
        }
        if row["correct"] is not None:
            extra["imported_correct"] = bool(row["correct"])
        response = row["response"]
        if response is None:
            return Generation(
                text=None, extra=extra,
                error=f"replay cache {self.path} has no response of {self.params.source_model} for this question",
            )
        tokens_in, tokens_out = row["tokens_in"], row["tokens_out"]
        if tokens_in is None or tokens_out is None:
            extra["tokens_estimated"] = True
            if tokens_in is None:
                tokens_in = messages_tokens(request.messages)
            if tokens_out is None:
                tokens_out = estimate_tokens(response)
        return Generation(
            text=response, tokens_in=int(tokens_in), tokens_out=int(tokens_out),
            cost_usd=row["cost_usd"], extra=extra,
        )


# ------------------------------------------------------------------------------ import report


def solver_name_for(model: str, taken: set[str]) -> str:
    """A valid params.yaml solver name (letter first, [A-Za-z0-9_-], <= 32 chars) for a model id."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", model.rsplit("/", 1)[-1]).strip("-_") or "model"
    if not base[0].isalpha():
        base = "m-" + base
    base = base[:32]
    name, k = base, 2
    while name in taken:
        suffix = f"-{k}"
        name, k = base[: 32 - len(suffix)] + suffix, k + 1
    taken.add(name)
    return name


def _read_items_questions(items_dir: Path) -> tuple[dict[str, int], dict[str, str]]:
    """Counts of items per split and the normalised question -> split of every item."""
    counts: dict[str, int] = {}
    keys: dict[str, str] = {}
    for split in ("ability", "train", "test"):
        p = items_dir / f"{split}.parquet"
        if not p.exists():
            continue
        df = pl.read_parquet(p, columns=["question"])
        counts[split] = df.height
        for q in df["question"].to_list():
            keys.setdefault(normalise_question(q or ""), split)
    return counts, keys


def _short(text: str, n: int = 90) -> str:
    return textwrap.shorten(" ".join((text or "").split()), width=n, placeholder=" …")


def import_report(path: Path, format: str, items_dir: Path, fields: LongTableFields | None = None,
                  trust_pickle: bool = False) -> str:
    """What `dlab import` prints: files, domains, models, match against our items, a params.yaml snippet."""
    cache = load_cache(path, format, fields, trust_pickle)
    frame = cache.frame
    lines = [
        f"replay cache: {path}",
        f"  format {format}, {len(cache.files)} file(s), {frame.height} rows, {frame['key'].n_unique()} distinct "
        f"questions, sha256 {cache.sha256[:16]}…",
    ]
    domains = frame.group_by("domain", maintain_order=True).agg(pl.col("key").n_unique().alias("n"))
    if domains.height > 1:
        shown = ", ".join(f"{d} {n}" for d, n in domains.head(12).iter_rows())
        lines.append(f"  domains ({domains.height}): {shown}{', ...' if domains.height > 12 else ''}")
    lines += ["", f"models ({len(cache.models)}):"]
    stats: dict[str, dict[str, Any]] = {}
    for model in cache.models:
        idx = cache.index(model)
        rows = cache.model_frame(model)
        labelled = [r["correct"] for r in idx.rows.values() if r["correct"] is not None]  # as replayed
        acc = sum(labelled) / len(labelled) if labelled else None
        missing_tokens = int((rows["tokens_in"].is_null() | rows["tokens_out"].is_null()).sum())
        has_cost = int(rows["cost_usd"].is_not_null().sum())
        no_response = int(rows["response"].is_null().sum())
        stats[model] = {"acc": acc, "has_cost": has_cost, "questions": len(idx.rows)}
        acc_text = f"imported accuracy {acc:.1%} ({len(labelled)} labelled questions)" if acc is not None else "no labels"
        lines.append(
            f"  {model}: {idx.n_rows} rows, {len(idx.rows)} distinct questions, {idx.duplicates} duplicate(s) "
            f"(first kept), {acc_text}"
        )
        if no_response:
            lines.append(f"      {no_response} row(s) without a response (replayed as error rows)")
        if missing_tokens:
            est_in = sum(estimate_tokens(p) for p in rows["prompt"].to_list()) / rows.height
            est_out = sum(estimate_tokens(r) for r in rows["response"].to_list()) / rows.height
            lines.append(
                f"      token counts missing on {missing_tokens} row(s): estimated at ~4 chars/token, "
                f"mean ~{est_in:.0f} in (question alone; the prompt template adds some) / ~{est_out:.0f} out"
            )
        lines.append(
            f"      cost: {'from the cache on ' + str(has_cost) + ' row(s)' if has_cost else 'none in the cache (priced from tokens with price)'}"
        )

    lines.append("")
    counts, item_keys = _read_items_questions(Path(items_dir))
    if not counts:
        lines.append(
            f"items: none in {items_dir} ({{ability,train,test}}.parquet); matching skipped. "
            "Run `dvc repro prepare` first, or use `data.dataset: replay` to make the cache its own dataset."
        )
    else:
        total = sum(counts.values())
        lines.append(
            f"items in {items_dir}: " + ", ".join(f"{s} {n}" for s, n in counts.items()) + f" ({total} in all)"
        )
        cache_keys = frame.select("key", "prompt").unique(subset="key", keep="first", maintain_order=True)
        matched_mask = [k in item_keys for k in cache_keys["key"].to_list()]
        n_matched = sum(matched_mask)
        n_unmatched = cache_keys.height - n_matched
        by_split: dict[str, int] = {}
        for k, m in zip(cache_keys["key"].to_list(), matched_mask, strict=True):
            if m:
                by_split[item_keys[k]] = by_split.get(item_keys[k], 0) + 1
        lines.append(
            f"  matched: {n_matched} of {cache_keys.height} distinct cache questions "
            f"({', '.join(f'{s} {n}' for s, n in by_split.items()) or 'none'})"
        )
        lines.append(f"  unmatched: {n_unmatched} cache question(s) match no item (they are not replayed)")
        unmatched_prompts = [p for p, m in zip(cache_keys["prompt"].to_list(), matched_mask, strict=True) if not m]
        for p in unmatched_prompts[:3]:
            lines.append(f"    e.g. \"{_short(p)}\"")
        for model in cache.models:
            idx = cache.index(model)
            covered = sum(k in idx.rows for k in item_keys)
            lines.append(
                f"  {model}: answers {covered} of {len(item_keys)} items; "
                f"{len(item_keys) - covered} item(s) without an answer become error rows"
            )

    lines += ["", "params.yaml entries that replay this cache (merge into `solvers:`; replace every TODO "
              "with the model's real price and where it comes from: `dlab params check` refuses a TODO, "
              "and a 0 price needs `free: true`):", "solvers:"]
    taken: set[str] = set()
    chosen = fields.model_dump(include=fields.model_fields_set) if fields is not None and format == "long_table" else {}
    mapping = f", fields: {json.dumps(chosen)}" if chosen else ""
    for model in cache.models:
        name = solver_name_for(model, taken)
        s = stats[model]
        acc = f", imported accuracy {s['acc']:.1%}" if s["acc"] is not None else ""
        price_note = (
            "US$ per 1M tokens: used only where the cache has no cost"
            if s["has_cost"] else "US$ per 1M tokens of this model"
        )
        lines += [
            f"  {name}:  # {model}: answers {s['questions']} questions{acc}",
            "    backend: replay",
            f"    model: {json.dumps(model)}",
            f"    price: {{input_usd_per_mtok: {PRICE_TODO}, output_usd_per_mtok: {PRICE_TODO}, source: {PRICE_TODO}}}"
            f"  # {price_note}; source: the price list and its date",
            f"    replay: {{path: {json.dumps(str(path))}, format: {format}, source_model: {json.dumps(model)}{mapping}"
            + (", trust_pickle: true}  # only for a pickle you trust" if format == "routerbench_pickle" else "}"),
        ]
    return "\n".join(lines)
