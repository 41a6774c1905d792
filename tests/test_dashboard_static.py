"""The static picture (plots/frontier/frontier.png, drawn from plots/frontier/frontier.csv by the
frontier stage) and the dashboard's default Frontier view show the same points with the same Pareto
front. The dashboard draws one oracle: a study's own oracle points are listed under the chart
instead, so they are the only rows of the CSV the chart leaves out.

Runs on this checkout's default results (`dvc repro`); skipped where there are none."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.test_dashboard import APP, AppTest, frame, metric, widget

REPO = Path(__file__).resolve().parents[1]
CSV = REPO / "plots" / "frontier" / "frontier.csv"
KEY = ["study", "method", "operating_point"]


@pytest.fixture
def default_view(monkeypatch: pytest.MonkeyPatch):
    if not (CSV.exists() and (REPO / "results" / "frontier.parquet").exists() and (REPO / "metrics" / "frontier.json").exists()):
        pytest.skip("no default results in this checkout (run `dvc repro`)")
    monkeypatch.setenv("DLAB_ROOT", str(REPO))
    at = AppTest.from_file(APP, default_timeout=180).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_static_frontier_and_dashboard_agree(default_view) -> None:
    at = default_view
    summary = json.loads((REPO / "metrics" / "frontier.json").read_text())
    assert widget(at.selectbox, "Dataset").value == summary["dataset"]
    assert widget(at.selectbox, "Verifier").value == summary["verifier"]["name"]

    static = pl.read_csv(CSV, schema_overrides={"operating_point": pl.String})
    study_oracles = static.filter((pl.col("kind") == "oracle") & (pl.col("study") != "baselines"))
    static = static.join(study_oracles.select(KEY), on=KEY, how="anti")
    shown = pl.from_pandas(frame(at, "points_table"))
    assert shown.height == static.height == int(metric(at, "Points shown"))
    both = static.join(shown, on=KEY, how="inner", suffix="_dash")
    assert both.height == static.height, "the same points"
    assert (both["accuracy"] - both["accuracy_dash"]).abs().max() < 1e-12
    assert (both["cost_per_item_usd"] - both["cost_per_item_usd_dash"]).abs().max() < 1e-15
    off = both.filter(pl.col("on_pareto") != pl.col("on_pareto_dash"))
    assert off.is_empty(), f"Pareto flags differ: {off.select(KEY).rows()}"
    assert int(metric(at, "On the Pareto front")) == int(static["on_pareto"].sum())

    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    front = next(t for t in figure["data"] if t.get("name") == "Pareto front")
    expected = static.filter(pl.col("on_pareto") & (pl.col("cost_per_item_usd") > 0)).sort("cost_per_item_usd")
    assert front["x"] == pytest.approx(expected["cost_per_item_usd"].to_list())
    assert front["y"] == pytest.approx(expected["accuracy"].to_list())
    if study_oracles.height:
        assert any(f"Not drawn: {study_oracles.height} study oracle point(s)" in c.value for c in at.caption)
