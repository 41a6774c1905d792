"""What every replay reader shares: the normalised row (`CACHE_COLUMNS`), the error that names
the file, the cell parsers (text, correctness, numbers), the file readers (UTF-8 text and CSV
headers checked with the line of the first bad byte or the duplicated column), and `CacheFormat`,
the record one format module registers in `solvers.replay.FORMATS`.

Imported numbers are validated where they are read, because a bad one is otherwise a silent wrong
result: token counts and costs must be finite, non-negative and below `MAX_TOKENS` / `MAX_COST_USD`
per answer; a correctness cell must be a boolean word, 0/1, or a score in [0, 1]. Anything else is
a `ReplayError` naming the file, the row (or line / record) and the column.
"""

from __future__ import annotations

import csv
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
from delegation_lab.json_input import loads, regular_file
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

PUBLISHED_SPLIT = "source_split"
"""The column a reader fills with the split the upstream published a row in (LLMRouter's and
LLMRouterBench's split files and folders, a `split` column): `data.split: as_published` keeps it."""

ITEM_COLUMNS: dict[str, pl.DataType] = {"gold": pl.String, "choices": pl.List(pl.String), "answer_format": pl.String}
"""What a layout may bring about its questions, for the items made of them (`data.replay`) and for
`dlab import`'s labeler (`relabel`) alike: the gold, the options of a multiple-choice question (the
gold is then a letter), and the matcher that grades it (`labeling.MATCHERS`; null = `label.matcher`)."""

MAX_TOKENS = 100_000_000
"""Most tokens one imported answer may report (in or out): far above any model's context."""
MAX_MODELS = 1_000
"""Most models one imported cache may name: the platform routes among tens of models, and a cache
naming a million (one 16 MB LLMRouter record) took 5.5 GB and minutes of per-model work."""
MAX_COST_USD = 1_000_000.0
"""Most US$ one imported answer may cost: anything above is a unit or parsing mistake."""


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
    companions: Callable[[Path], list[Path]] | None = None
    """The other files the reader of one cache file also reads (LLMRouter's query files): the memory
    budget counts them with the cache's own."""
    fields: tuple[str, ...] = ()
    """The `LongTableFields` keys this layout reads (`dlab import --field`, a replay section's
    `fields`); naming another is refused, so a mapping never goes silently unused."""
    expansion: float = 20.0
    """Peak memory of `dlab import` over the files' text size, measured (docs/scaling.md): `budget`
    refuses a cache whose estimate is over the budget. 20 covers the tables measured: a 200 MB long
    table peaked at 2.76 GB (13.8x, issue 32), 24 MB of 100-byte rows at 18x, RouteLLM's CSV at 12x."""


OTHER_LAYOUT = ("a file of another layout reads with --format long_table --field question=... model=... "
                "score=... (data.replay.fields in params)")
"""What a reader's refusal of a record it cannot map suggests: the option that maps any one-row-per-answer file."""


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


def _nan(value: Any, path: Path, where: str, what: str, nan_is_empty: bool) -> bool:
    """Whether `value` is a NaN to treat as an empty cell; a NaN where a format has real nulls (JSON,
    Parquet, a polars table: a `NaN` there was written on purpose) fails naming the file and record, so
    it is never silently re-priced from tokens or relabelled. `nan_is_empty`: pandas-read formats
    (RouterBench), whose empty cells are NaN."""
    if not (isinstance(value, float) and math.isnan(value)):
        return False
    if nan_is_empty:
        return True
    raise ReplayError(f"{path}: {where}: {what} is NaN: leave it empty (null) where it is unknown")


def correctness(value: Any, path: Path, where: str, threshold: float = SCORE_THRESHOLD,
                nan_is_empty: bool = False) -> bool | None:
    """True / False from a boolean-ish cell or a score (correct at or above `threshold`); None when empty."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        if _nan(value, path, where, "correctness value", nan_is_empty):
            return None
        return _unit(value, value, path, where) >= threshold
    s = str(value).strip().lower()
    if not s or s in ("nan", "none", "null"):
        return None
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    try:
        number = float(s)
    except ValueError:
        raise ReplayError(f"{path}: {where}: correctness value {_shown(value)} is not True/False or a score") from None
    return _unit(number, value, path, where) >= threshold


def _shown(value: Any) -> str:
    """A cell for an error message: its repr, cut so one huge cell cannot flood the terminal."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unit(number: float, value: Any, path: Path, where: str) -> float:
    if not 0.0 <= number <= 1.0:  # NaN fails too
        raise ReplayError(f"{path}: {where}: correctness value {_shown(value)} is neither True/False, 0/1 "
                          "nor a score in [0, 1]")
    return number


