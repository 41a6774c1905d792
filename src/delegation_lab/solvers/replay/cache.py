"""A replay cache loaded: the files a path names, each read by its format (`FORMATS`) into one
normalised frame with provenance (source file, its sha256, domain), the question key items are
matched by, and per-model indexes. A cache is read once per process, keyed by its files' paths,
sizes and modification times, so an edited file is read again."""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.json_input import refused, regular_file
from delegation_lab.solvers.params import SCORE_THRESHOLD, LongTableFields
from delegation_lab.solvers.replay import FORMATS
from delegation_lab.solvers.replay.budget import check_budget
from delegation_lab.solvers.replay.records import (
    CACHE_COLUMNS,
    MAX_MODELS,
    CacheFormat,
    ReadOptions,
    ReplayError,
    file_model,
)

_QUOTES = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\u00b4": "'", "`": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
})


def normalise_question(text: str) -> str:
    """The key items and cache rows are matched by: NFKC, straight quotes, lowercase, single spaces."""
    text = unicodedata.normalize("NFKC", text or "").translate(_QUOTES)
    return " ".join(text.lower().split())


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


def _segments_match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """glob's rules for one relative path: `**` is zero or more folders, a wildcard never matches a
    leading dot unless the pattern segment has one (hidden files and folders are skipped)."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return _segments_match(rest, parts) or (
            bool(parts) and not parts[0].startswith(".") and _segments_match(pattern, parts[1:]))
    if not parts or (parts[0].startswith(".") and not head.startswith(".") and _GLOB.search(head)):
        return False
    return fnmatch.fnmatchcase(parts[0], head) and _segments_match(rest, parts[1:])


def glob_files(pattern: str) -> list[Path]:
    """The files a glob names. A `**` glob is walked with os.walk(followlinks=False): glob's `**`
    descends into symlinked folders, so a link to an ancestor (a loop) never ends; here a
    symlinked folder is not entered (a symlinked file is kept)."""
    if "**" not in pattern:
        return [Path(p) for p in glob.glob(pattern) if Path(p).is_file()]
    parts = Path(pattern).parts
    first = next(i for i, part in enumerate(parts) if _GLOB.search(part))
    root = Path(*parts[:first]) if first else Path(".")
    found = []
    for folder, _, names in os.walk(root, followlinks=False):
        inside = Path(folder).relative_to(root).parts
        found += [Path(folder, n) for n in names if _segments_match(parts[first:], (*inside, n))]
    return [p for p in found if p.is_file()]


def cache_files(path: str | Path, fmt: str) -> list[Path]:
    """The files a cache names: the file itself, or every file of the format in a folder or glob.

    In the format's reading order: sorted by path; for LLMRouterBench the names in one folder sort
    newest first (its `<timestamp>.json`), so a model's latest run is the one whose answers are kept.
    """
    text = str(path)
    cache_format = FORMATS.get(fmt)
    if _GLOB.search(text):
        found = glob_files(text)
        what = f"the glob {text!r}"
    elif Path(text).is_dir():
        found = [p for p in Path(text).rglob("*") if p.is_file() and p.name.endswith(cache_format.suffixes)
                 and not any(part.startswith(".") for part in p.relative_to(text).parts)]
        what = f"the folder {text}"
    else:
        if not Path(text).exists():
            raise ReplayError(f"{text}: replay cache not found (check the `path` of the replay section)")
        return [regular_file(text, ReplayError)]  # /dev/zero, a FIFO: refused before anything opens them
    kinds = ", ".join("*" + x for x in cache_format.suffixes)
    if cache_format.belongs is not None:
        found = [p for p in found if cache_format.belongs(p)]
        kinds += f" where the {fmt} layout puts them"
    if not found:
        raise ReplayError(f"{text}: {what} holds no {fmt} files ({kinds})")
    return cache_format.order(found)


def _stat_key(files: list[Path], spec: str, fmt: str, fields: LongTableFields | None) -> tuple[Any, ...]:
    stats = []
    for p in files:
        try:
            st = p.stat()
        except FileNotFoundError:
            raise ReplayError(f"{p}: replay cache file not found (check the `path` of the replay section)") from None
        stats.append((str(p.resolve()), st.st_mtime_ns, st.st_size))
    return (spec, fmt, fields.model_dump_json() if fields else None, tuple(stats))


def _read_one(file: Path, cache_format: CacheFormat, options: ReadOptions, several: bool) -> pl.DataFrame:
    """One file's rows with their provenance: `domain` (what the layout says, else the file's stem
    when the cache has several files, else "replay"), `source_file` and `source_sha256`."""
    frame = cache_format.read(file, options)
    fallback = file_model(file) if several else "replay"
    domain = pl.col("domain").cast(pl.String) if "domain" in frame.columns else pl.lit(None, dtype=pl.String)
    frame = frame.with_columns(
        domain.fill_null(fallback).alias("domain"),
        pl.lit(str(file)).alias("source_file"),
        pl.lit(file_sha256(file)).alias("source_sha256"),
    )
    if several:  # source indexes restart in every file: keep them unique across the cache
        frame = frame.with_columns((pl.lit(f"{file_model(file)}#") + pl.col("source_index")).alias("source_index"))
    return frame


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    try:
        return pl.concat(frames, how="diagonal_relaxed")
    except pl.exceptions.PolarsError:  # extra columns of clashing types across files: keep them as text
        extra = {c for f in frames for c in f.columns if c not in CACHE_COLUMNS}
        return pl.concat([f.with_columns([pl.col(c).cast(pl.String) for c in extra if c in f.columns]) for f in frames],
                         how="diagonal_relaxed")


def load_cache(path: str | Path, fmt: str, fields: LongTableFields | None = None, trust_pickle: bool = False,
               score_threshold: float = SCORE_THRESHOLD, max_memory_gb: float | None = None) -> ReplayCache:
    """The normalised cache of a file, folder or glob, read once per process (again when a file
    changes). A format whose loading runs code (a pickle) is refused unless `trust_pickle` (checked
    before any file is opened); so is a cache whose estimated memory is over the budget
    (`budget`: `max_memory_gb`, else the environment's, else the default). A score at or above
    `score_threshold` is a correct answer."""
    spec = str(path)
    if fmt not in FORMATS:
        raise ReplayError(f"{spec}: unknown replay format {fmt!r}; use one of {list(FORMATS.names())}")
    cache_format = FORMATS.get(fmt)
    if cache_format.trust_warning and not trust_pickle:
        raise ReplayError(f"{spec}: not loaded: {cache_format.trust_warning} If you trust this file, pass --trust-pickle "
                          "(dlab import) or set `trust_pickle: true` in its replay section of params.yaml.")
    unread = sorted((fields.model_fields_set if fields is not None else set()) - set(cache_format.fields))
    if unread:
        raise refused(ReplayError, f"{spec}: fields.{unread[0]} (dlab import --field {unread[0]}=...) is not read by "
                      f"the {fmt} format; it reads: {', '.join(cache_format.fields) or 'no field names'}")
    files = cache_files(spec, fmt)
    key = (*_stat_key(files, spec, fmt, fields), score_threshold)
    cached = _LOADED.get(key)
    if cached is not None:
        return cached
    read = list(files)  # the budget counts every file the reader opens, a format's companions too
    for companion in (c for f in files for c in (cache_format.companions(f) if cache_format.companions else ())):
        if companion not in read:
            read.append(companion)
    check_budget(spec, fmt, read, cache_format.expansion, max_memory_gb)
    several = len(files) > 1 or Path(spec).is_dir() or bool(_GLOB.search(spec))
    root = Path(spec) if Path(spec).is_dir() else None
    options = ReadOptions(fields or LongTableFields(), root, score_threshold)
    frame = _concat([_read_one(f, cache_format, options, several) for f in files])
    if frame.height == 0:
        raise ReplayError(f"{spec}: the {fmt} cache has no rows")
    n_models = frame["model"].n_unique()
    if n_models > MAX_MODELS:
        raise ReplayError(f"{spec}: the {fmt} cache names {n_models} models, more than {MAX_MODELS}; "
                          "import the models you route among (a glob or a folder of fewer files)")
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


def read_cache(path: str | Path, fmt: str, fields: LongTableFields | None = None, trust_pickle: bool = False,
               score_threshold: float = SCORE_THRESHOLD) -> pl.DataFrame:
    """The normalised frame of a cache (`CACHE_COLUMNS`, extra columns, provenance, and `key`)."""
    return load_cache(path, fmt, fields, trust_pickle, score_threshold).frame
