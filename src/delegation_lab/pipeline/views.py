"""The DuckDB views over every table (`items`, `answers`, `labels`, `ability_map`, `trajectories`,
`summaries`, `runs`, `outcomes`, `frontier`, `credit`): where each view's Parquet files are and its schema
when none exist yet. `store.connect` (the project's own reads) and `sealed_query` (`dlab query`)
both build their views from here."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import (
    ABILITY_MAP_SCHEMA,
    ANSWERS_SCHEMA,
    CREDIT_SCHEMA,
    FRONTIER_SCHEMA,
    ITEMS_SCHEMA,
    LABELS_SCHEMA,
    OUTCOME_SCHEMA,
    RUN_INDEX_SCHEMA,
    SUMMARY_SCHEMA,
    TRAJECTORY_SCHEMA,
)


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


def has_columns(path: Path) -> bool:
    """Whether a Parquet file has any column: a skipped study wrote some of its tables without any
    (before `skip._table_schema` knew their schemas), and DuckDB refuses a view over a file with no
    column (`dlab query` failed with a traceback in an experiment whose credit study was off). Such a
    file holds no rows, so a view leaves it out; an unreadable file is kept, for the reader's own error."""
    try:
        return bool(pq.read_schema(path).names)
    except (pa.ArrowException, OSError):
        return True


def view_layout(root: Path) -> dict[str, tuple[Path, str, dict[str, pl.DataType], bool]]:
    """Each view: (folder, glob of its Parquet files, schema of the empty view, hive-partitioned)."""
    layout = Layout(root)
    trajectory_schema = {"study": pl.String, "method": pl.String, "seed": pl.Int64, **TRAJECTORY_SCHEMA}
    return {
        "items": (layout.items_dir, "*.parquet", ITEMS_SCHEMA, False),
        "answers": (layout.answers_dir, "*.parquet", ANSWERS_SCHEMA, False),
        "summaries": (layout.summaries_dir, "*.parquet", SUMMARY_SCHEMA, False),
        "runs": (layout.runs_dir, "*.parquet", RUN_INDEX_SCHEMA, False),  # MLflow run of each summary row
        "outcomes": (layout.outcomes_dir, "*.parquet", OUTCOME_SCHEMA, False),  # item-level, held-out
        "credit": (layout.credit_dir, "*.parquet", CREDIT_SCHEMA, False),  # `dlab credit` tables
        "trajectories": (layout.trajectories_dir, "study=*/method=*/seed=*/*.parquet", trajectory_schema, True),
        "labels": (layout.labels.parent, layout.labels.name, LABELS_SCHEMA, False),
        "ability_map": (layout.ability_map.parent, layout.ability_map.name, ABILITY_MAP_SCHEMA, False),
        "frontier": (layout.frontier.parent, layout.frontier.name, FRONTIER_SCHEMA, False),
    }
