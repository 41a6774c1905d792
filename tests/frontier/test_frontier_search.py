"""The frontier's cascade search above frontier.exhaustive_limit (frontier_cascades): it finds what
enumeration finds on a small case, builds long cascades, reports itself, and refuses what it cannot do."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import yaml

from delegation_lab.params.root import FrontierParams, parse_params
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation import IntervalParams, Verifier
from delegation_lab.frontier.build import build_frontier, pareto_mask
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA

from tests.conftest import REPO

JUDGE = Verifier("judge", 0.1, 0.1)
SOLVERS = [("A", 2.5, 3.0), ("B", 1.5, 1.0), ("C", 0.5, 0.3), ("D", 0.0, 0.1), ("E", -0.5, 0.02)]  # name, skill, price
NO_STUDIES = pl.DataFrame(schema=SUMMARY_SCHEMA)
QUICK = IntervalParams(resamples=100)


def labeled(n: int = 300, seed: int = 0, solvers: list[tuple[str, float, float]] = SOLVERS) -> pl.DataFrame:
    """Solvers whose right answers share item difficulty (a cascade's later members fix what earlier ones miss)."""
    rng = np.random.default_rng(seed)
    ease = rng.normal(size=n)
    frames = [pl.DataFrame({"item_id": [f"i{i:04d}" for i in range(n)], "solver": name,
                            "correct": rng.random(n) < 1 / (1 + np.exp(-(skill + ease))),
                            "cost_usd": price * rng.uniform(0.5, 1.5, n)})
              for name, skill, price in solvers]
    return pl.concat(frames)


def frontier(data: pl.DataFrame, search: pl.DataFrame | None = None, **params) -> tuple[pl.DataFrame, dict]:
    return build_frontier(data, NO_STUDIES, FrontierParams(**params), "x", verifier=JUDGE, intervals=QUICK, search_labeled=search)


def cascade_front(table: pl.DataFrame) -> list[str]:
    """The Pareto set of the singles and cascades (mixtures are built on all pairs only when exhaustive)."""
    rows = table.filter(pl.col("kind").is_in(["single", "cascade"]))
    return sorted(rows.filter(pl.Series(pareto_mask(rows["cost_per_item_usd"].to_numpy(), rows["accuracy"].to_numpy())))["method"])


def cascades(table: pl.DataFrame) -> list[list[str]]:
    return [m.removeprefix("cascade:").split(">") for m in table.filter(pl.col("kind") == "cascade")["method"]]


@pytest.mark.parametrize("seed", [0, 1])
def test_search_finds_the_front_that_enumeration_finds_on_five_solvers(seed: int):
    data = labeled(seed=seed)
    every, every_metrics = frontier(data, cascade={"seeds": 3})
    # searched on the very items it is reported on, so both fronts are measured alike
    searched, searched_metrics = frontier(data, data, exhaustive_limit=0, cascade={"seeds": 3})
    assert every_metrics["search"]["exhaustive"] and not searched_metrics["search"]["exhaustive"]
    assert len(cascades(every)) == 25  # C(5,2) + C(5,3) + C(5,4)
    assert len(cascades(searched)) < 25  # the dominated ones are not measured
    assert any(m.startswith("cascade:") for m in cascade_front(every))
    assert cascade_front(searched) == cascade_front(every)


def test_a_narrow_beam_tries_fewer_cascades_than_exist():
    data = labeled()
    _, metrics = frontier(data, data, exhaustive_limit=0, cascade={"seeds": 1, "beam": 2})
    search = metrics["search"]
    assert search["cascades_possible"] == 25
    assert 0 < search["cascades_considered"] <= 2 * 5 * 3  # beam x solvers x (max_length - 1)
    assert search["cascades_considered"] < 25


@pytest.mark.parametrize("max_length", [3, 4])
def test_cascades_of_three_or_more_solvers_when_max_length_allows(max_length: int):
    data = labeled()
    table, _ = frontier(data, data, exhaustive_limit=0, cascade={"seeds": 3, "max_length": max_length})
    lengths = {len(c) for c in cascades(table)}
    assert max(lengths) == max_length
    enumerated, _ = frontier(data, cascade={"seeds": 1, "max_length": max_length})
    assert len(cascades(enumerated)) == {3: 20, 4: 25}[max_length]


def test_pairs_only_at_max_length_two():
    data = labeled()
    table, metrics = frontier(data, data, exhaustive_limit=0, cascade={"seeds": 1, "max_length": 2})
    assert {len(c) for c in cascades(table)} == {2}
    assert metrics["search"]["cascades_considered"] <= 16 * 5


def test_the_search_block_says_how_the_cascades_were_chosen():
    small = labeled(solvers=SOLVERS[:3])
    _, metrics = frontier(small, cascade={"seeds": 2})
    assert {k: v for k, v in metrics["search"].items() if k != "seconds"} == {
        "solvers": 3, "exhaustive": True, "exhaustive_limit": 64, "cascades_possible": 4, "cascades_considered": 4,
        "cascades_kept": 4, "max_length": 4, "beam": None, "search_split": None}
    data = labeled()
    table, metrics = frontier(data, labeled(seed=7), exhaustive_limit=10, cascade={"seeds": 2, "beam": 3})
    search = metrics["search"]
    assert (search["exhaustive"], search["beam"], search["search_split"], search["cascades_possible"]) == (False, 3, "train", 25)
    assert search["cascades_kept"] == len(cascades(table)) > 0


def test_above_the_limit_mixtures_sit_on_the_hull_and_intervals_on_the_points_reported():
    data = labeled()
    table, _ = frontier(data, data, exhaustive_limit=0, cascade={"seeds": 1})
    pairs = {m for m in table.filter(pl.col("kind") == "mixture")["method"]}
    assert 0 < len(pairs) <= 4  # consecutive hull vertices of 5 singles, not all 10 pairs
    with_interval = table["accuracy_ci_low"].is_not_null()
    assert (with_interval | ~table["on_pareto"]).all()  # every Pareto point has one
    assert not with_interval.all()  # the other mixture points have none


def test_the_search_split_must_not_be_the_reported_split():
    with pytest.raises(ValueError, match="cascade.search_split 'train' is frontier.split too"):
        FrontierParams(split="train")
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["frontier"]["cascade"] = {**raw["frontier"].get("cascade", {}), "search_split": "test"}
    with pytest.raises(ConfigError, match=r"frontier: .*cascade.search_split 'test' is frontier.split too"):
        parse_params(raw)


def test_a_search_split_that_cannot_be_searched_is_named():
    data = labeled()
    with pytest.raises(ConfigError, match=r"frontier.cascade.search_split: 5 solvers .* split 'train', which has no labeled answers"):
        frontier(data, None, exhaustive_limit=0)
    four = labeled(seed=3, solvers=SOLVERS[:4])
    with pytest.raises(ConfigError, match="has the solvers A, B, C, D, not those of frontier.split"):
        frontier(data, four, exhaustive_limit=0)
    holey = labeled(seed=3).slice(1)
    with pytest.raises(ConfigError, match=r"lacks 1 of its 300 items x 5 solvers' labels"):
        frontier(data, holey, exhaustive_limit=0)
    frontier(labeled(solvers=SOLVERS[:3]), None, cascade={"seeds": 1})  # exhaustive: no search split needed
