"""What every replay reader shares: the normalised row (`CACHE_COLUMNS`), the error that names
the file, the cell parsers (text, correctness, numbers), and `CacheFormat`, the record one format
module registers in `solvers.replay.FORMATS`."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.data.sources import numbered_json_lines
from delegation_lab.errors import InputError
from delegation_lab.solvers.params import SCORE_THRESHOLD, LongTableFields

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
"""The columns every reader's frame has, one row per (question, model); a reader may add more (a
`domain`, a `score`, the source's own columns)."""

class ReplayError(InputError):
    """A cache file that cannot be replayed; the message names the file, the key and what exists."""


@dataclass(frozen=True)
class ReadOptions:
    """What a reader may need beyond the file: the long table's column names, the folder the cache
    was named by (None for a file or a glob), whose tree some layouts give meaning to, and the score
    at or above which an answer counts as correct."""

    fields: LongTableFields
    root: Path | None
    score_threshold: float = SCORE_THRESHOLD


@dataclass(frozen=True)
class CacheFormat:
    """One replay layout, as its module registers it in `solvers.replay.FORMATS`."""

    read: Callable[[Path, ReadOptions], pl.DataFrame]
    """One file -> a frame with `CACHE_COLUMNS` first (`cache_frame` builds it)."""
    suffixes: tuple[str, ...]
    """The files of a folder that belong to the cache."""
    order: Callable[[list[Path]], list[Path]] = sorted
    """The reading order of a folder's or a glob's files (a model's first row of a question wins)."""
    trust_warning: str | None = None
    """Why loading such a file runs code (unpickling): the cache is refused unless trusted."""
    belongs: Callable[[Path], bool] | None = None
    """Which files of a folder or glob (with one of `suffixes`) are the cache's, where a layout's tree
    holds other files of the same suffix (LLMRouter's price table beside its score files)."""
    notes: Callable[[pl.DataFrame], list[str]] | None = None
    """Lines `dlab import` adds about a loaded cache of this layout: what it lacks (no answer text),
    what its join left unmatched."""


def columns_hint(columns: list[str], limit: int = 30) -> str:
    shown = ", ".join(repr(c) for c in columns[:limit])
    more = f", ... ({len(columns) - limit} more)" if len(columns) > limit else ""
    return f"[{shown}{more}]"


def missing_column(path: Path, what: str, missing: str, have: list[str], fix: str = "") -> ReplayError:
    return ReplayError(f"{path}: {what} has no column {missing!r} (columns: {columns_hint(have)}){fix}")


def cell_text(value: Any) -> str | None:
    """A cell as text: None / NaN -> None; a list of strings (RouterBench) -> joined paragraphs."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple)):
        parts = [p for p in (cell_text(v) for v in value) if p is not None]
        return "\n\n".join(parts)
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays
        return cell_text(value.tolist())
    return str(value)


_TRUE = {"true", "t", "yes", "y", "1", "1.0", "correct"}
_FALSE = {"false", "f", "no", "n", "0", "0.0", "incorrect", "wrong"}


def correctness(value: Any, path: Path, where: str, threshold: float = SCORE_THRESHOLD) -> bool | None:
    """True / False from a boolean-ish cell or a score (correct at or above `threshold`); None when empty."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return None
        return bool(value >= threshold)
    s = str(value).strip().lower()
    if not s or s in ("nan", "none", "null"):
        return None
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    try:
        return float(s) >= threshold
    except ValueError:
        raise ReplayError(f"{path}: {where}: correctness value {value!r} is not True/False or a score") from None


def threshold_of(options: ReadOptions | None) -> float:
    """The score at or above which an answer counts as correct (a reader called without options: 0.5)."""
    return options.score_threshold if options is not None else SCORE_THRESHOLD


def unit_score(value: Any, path: Path, where: str) -> float | None:
    """A score that must lie in [0, 1] (a pass rate, an F1, a 0/1 match); None when empty; anything
    else (out of range, not a number) fails naming the file and the record."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    try:
        f = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        if isinstance(value, str) and not value.strip():
            return None
        raise ReplayError(f"{path}: {where}: score {value!r} is not a number") from None
    if math.isnan(f):
        return None
    if not 0.0 <= f <= 1.0:
        raise ReplayError(f"{path}: {where}: score {value!r} is outside [0, 1]")
    return f


def score_value(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else int(round(f))


def float_or_none(value: Any) -> float | None:
    return score_value(value)


def cache_frame(rows: dict[str, list[Any]], extras: dict[str, list[Any]] | None = None) -> pl.DataFrame:
    df = pl.DataFrame(rows, schema=CACHE_COLUMNS)
    for name, values in (extras or {}).items():
        if name in CACHE_COLUMNS:
            continue
        try:
            series = pl.Series(name, values, strict=False)
        except (TypeError, ValueError, pl.exceptions.PolarsError):
            series = pl.Series(name, [cell_text(v) for v in values], dtype=pl.String)
        if series.dtype == pl.Object:
            series = pl.Series(name, [cell_text(v) for v in values], dtype=pl.String)
        df = df.with_columns(series)
    return df


def file_model(path: Path) -> str:
    """The model a one-file-per-model cache names: the file's name less its suffixes (`m.json.gz` -> m)."""
    return path.name.removesuffix(".gz").removesuffix(path.with_suffix("").suffix if path.suffix == ".gz" else path.suffix)


def json_list(path: Path, what: str) -> list[Any]:
    """A file holding one JSON list (gzip-compressed when it ends in .gz, as experiments ship them);
    an empty file, bad JSON or another top level fails naming the file."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise ReplayError(f"{path}: not a gzip file ({e})") from None
    except UnicodeDecodeError as e:
        raise ReplayError(f"{path}: not UTF-8 text (byte {e.start})") from None
    if not text.strip():
        raise ReplayError(f"{path}: empty file (expected a JSON list of {what})")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReplayError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(data, list):
        keys = f" (keys: {columns_hint(sorted(data))})" if isinstance(data, dict) else ""
        raise ReplayError(f"{path}: expected a JSON list of {what}, got a JSON {type(data).__name__}{keys}")
    if not data:
        raise ReplayError(f"{path}: no records (an empty list)")
    return data


def numbered_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of every non-blank line; a bad line fails naming file and line."""
    return numbered_json_lines(path.read_text(encoding="utf-8"), path, ReplayError)
