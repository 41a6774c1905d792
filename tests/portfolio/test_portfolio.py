"""Portfolio selection (`delegation_lab.portfolio.selection`): chosen on the selection split only, reported on
the frontier split, a cascade of cheap complementary models beating the best single at less cost."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from delegation_lab.params.root import PortfolioParams, parse_params, read_yaml
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.portfolio.selection import build_portfolio
from delegation_lab.portfolio.report import plot_portfolio, portfolio_table

from tests.conftest import REPO

GOLD = Verifier("gold", source="gold labels")
COST = {"a": 1.0, "b": 5.0, "c": 20.0, "d": 30.0}


def right(solver: str, i: int) -> bool:
    """20 items: a right on 0-9, b on 10-19 (together every item), c on 0-15, d on 0-11."""
    return {"a": i < 10, "b": i >= 10, "c": i < 16, "d": i < 12}[solver]


def table(flip_test: bool = False) -> pl.DataFrame:
    rows = [{"split": split, "item_id": f"{split}{i:02d}", "solver": s, "cost_usd": COST[s],
             "correct": right(s, i) != (flip_test and split == "test")}
            for split in ("train", "test") for i in range(20) for s in COST]
    return pl.DataFrame(rows)


def params(**portfolio):
    p = parse_params(read_yaml(REPO / "params.yaml"))
    return p.model_copy(update={"portfolio": PortfolioParams(**{"max_k": 3, **portfolio})})


def test_k1_is_the_best_single_and_k2_a_cheaper_more_accurate_cascade():
    out = build_portfolio(table(), params(), GOLD)
    one, two = out["portfolios"]["1"], out["portfolios"]["2"]
    assert one["models"] == ["c"] and one["arrangement"] == "single" and one["accuracy"] == pytest.approx(0.8)
    assert out["best_single"] == {"model": "c", "cost_per_item_usd": 20.0}
    assert two["models"] == ["a", "b"] and two["arrangement"] == "cascade"
    assert two["accuracy"] == pytest.approx(1.0) and two["cost_per_item_usd"] == pytest.approx(1 + 5 * 0.5)
    assert two["of_oracle_accuracy"] == pytest.approx(1.0) and two["of_best_single_cost"] == pytest.approx(3.5 / 20)
    lo, hi = one["accuracy_ci"]
    assert lo <= 0.8 <= hi and lo < hi
    assert out["portfolios"]["3"]["models"][:2] == ["a", "b"] and len(out["portfolios"]["3"]["models"]) == 3


def test_selection_never_sees_the_reported_split():
    chosen = {k: p["models"] for k, p in build_portfolio(table(), params(), GOLD)["portfolios"].items()}
    flipped = build_portfolio(table(flip_test=True), params(), GOLD)
    assert {k: p["models"] for k, p in flipped["portfolios"].items()} == chosen
    assert flipped["portfolios"]["1"]["accuracy"] == pytest.approx(0.2)  # the flip shows on the reported split only


def test_select_split_equal_to_frontier_split_is_refused():
    raw = read_yaml(REPO / "params.yaml")
    raw["portfolio"] = {"select_split": "test"}
    with pytest.raises(ConfigError, match="portfolio.select_split") as refused:
        parse_params(raw)
    assert refused.value.problems[0].startswith("portfolio.select_split 'test' is frontier.split too")
    bypassed = params().model_copy(update={"portfolio": PortfolioParams(select_split="test")})
    with pytest.raises(ConfigError, match="portfolio.select_split"):
        build_portfolio(table(), bypassed, GOLD)


def test_a_selection_split_without_labels_names_the_key():
    with pytest.raises(ConfigError, match="portfolio.select_split: split 'ability' has no labeled answers"):
        build_portfolio(table(), params(select_split="ability"), GOLD)


def test_metrics_keys_table_and_plot(tmp_path: Path):
    out = build_portfolio(table(), params(), GOLD)
    assert {"select_split", "split", "n_items", "verifier", "confidence", "oracle", "best_single", "portfolios"} <= set(out)
    assert out["select_split"] == "train" and out["split"] == "test" and list(out["portfolios"]) == ["1", "2", "3"]
    for p in out["portfolios"].values():
        assert {"models", "arrangement", "accuracy", "accuracy_ci", "cost_per_item_usd", "cost_ci", "of_oracle_accuracy",
                "of_best_single_cost", "candidates", "front"} <= set(p)
        assert p["front"]
    assert out["portfolios"]["2"]["candidates"] == 6  # beam 16 > 4 singles: every pair
    # beam 2 keeps the singles' Pareto set (a, c) and extends only those: ab ac ad bc cd, never bd
    assert build_portfolio(table(), params(beam=2), GOLD)["portfolios"]["2"]["candidates"] == 5
    assert "cascade: a > b" in portfolio_table(out)
    png = plot_portfolio(out, tmp_path / "portfolio.png")
    assert (tmp_path / "portfolio.png").stat().st_size > 1000 and png is None
