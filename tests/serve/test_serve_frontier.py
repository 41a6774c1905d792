"""The loop closed end to end: `dlab serve` answers real client requests carrying metadata.gold,
SIGTERM flushes the journal, and the stages prepare -> solve -> label -> frontier on the `served`
dataset put the deployed policy's own live decisions on the frontier (`frontier_served`), with the
accuracy and cost the journal implies."""

from __future__ import annotations

import json

import polars as pl
import pytest

from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.journal import read_decisions
from delegation_lab.pipeline.tables import read_items

from tests.serve_fixtures import run_served_stages, served_project

openai = pytest.importorskip("openai")


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.timeout(600)
def test_the_served_policy_is_on_the_served_datasets_frontier(tmp_path):
    questions = [f"live question {i}: how long is this text?" + " word" * i for i in range(12)]
    root = served_project(tmp_path / "project", questions, drain=True)  # SIGTERM: drained, journal flushed and compacted
    params = run_served_stages(root, {"ability_size": 3, "train_size": 3, "test_size": 6}, stages=("label", "frontier"))

    layout = Layout(root)
    split = params.get("frontier", {}).get("split", "test")
    on_split = read_items(layout).filter(pl.col("split") == split)["item_id"]
    journal = read_decisions(layout).filter(pl.col("item_id").is_in(on_split.implode()))
    assert journal.height == 6 and journal["model"].unique().to_list() == ["solver:fake"]
    # the fake backend answers fake_answer(question): right exactly where the client's gold is not -1
    expected_acc = (journal["gold"] != "-1").mean()
    expected_cost = journal["cost_usd"].mean()
    assert 0 < expected_acc < 1  # some of the live answers wrong: the row's accuracy is the labels', not a constant

    table = pl.read_parquet(layout.frontier)
    row = table.filter(pl.col("method") == "served:solver:fake")
    assert row.height == 1
    row = row.row(0, named=True)
    assert row["kind"] == "served" and row["dataset"] == "served"
    assert row["accuracy"] == pytest.approx(expected_acc) and row["cost_per_item_usd"] == pytest.approx(expected_cost)
    assert row["accuracy_ci_low"] <= row["accuracy"] <= row["accuracy_ci_high"]
    # one policy that always asks `fake`: its live point is always-fake's offline point, on the same items
    offline = table.filter(pl.col("method") == "always-fake").row(0, named=True)
    assert row["accuracy"] == pytest.approx(offline["accuracy"]) and row["cost_per_item_usd"] == pytest.approx(offline["cost_per_item_usd"])
    metrics = json.loads(layout.metrics("frontier").read_text())
    assert metrics["methods"]["served:solver:fake"]["kind"] == "served"
    assert metrics["served"]["requests_graded"] == 6 and metrics["served"]["requests_without_label"] == 0
    csv = pl.read_csv(layout.plots("frontier") / "frontier.csv")
    assert "served:solver:fake" in csv["method"].to_list()
    outcomes = pl.read_parquet(layout.outcomes("baselines")).filter(pl.col("method") == "served:solver:fake")
    assert sorted(outcomes["item_id"].to_list()) == sorted(on_split.to_list())
