"""The static picture (plots/frontier/frontier.png, drawn from plots/frontier/frontier.csv by the
frontier stage) and the dashboard's default Frontier view show the same points with the same Pareto
front. The dashboard draws one oracle: a study's own oracle points are listed under the chart
instead, so they are the only rows of the CSV the chart leaves out.

Runs on the session's smoke DAG (the default DAG on the smoke profile, which every test run builds),
so CI checks it on every change instead of only where someone ran `make repro` first. The default
view draws each method's best point and the Pareto set (`frontier_points.best_and_pareto`); "All
operating points" draws every row of the CSV."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from dashboards import frontier_points as fp
from tests.dashboard.test_dashboard import APP, AppTest, frame, metric, widget

KEY = ["study", "method", "operating_point"]


@pytest.fixture
def smoke_root(smoke_dag, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = smoke_dag[0]
    monkeypatch.setenv("DLAB_ROOT", str(root))
    return root


@pytest.mark.parametrize("view", [fp.BEST, fp.ALL_POINTS])
def test_static_frontier_and_dashboard_agree(smoke_root: Path, view: str) -> None:
    at = AppTest.from_file(APP, default_timeout=180)
    if view != fp.BEST:
        at.query_params["view"] = view
    at = at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert widget(at.radio, "Points").value == view
    summary = json.loads((smoke_root / "metrics" / "frontier.json").read_text())
    assert widget(at.selectbox, "Dataset").value == summary["dataset"]
    assert widget(at.selectbox, "Verifier").value == summary["verifier"]["name"]

    every = pl.read_csv(smoke_root / "plots" / "frontier" / "frontier.csv", schema_overrides={"operating_point": pl.String})
    study_oracles = every.filter((pl.col("kind") == "oracle") & (pl.col("study") != "baselines"))
    every = every.join(study_oracles.select(KEY), on=KEY, how="anti")
    static = fp.best_and_pareto(every) if view == fp.BEST else every
    assert view == fp.BEST or static.height > fp.best_and_pareto(every).height, "the views differ on the smoke DAG"
    shown = pl.from_pandas(frame(at, "points_table"))
    assert shown.height == static.height == int(metric(at, "Points shown"))
    both = static.join(shown, on=KEY, how="inner", suffix="_dash")
    assert both.height == static.height, "the same points"
    assert (both["accuracy"] - both["accuracy_dash"]).abs().max() < 1e-12
    assert (both["cost_per_item_usd"] - both["cost_per_item_usd_dash"]).abs().max() < 1e-15
    off = both.filter(pl.col("on_pareto") != pl.col("on_pareto_dash"))
    assert off.is_empty(), f"Pareto flags differ: {off.select(KEY).rows()}"
    assert int(metric(at, "On the Pareto front")) == int(every["on_pareto"].sum())

    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    front = next(t for t in figure["data"] if t.get("name") == "Pareto front")
    expected = every.filter(pl.col("on_pareto") & (pl.col("cost_per_item_usd") > 0)).sort("cost_per_item_usd")
    assert front["x"] == pytest.approx(expected["cost_per_item_usd"].to_list())
    assert front["y"] == pytest.approx(expected["accuracy"].to_list())
    if study_oracles.height:
        assert any(f"Not drawn: {study_oracles.height} study oracle point(s)" in c.value for c in at.caption)
