"""Writing trajectories and summaries, and the project's own read-only DuckDB connection.

Trajectories: one row per decision step, hive-partitioned as
`results/trajectories/study=<s>/method=<m>/seed=<k>/part-<n>.parquet`. A study rewrites its whole
partition: rows go to a staging folder first, and only a completed write replaces the old
partition, so readers never see old and new rows mixed, and a failed run leaves the old one intact.

A partition holding the steps of one outcome point says so: `add(..., point=(method, operating
point))` as the study's summaries and outcomes name it, and every Parquet file of the partition
carries that point in its key-value metadata (`POINT_KEY`), so any reader of the files (polars,
pyarrow, DuckDB, a directory read) sees the same rows as before. A link from a point to its steps
reads that key (`read_trajectory_points`), never the partition's name.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import RUN_INDEX_SCHEMA, SUMMARY_SCHEMA, TRAJECTORY_SCHEMA
from delegation_lab.pipeline.tables import conform, write_parquet_atomic
from delegation_lab.pipeline.views import empty_view, has_columns, view_layout


POINT_KEY = "delegation_lab.point"  # a trajectory file's metadata: {"method", "operating_point"} of the point it holds


def _check_name(kind: str, value: str) -> str:
    if not value or any(c in value for c in "/\\=\n") or value.startswith("."):
        raise InputError(f"{kind} {value!r} cannot name a partition (no '/', '\\', '=', newline, leading '.')")
    return value


class TrajectoryWriter:
    """Buffered, validated writer of one study's trajectories; use as a context manager.

    >>> with TrajectoryWriter(layout, "coordinator") as w:
    ...     w.add("dqn_map", seed=0, rows=[{...}, ...])
    """

    def __init__(self, layout: Layout, study: str, flush_rows: int = 200_000):
        self.root = layout.trajectories_dir
        self.study = _check_name("study", study)
        self.flush_rows = flush_rows
        self.staging = self.root / f".staging-{study}-{uuid.uuid4().hex[:8]}" / f"study={study}"
        self._buffers: dict[tuple[str, int], list[pl.DataFrame]] = defaultdict(list)
        self._buffered: dict[tuple[str, int], int] = defaultdict(int)
        self._parts: dict[tuple[str, int], int] = defaultdict(int)
        self._points: dict[str, tuple[str, str]] = {}  # partition -> the outcome point it holds
        self._holders: dict[tuple[tuple[str, str], int], str] = {}  # (point, seed) -> its one partition
        self._seen: set[str] = set()  # partitions added to
        self._pointless: set[str] = set()  # partitions of steps of no point
        self.rows_written = 0

    def __enter__(self) -> TrajectoryWriter:
        self.staging.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
        else:
            shutil.rmtree(self.staging.parent, ignore_errors=True)

    def add(self, method: str, seed: int, rows: pl.DataFrame | Iterable[Mapping[str, Any]],
            point: tuple[str, str] | None = None) -> None:
        """Buffer steps of partition `method` at `seed`; `point`: the outcome point (method,
        operating point, as the summaries name it) whose steps these are, None for steps of no point."""
        key = (_check_name("method", method), int(seed))
        if (point is None) != (method in self._pointless) and key[0] in self._seen:
            raise InputError(f"trajectories of {self.study}/{method}: steps with and without a point in one partition")
        self._seen.add(method)
        if point is None:
            self._pointless.add(method)
        else:
            point = (str(point[0]), str(point[1]))
            if self._points.setdefault(method, point) != point:
                raise InputError(f"trajectories of {self.study}/{method}: the partition holds {self._points[method]}, "
                                 f"not also {point}: one partition per outcome point")
            if self._holders.setdefault((point, key[1]), method) != method:
                raise InputError(f"trajectories of {self.study}: {point} at seed {key[1]} is in partition "
                                 f"{self._holders[(point, key[1])]!r}, not also in {method!r}")
        frame = rows if isinstance(rows, pl.DataFrame) else pl.DataFrame(list(rows), infer_schema_length=None)
        if frame.is_empty():
            return
        if "extra" in frame.columns and frame["extra"].dtype != pl.String:
            frame = frame.with_columns(pl.Series("extra", [json.dumps(v) for v in frame["extra"].to_list()]))
        unknown = [c for c in frame.columns if c not in TRAJECTORY_SCHEMA]
        if unknown:
            raise InputError(
                f"trajectories of {self.study}/{method}: unknown column(s) {unknown}; the schema is {list(TRAJECTORY_SCHEMA)}"
            )
        try:
            frame = conform(frame, TRAJECTORY_SCHEMA, f"trajectories of {self.study}/{method}")
        except ValueError as e:
            raise InputError(str(e)) from None
        self._buffers[key].append(frame)
        self._buffered[key] += frame.height
        if self._buffered[key] >= self.flush_rows:
            self._flush(key)

    def _flush(self, key: tuple[str, int]) -> None:
        if not self._buffers[key]:
            return
        method, seed = key
        folder = self.staging / f"method={method}" / f"seed={seed}"
        frame = pl.concat(self._buffers[key], how="vertical")
        point = self._points.get(method)
        metadata = None if point is None else {POINT_KEY: json.dumps({"method": point[0], "operating_point": point[1]})}
        write_parquet_atomic(frame, folder / f"part-{self._parts[key]:05d}.parquet", metadata)
        self._parts[key] += 1
        self.rows_written += frame.height
        self._buffers[key], self._buffered[key] = [], 0

    def commit(self) -> Path:
        """Flush everything and swap the staged partition in for the study's old one."""
        for key in list(self._buffers):
            self._flush(key)
        final = self.root / f"study={self.study}"
        trash = self.root / f".trash-{self.study}-{uuid.uuid4().hex[:8]}"
        if final.exists():
            final.rename(trash)
        self.staging.rename(final)
        shutil.rmtree(self.staging.parent, ignore_errors=True)
        shutil.rmtree(trash, ignore_errors=True)
        return final


    def points(self) -> dict[str, dict[str, Any]]:
        """partition -> {method, operating_point, seeds}: the partitions written that hold an outcome point."""
        seeds: dict[str, list[int]] = defaultdict(list)
        for method, seed in sorted(self._parts):
            seeds[method].append(seed)
        return {m: {"method": p[0], "operating_point": p[1], "seeds": seeds[m]}
                for m, p in sorted(self._points.items()) if seeds.get(m)}


