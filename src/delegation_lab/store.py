"""Trajectories, summaries and read-only DuckDB views over every table.

Trajectories: one row per decision step, hive-partitioned as
`results/trajectories/study=<s>/method=<m>/seed=<k>/part-<n>.parquet`. A study rewrites its whole
partition: rows go to a staging folder first, and only a completed write replaces the old
partition, so readers never see old and new rows mixed, and a failed run leaves the old one intact.
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
from delegation_lab.tables import Layout, conform, write_parquet_atomic

# Columns stored in each part file; study / method / seed live in the partition path.
TRAJECTORY_SCHEMA: dict[str, pl.DataType] = {
    "episode": pl.Int64,
    "step": pl.Int64,
    "split": pl.String,
    "item_id": pl.String,
    "action": pl.String,
    "executors": pl.List(pl.String),
    "correct": pl.Boolean,
    "cost_usd": pl.Float64,
    "reward": pl.Float64,
    "calls": pl.Int64,
    "extra": pl.String,  # JSON object: study-specific facts of the step
}

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "study": pl.String,
    "method": pl.String,
    "seed": pl.Int64,
    "split": pl.String,
    "operating_point": pl.String,
    "accuracy": pl.Float64,
    "cost_per_item_usd": pl.Float64,
    "calls_per_item": pl.Float64,
    "return": pl.Float64,  # nullable: studies without an RL return leave it empty
    "n_items": pl.Int64,
    "dataset": pl.String,
    "solver_set": pl.String,  # comma-joined solver names the method could use
    "run_id": pl.String,  # MLflow run that produced the row (nullable)
    "verifier": pl.String,  # the Verifier.name whose verdicts made the method's accept decisions
}


def trajectories_root(layout: Layout) -> Path:
    return layout.root / "results" / "trajectories"


def summaries_path(layout: Layout, study: str) -> Path:
    return layout.root / "results" / "summaries" / f"{study}.parquet"


def frontier_path(layout: Layout) -> Path:
    return layout.root / "results" / "frontier.parquet"


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
        self.root = trajectories_root(layout)
        self.study = _check_name("study", study)
        self.flush_rows = flush_rows
        self.staging = self.root / f".staging-{study}-{uuid.uuid4().hex[:8]}" / f"study={study}"
        self._buffers: dict[tuple[str, int], list[pl.DataFrame]] = defaultdict(list)
        self._buffered: dict[tuple[str, int], int] = defaultdict(int)
        self._parts: dict[tuple[str, int], int] = defaultdict(int)
        self.rows_written = 0

    def __enter__(self) -> TrajectoryWriter:
        self.staging.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
        else:
            shutil.rmtree(self.staging.parent, ignore_errors=True)

    def add(self, method: str, seed: int, rows: pl.DataFrame | Iterable[Mapping[str, Any]]) -> None:
        key = (_check_name("method", method), int(seed))
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
        write_parquet_atomic(frame, folder / f"part-{self._parts[key]:05d}.parquet")
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


def write_summaries(layout: Layout, study: str, rows: pl.DataFrame | list[dict[str, Any]]) -> Path:
    """Replace results/summaries/<study>.parquet (validated against SUMMARY_SCHEMA)."""
    frame = rows if isinstance(rows, pl.DataFrame) else pl.DataFrame(rows, infer_schema_length=None)
    for column, dtype in SUMMARY_SCHEMA.items():
        if column not in frame.columns and column in ("return", "run_id", "solver_set", "calls_per_item", "verifier"):
            frame = frame.with_columns(pl.lit(None, dtype=dtype).alias(column))
    if "study" in frame.columns and set(frame["study"].unique().to_list()) != {study}:
        raise InputError(f"summaries of {study}: rows name other studies {frame['study'].unique().to_list()}")
    try:
        frame = conform(frame, SUMMARY_SCHEMA, f"summaries of {study}").select(list(SUMMARY_SCHEMA))
    except ValueError as e:
        raise InputError(str(e)) from None
    return write_parquet_atomic(frame, summaries_path(layout, study))


# ---------------------------------------------------------------------------------------------
# DuckDB views


def _sql_type(dtype: pl.DataType) -> str:
    mapping = {pl.String: "VARCHAR", pl.Int64: "BIGINT", pl.Float64: "DOUBLE", pl.Boolean: "BOOLEAN"}
    if isinstance(dtype, pl.List):
        return _sql_type(dtype.inner) + "[]"
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ"
    return mapping.get(dtype, "VARCHAR")


def empty_view(con: duckdb.DuckDBPyConnection, name: str, schema: dict[str, pl.DataType]) -> None:
    cols = ", ".join(f"CAST(NULL AS {_sql_type(t)}) AS \"{c}\"" for c, t in schema.items())
    con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {cols} WHERE false")


def _quote(path: Path | str) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def view_layout(root: Path) -> dict[str, tuple[Path, str, dict[str, pl.DataType], bool]]:
    """Each view: (folder, glob of its Parquet files, schema of the empty view, hive-partitioned)."""
    from delegation_lab.evaluation.outcomes import OUTCOME_SCHEMA
    from delegation_lab.tables import ABILITY_MAP_SCHEMA, ANSWERS_SCHEMA, ITEMS_SCHEMA, LABELS_SCHEMA

    trajectory_schema = {"study": pl.String, "method": pl.String, "seed": pl.Int64, **TRAJECTORY_SCHEMA}
    return {
        "items": (root / "data" / "items", "*.parquet", ITEMS_SCHEMA, False),
        "answers": (root / "data" / "answers", "*.parquet", ANSWERS_SCHEMA, False),
        "summaries": (root / "results" / "summaries", "*.parquet", SUMMARY_SCHEMA, False),
        "outcomes": (root / "results" / "outcomes", "*.parquet", OUTCOME_SCHEMA, False),  # item-level, held-out
        "credit": (root / "results" / "credit", "*.parquet", CREDIT_SCHEMA, False),  # `dlab credit` tables
        "trajectories": (root / "results" / "trajectories", "study=*/method=*/seed=*/*.parquet", trajectory_schema, True),
        "labels": (root / "data", "labels.parquet", LABELS_SCHEMA, False),
        "ability_map": (root / "data", "ability_map.parquet", ABILITY_MAP_SCHEMA, False),
        "frontier": (root / "results", "frontier.parquet", FRONTIER_SCHEMA, False),
    }


def connect(layout: Layout) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with views items, answers, labels, ability_map, trajectories, summaries,
    frontier, credit over the Parquet files; a missing table is an empty view with its schema.

    For the project's own code (dashboard, credit replay); `dlab query` uses the sealed connection
    of `delegation_lab.sealed_query`, which no statement can make touch a file."""
    con = duckdb.connect(":memory:")
    for name, (folder, pattern, schema, hive) in view_layout(layout.root.resolve()).items():
        if folder.is_dir() and any(folder.glob(pattern)):
            options = ", hive_partitioning = true, hive_types = {'seed': BIGINT}" if hive else ", union_by_name = true"
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_quote(folder / pattern)}{options})")
        else:
            empty_view(con, name, schema)
    return con


