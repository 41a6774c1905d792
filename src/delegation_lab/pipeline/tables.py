"""Reading and writing the tables of DESIGN.md's data contracts (`schemas`) at their paths (`layout`).

Every Parquet file is written to `*.tmp` then moved into place with `os.replace`, so a reader
never sees a half-written table and a crash leaves the previous version intact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import polars as pl

from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import OUTCOME_OPTIONAL, OUTCOME_SCHEMA, SPLITS, SUMMARY_SCHEMA


def conform(df: pl.DataFrame, schema: dict[str, pl.DataType], table: str) -> pl.DataFrame:
    """Check every contract column is present with a castable type; order columns as the contract."""
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise ValueError(f"{table}: missing column(s) {missing}; the contract needs {list(schema)}")
    wrong = [f"{c} is {df.schema[c]}, the contract says {t}" for c, t in schema.items() if not _same_kind(df.schema[c], t)]
    if wrong:
        raise ValueError(f"{table}: a column has the wrong type: {'; '.join(wrong)}")
    try:
        head = [pl.col(c).cast(t, strict=True) for c, t in schema.items()]
    except Exception as e:  # pragma: no cover - cast builds lazily
        raise ValueError(f"{table}: {e}") from e
    extra = [c for c in df.columns if c not in schema]
    try:
        return df.select(head + [pl.col(c) for c in extra])
    except pl.exceptions.PolarsError as e:
        raise ValueError(f"{table}: a column has the wrong type: {e}") from e


def _same_kind(src: pl.DataType, dst: pl.DataType) -> bool:
    """Widening within a kind is a cast (int -> float, Int32 -> Int64); across kinds (a flag into a cost,
    a number into an id) it is a producer's bug that a silent cast would hide. All-null columns pass."""
    if src == pl.Null or src == dst:
        return True
    if dst.is_numeric():
        return src.is_numeric()
    if dst == pl.String:
        return src in (pl.String, pl.Categorical) or isinstance(src, pl.Enum)
    return src.base_type() == dst.base_type()


def write_parquet_atomic(df: pl.DataFrame, path: Path, metadata: dict[str, str] | None = None) -> Path:
    """`df` to `path` via a temporary file (readers never see half a file); `metadata`: the file's
    Parquet key-value metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    df.write_parquet(tmp, metadata=metadata) if metadata else df.write_parquet(tmp)
    os.replace(tmp, path)
    return path


def write_json_atomic(obj: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")
    os.replace(tmp, path)
    return path


def write_csv_atomic(df: pl.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    df.write_csv(tmp)
    os.replace(tmp, path)
    return path


@contextmanager
def replaced_on_success(path: Path, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """A text file written in `path`'s folder and moved onto `path` only when the block ends without
    an error; on an error it is removed, so `path` is never half-written (what was there stays)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding=encoding, newline="") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def read_table(path: Path, what: str) -> pl.DataFrame:
    if not path.exists():
        raise FileNotFoundError(f"{path}: {what} not found; run `dvc repro` up to the stage that writes it")
    return pl.read_parquet(path)


def read_items(layout: Layout, splits: tuple[str, ...] = SPLITS) -> pl.DataFrame:
    return pl.concat([read_table(layout.items(s), f"{s} items") for s in splits], how="vertical")


def read_labeled_answers(layout: Layout) -> pl.DataFrame:
    """Every labeled answer with its item fields: the table studies and baselines read.

    Labels name the request_hash they graded, so only the answers of the current prompts and
    settings are joined, never stale rows kept in the cache.
    """
    labels = read_table(layout.labels, "labels")
    answers = pl.concat(
        [read_table(layout.answers(s), f"answers of solver {s}") for s in labels["solver"].unique().sort()],
        how="vertical_relaxed",
    ).select("solver", "item_id", "request_hash", "parsed_answer", "tokens_in", "tokens_out", "cost_usd", "latency_s")
    items = read_items(layout).select("item_id", "split", "difficulty", "domain", "gold")
    return (
        labels.select("solver", "item_id", "request_hash", "correct", "method")
        .join(answers, on=["solver", "item_id", "request_hash"], how="inner")
        .join(items, on="item_id", how="inner")
        .sort(["split", "item_id", "solver"])
    )


def read_summaries(layout: Layout) -> pl.DataFrame:
    """Every study's summary rows (results/summaries/*.parquet) in the contract's columns. Rows written
    before summaries recorded their verifier get a null `verifier` (the frontier keeps them apart)."""
    files = sorted(layout.summaries_dir.glob("*.parquet"))
    if not files:
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    frames = []
    for f in files:
        frame = pl.read_parquet(f)
        if "verifier" not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("verifier"))
        frames.append(frame.select(list(SUMMARY_SCHEMA)))
    return pl.concat(frames, how="vertical_relaxed")


def with_outcome_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with every optional outcome column it lacks (`OUTCOME_OPTIONAL`) added as nulls: a
    study that does not record them, and files written before they existed, still conform."""
    missing = [c for c in OUTCOME_OPTIONAL if c not in frame.columns]
    return frame.with_columns(pl.lit(None, dtype=OUTCOME_SCHEMA[c]).alias(c) for c in missing) if missing else frame


def read_outcomes(layout: Layout) -> pl.DataFrame:
    """Every study's item-level outcomes (results/outcomes/*.parquet) in the contract's columns."""
    files = sorted(layout.outcomes_dir.glob("*.parquet"))
    if not files:
        return pl.DataFrame(schema=OUTCOME_SCHEMA)
    return pl.concat([with_outcome_columns(pl.read_parquet(f)).select(list(OUTCOME_SCHEMA)) for f in files],
                     how="vertical_relaxed")
