"""The dashboard's Portfolio page (dashboards/views/portfolio.py) over a metrics/portfolio.json that
`build_portfolio` wrote, through AppTest: the chart, the chosen models per k, a router among them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delegation_lab.pipeline.tables import write_json_atomic

from tests.portfolio.test_portfolio import GOLD, params, table
from tests.portfolio.test_portfolio_routers import embeddings, with_knn

streamlit_testing = pytest.importorskip("streamlit.testing.v1")
APP = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"
PAGE = "views/portfolio.py"


def write_portfolio_metrics(root: Path) -> dict:
    """metrics/portfolio.json of the 4-model toy (k = 2 chosen: the kNN router over a and b) under `root`."""
    from delegation_lab.portfolio.selection import build_portfolio

    metrics = build_portfolio(table(), with_knn(params()), GOLD, embeddings())
    write_json_atomic(metrics, root / "metrics" / "portfolio.json")
    return metrics


def open_portfolio(root: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DLAB_ROOT", str(root))
    at = streamlit_testing.AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def table_with(at, *columns: str, rows: int):
    """The page's one st.dataframe with `columns` and `rows` rows (AppTest does not expose keys)."""
    found = [df.value for df in at.dataframe if set(columns) <= set(df.value.columns) and len(df.value) == rows]
    assert len(found) == 1, [list(df.value.columns) for df in at.dataframe]
    return found[0]


def test_portfolio_page_shows_each_k_and_its_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = write_portfolio_metrics(tmp_path)
    at = open_portfolio(tmp_path, monkeypatch)
    assert at.title[0].value == "Portfolio: which k models to deploy"
    chart = at.get("plotly_chart")
    assert len(chart) == 1
    names = [t["name"] for t in json.loads(chart[0].proto.spec)["data"] if t.get("showlegend", True)]
    assert len(names) == 3 and names[0] == "k=1 single: c", names  # one legend entry per k: the chosen, named
    title = json.loads(chart[0].proto.spec)["layout"]["title"]["text"]
    assert title.startswith(f"portfolio k = 1..{metrics['max_k']} of 4 models · verifier ") and "chosen on" in title, title
    assert names[1].startswith("k=2 router knn lambda=") and names[1].endswith(": a | b"), names
    chosen = table_with(at, "select_accuracy", "candidates", rows=3)
    assert chosen["k"].tolist() == [1, 2, 3]
    assert chosen["arrangement"].tolist()[:2] == ["single", "router"] and chosen["models"].tolist()[:2] == ["c", "a | b"]
    assert chosen["cost_per_item_usd"].tolist()[1] == pytest.approx(metrics["portfolios"]["2"]["cost_per_item_usd"])
    per_arrangement = table_with(at, "select_accuracy", "candidates", rows=5)  # k = 1 single, k = 2, 3 cascade and router
    assert set(per_arrangement.query("k == 2")["arrangement"]) == {"cascade", "router"}
    assert next(m.label for m in at.metric) == "Oracle of all 4 models"


def test_portfolio_page_without_a_portfolio_says_how_to_make_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_portfolio(tmp_path, monkeypatch)
    assert any("metrics/portfolio.json" in i.value and i.value.startswith("No results yet") for i in at.info)
    assert not at.get("plotly_chart")
