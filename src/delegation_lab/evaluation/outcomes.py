"""Item-level outcomes: one row per (study, method, operating point, seed, item) on a split — the
accepted answer's gold correctness and the cost paid — from which the frontier computes paired
bootstrap intervals. Studies write `results/outcomes/<study>.parquet` beside their summaries."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA
from delegation_lab.pipeline.tables import conform, with_outcome_columns, write_parquet_atomic


def write_outcomes(layout: Layout, study: str, rows: pl.DataFrame) -> Path:
    """Replace results/outcomes/<study>.parquet (validated against OUTCOME_SCHEMA, its optional columns
    null where `rows` lacks them; one row per key)."""
    frame = rows.with_columns(pl.col("correct").cast(pl.Float64)) if "correct" in rows.columns else rows
    frame = with_outcome_columns(frame)  # a study that does not record them leaves them null
    try:
        frame = conform(frame, OUTCOME_SCHEMA, f"outcomes of {study}").select(list(OUTCOME_SCHEMA))
    except ValueError as e:
        raise InputError(str(e)) from None
    if frame.height and set(frame["study"].unique().to_list()) != {study}:
        raise InputError(f"outcomes of {study}: rows name other studies {frame['study'].unique().to_list()}")
    keys = ["method", "operating_point", "seed", "split", "item_id"]
    dup = frame.height - frame.select(keys).n_unique()
    if dup:
        raise InputError(f"outcomes of {study}: {dup} duplicate (method, operating_point, seed, split, item_id) rows")
    return write_parquet_atomic(frame, layout.outcomes(study))
