"""A skipped study's tables in the query views (issue 42): the credit stage skipped in an experiment
built from the template wrote `results/credit/credit.parquet` with no column, and `dlab query` (and the
dashboard's `store.connect`) failed with DuckDB's "must have at least one column" traceback. Now the
skip writes the credit table with its schema, and a column-less file already on disk is left out of
its view, which is then the empty table with the view's schema."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import polars as pl

from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import CREDIT_SCHEMA
from delegation_lab.pipeline.skip import skip_stage
from delegation_lab.pipeline.store import connect
from delegation_lab.query.sealed import run_query

from tests.conftest import BIN, REPO, env_with_venv


def test_the_credit_stage_skipped_writes_its_table_with_its_schema(tmp_path: Path):
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    layout = Layout(tmp_path)
    skip_stage(layout, "credit", "credit.enabled is false")
    table = layout.credit_dir / "credit.parquet"
    assert pl.read_parquet(table).schema == pl.Schema(CREDIT_SCHEMA)
    rows = run_query(layout, "SELECT count(*) AS n FROM credit")
    assert rows.to_dicts() == [{"n": 0}]


def test_a_column_less_table_on_disk_is_an_empty_view_with_its_schema(tmp_path: Path):
    layout = Layout(tmp_path)
    layout.credit_dir.mkdir(parents=True)
    pl.DataFrame().write_parquet(layout.credit_dir / "credit.parquet")  # as skips before this fix wrote it
    assert run_query(layout, "SELECT count(*) AS n FROM credit").to_dicts() == [{"n": 0}]
    columns = run_query(layout, "SELECT * FROM credit").columns
    assert columns == list(CREDIT_SCHEMA)
    assert connect(layout).execute("SELECT count(*) FROM credit").fetchone() == (0,)
    done = subprocess.run([str(BIN / "dlab"), "query", "SELECT count(*) AS n FROM credit"], cwd=tmp_path,
                          env=env_with_venv(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
