"""Served traffic as the next offline dataset: requests `dlab serve` answered (gold from the client's
metadata) become the `served` dataset's items; `solve` adopts the server's answers under the same
request hash (no backend call), and `label` grades them against that gold."""

from __future__ import annotations

import json

import polars as pl
import pytest

from delegation_lab.pipeline.layout import Layout

from tests.serve_fixtures import run_served_stages, served_project

openai = pytest.importorskip("openai")


@pytest.mark.processes
@pytest.mark.timeout(600)
def test_served_traffic_is_solved_from_the_journal_and_labelled(tmp_path):
    questions = [f"served question {i}: how long is this text?" + " pad" * i for i in range(12)]
    root = served_project(tmp_path / "project", questions)  # a third of the golds wrong; every answer now from the journal
    run_served_stages(root, {"ability_size": 4, "train_size": 4, "test_size": 4})

    layout = Layout(root)
    stats = json.loads(layout.solve_run("fake").read_text())
    assert stats["backend_calls"] == 0 and stats["cached"] == 12 and stats["errors"] == 0
    answers = pl.read_parquet(layout.answers("fake"))
    served = pl.read_parquet(layout.served_answers("fake"))
    assert answers.select("item_id", "request_hash").sort("item_id").equals(served.select("item_id", "request_hash").sort("item_id"))
    labels = pl.read_parquet(layout.labels).filter(pl.col("solver") == "fake")
    assert labels.height == 12 and labels["correct"].sum() == 8  # the gold clients sent: a third says -1
