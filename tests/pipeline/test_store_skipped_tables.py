"""A study switched off in a project (`<study>.enabled: false`) writes its tables without columns
(stage_skip); the store's views must still open, the skipped table simply contributing nothing."""

from __future__ import annotations

import polars as pl

from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import CREDIT_SCHEMA
from delegation_lab.pipeline.store import connect
from delegation_lab.pipeline.tables import write_parquet_atomic


def test_a_column_less_table_leaves_the_view_empty_with_its_schema(tmp_path):
    layout = Layout(tmp_path)
    layout.credit_dir.mkdir(parents=True)
    write_parquet_atomic(pl.DataFrame(), layout.credit_dir / "credit.parquet")
    con = connect(layout)
    assert con.execute("SELECT count(*) FROM credit").fetchone() == (0,)
    assert [c[0] for c in con.execute("DESCRIBE credit").fetchall()] == list(CREDIT_SCHEMA)


def test_a_column_less_table_beside_real_ones_is_left_out(tmp_path):
    layout = Layout(tmp_path)
    layout.outcomes_dir.mkdir(parents=True)
    write_parquet_atomic(pl.DataFrame(), layout.outcomes_dir / "credit.parquet")
    write_parquet_atomic(pl.DataFrame({"study": ["routers"], "item_id": ["i1"], "correct": [True]}),
                         layout.outcomes_dir / "routers.parquet")
    con = connect(layout)
    assert con.execute("SELECT study, item_id FROM outcomes").fetchall() == [("routers", "i1")]