def threshold_of(options: ReadOptions | None) -> float:
    """The score at or above which an answer counts as correct (a reader called without options: 0.5)."""
    return options.score_threshold if options is not None else SCORE_THRESHOLD


def unit_score(value: Any, path: Path, where: str, nan_is_empty: bool = False) -> float | None:
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
    if _nan(f, path, where, "score", nan_is_empty):
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


def _number(value: Any, path: Path, where: str, what: str, bound: float, nan_is_empty: bool = False) -> float | None:
    """A finite number in [0, bound]; None when the cell is empty (or NaN where that means empty, see
    `_nan`); anything else fails."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        f = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise ReplayError(f"{path}: {where}: {what} {_shown(value)} is not a number") from None
    if _nan(f, path, where, what, nan_is_empty):
        return None
    if not 0.0 <= f < bound:  # inf and negatives fail here
        raise ReplayError(f"{path}: {where}: {what} {_shown(value)} is outside [0, {bound:g})")
    return f


def token_count(value: Any, path: Path, where: str) -> int | None:
    """An imported token count: a whole-ish number in [0, MAX_TOKENS), rounded; None when empty."""
    f = _number(value, path, where, "token count", MAX_TOKENS)
    return None if f is None else int(round(f))


def cost_value(value: Any, path: Path, where: str, nan_is_empty: bool = False) -> float | None:
    """An imported cost in US$: a finite number in [0, MAX_COST_USD); None when empty."""
    return _number(value, path, where, "cost", MAX_COST_USD, nan_is_empty)


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


def utf8_text(raw: bytes, path: Path) -> str:
    """`raw` decoded as UTF-8; a bad byte fails naming the file, its line and byte offset."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ReplayError(f"{path}: line {line}: not UTF-8 text (byte {e.start}: {e.reason})") from None


def read_utf8(path: Path) -> str:
    """A text file's content, with the line of the first non-UTF-8 byte in the error."""
    regular_file(path, ReplayError)  # a FIFO would block the open, /dev/zero never end
    try:
        return utf8_text(path.read_bytes(), path)
    except OSError as e:
        raise ReplayError(f"{path}: cannot read ({e.strerror or e})") from None


def check_csv(path: Path) -> None:
    """Refuse a CSV before a table library reads it: a non-UTF-8 byte (named by line, which the
    libraries do not say) or a duplicated column name (which they would rename or drop silently).
    Reads in blocks, so it holds one block, not the file."""
    line, offset, carry = 1, 0, b""  # offset: where `data` starts in the file
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            data = carry + block
            try:
                data.decode("utf-8")
                carry = b""
            except UnicodeDecodeError as e:
                if e.reason != "unexpected end of data":
                    line += data.count(b"\n", 0, e.start)
                    raise ReplayError(f"{path}: line {line}: not UTF-8 text (byte {offset + e.start}: {e.reason})") from None
                data, carry = data[: e.start], data[e.start :]  # a character cut by the block's end
            line += data.count(b"\n")
            offset += len(data)
    if carry:
        raise ReplayError(f"{path}: line {line}: not UTF-8 text (byte {offset}: the file ends inside a character)")
    with path.open(encoding="utf-8", newline="") as f:
        header = next(csv.reader(f), [])
    seen: set[str] = set()
    for column in header:
        if column in seen and column.strip():
            raise ReplayError(f"{path}: row 1: column {_shown(column)} appears more than once in the header")
        seen.add(column)


def json_list(path: Path, what: str) -> list[Any]:
    """A file holding one JSON list (gzip-compressed when it ends in .gz, as experiments ship them);
    an empty file, bad JSON or another top level fails naming the file."""
    regular_file(path, ReplayError)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise ReplayError(f"{path}: not a gzip file ({e})") from None
    text = utf8_text(raw, path)
    if not text.strip():
        raise ReplayError(f"{path}: empty file (expected a JSON list of {what})")
    try:
        data = loads(text, str(path), ReplayError)
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
    return numbered_json_lines(read_utf8(path), path, ReplayError)