def read_trajectory_points(layout: Layout) -> dict[tuple[str, str, str, int], str]:
    """(study, method, operating point, seed) -> the trajectory partition holding that point's steps
    at that seed, from the `POINT_KEY` metadata of each partition's first file (its footer only); a
    partition without it holds steps of no point and links nothing."""
    import pyarrow.parquet as pq

    found: dict[tuple[str, str, str, int], str] = {}
    root = layout.trajectories_dir
    for path in sorted(root.glob("study=*/method=*/seed=*/part-00000.parquet")) if root.is_dir() else []:
        seed_dir, method_dir, study_dir = path.parent, path.parent.parent, path.parent.parent.parent
        raw = (pq.read_metadata(path).metadata or {}).get(POINT_KEY.encode())
        if raw is None:
            continue
        try:
            point = json.loads(raw)
            key = (study_dir.name.removeprefix("study="), str(point["method"]), str(point["operating_point"]),
                   int(seed_dir.name.removeprefix("seed=")))
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(f"{path}: metadata {POINT_KEY} is not a {{method, operating_point}} object ({e})") from None
        found[key] = method_dir.name.removeprefix("method=")
    return found


def write_summaries(layout: Layout, study: str, rows: pl.DataFrame | list[dict[str, Any]]) -> Path:
    """Replace results/summaries/<study>.parquet (validated against SUMMARY_SCHEMA) and its run index
    results/runs/<study>.parquet: the rows' `run_id`s (new on every rerun) go only to the index, so
    an unchanged rerun writes the same summary bytes and leaves the stages that read them clean."""
    frame = rows if isinstance(rows, pl.DataFrame) else pl.DataFrame(rows, infer_schema_length=None)
    for column, dtype in {**SUMMARY_SCHEMA, **RUN_INDEX_SCHEMA}.items():
        if column not in frame.columns and column in ("return", "run_id", "solver_set", "calls_per_item", "verifier"):
            frame = frame.with_columns(pl.lit(None, dtype=dtype).alias(column))
    if "study" in frame.columns and set(frame["study"].unique().to_list()) != {study}:
        raise InputError(f"summaries of {study}: rows name other studies {frame['study'].unique().to_list()}")
    try:
        summaries = conform(frame.drop("run_id"), SUMMARY_SCHEMA, f"summaries of {study}").select(list(SUMMARY_SCHEMA))
        runs = conform(frame.select(list(RUN_INDEX_SCHEMA)), RUN_INDEX_SCHEMA, f"run index of {study}")
    except ValueError as e:
        raise InputError(str(e)) from None
    write_parquet_atomic(runs.filter(pl.col("run_id").is_not_null()), layout.runs(study))
    return write_parquet_atomic(summaries, layout.summaries(study))


def _quote(path: Path | str) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _tables_with_columns(folder: Path, pattern: str) -> list[Path]:
    """The folder's Parquet files that have columns (`views.has_columns`)."""
    files = sorted(folder.glob(pattern)) if folder.is_dir() else []
    return [f for f in files if has_columns(f)]


def connect(layout: Layout) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with views items, answers, labels, ability_map, trajectories, summaries,
    frontier, credit over the Parquet files; a missing table is an empty view with its schema.

    For the project's own code (dashboard, credit replay); `dlab query` uses the sealed connection
    of `delegation_lab.query.sealed`, which no statement can make touch a file."""
    con = duckdb.connect(":memory:")
    for name, (folder, pattern, schema, hive) in view_layout(layout.root.resolve()).items():
        if hive:
            if folder.is_dir() and any(folder.glob(pattern)):
                options = ", hive_partitioning = true, hive_types = {'seed': BIGINT}"
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_quote(folder / pattern)}{options})")
                continue
        elif files := _tables_with_columns(folder, pattern):
            listed = ", ".join(_quote(f) for f in files)
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listed}], union_by_name = true)")
            continue
        empty_view(con, name, schema)
    return con