def run_query(layout: Layout, sql: str, timeout_s: float = 30.0) -> pl.DataFrame:
    """Every row of one checked read statement over the sealed views (see `sealed_query`)."""
    from delegation_lab.sealed_query import query_rows

    return query_rows(layout, sql, timeout_s=timeout_s, max_rows=None).frame


# Per-agent Shapley credit of replayed trajectories (results/credit/<study>.parquet, `dlab credit`).
CREDIT_SCHEMA: dict[str, pl.DataType] = {
    "study": pl.String, "method": pl.String, "seed": pl.Int64, "split": pl.String, "episode": pl.Int64,
    "step": pl.Int64, "rollout": pl.Int64, "item_id": pl.String, "agent": pl.String, "role": pl.String,
    "credit": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "v_full": pl.Float64, "v_empty": pl.Float64,
    "n_agents": pl.Int64, "estimator": pl.String,
}

FRONTIER_SCHEMA: dict[str, pl.DataType] = {
    "method": pl.String,
    "operating_point": pl.String,
    "dataset": pl.String,
    "study": pl.String,  # `baselines` for the solver-only references
    "kind": pl.String,  # single | mixture | cascade | oracle | study
    "accuracy": pl.Float64,
    "accuracy_std": pl.Float64,
    "cost_per_item_usd": pl.Float64,
    "cost_std": pl.Float64,
    "calls_per_item": pl.Float64,
    "n_seeds": pl.Int64,
    "solver_set": pl.String,
    "run_ids": pl.String,  # comma-joined MLflow runs behind the point
    "accuracy_ci_low": pl.Float64,  # item-level bootstrap interval (null: the study wrote no outcomes)
    "accuracy_ci_high": pl.Float64,
    "cost_ci_low": pl.Float64,
    "cost_ci_high": pl.Float64,
    "on_pareto": pl.Boolean,
    "verifier": pl.String,  # the verifier behind the point's accept decisions; one Pareto set per (dataset, verifier)
}
