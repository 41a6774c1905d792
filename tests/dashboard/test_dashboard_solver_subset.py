"""The Frontier page's solver picker (dashboards/solver_subset.py): the default subset at many
models, the points within a subset, and the oracle recomputed on it, checked against the frontier
stage's own oracle (frontier_with_outcomes) on the same solvers."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from dashboards import frontier_points, queries, solver_subset
from delegation_lab.params.root import FrontierParams
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.frontier.build import frontier_with_outcomes
from delegation_lab.frontier.baselines import BASELINES
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.tables import read_labeled_answers
from tests.dashboard.test_dashboard import APP, SOLVERS, AppTest, metric, widget
from tests.dashboard.test_dashboard import synthetic_project  # noqa: F401 - the fixture

pytest.importorskip("streamlit.testing.v1")


def stage(root: Path, solvers: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(frontier, baselines' outcomes) the frontier stage computes on these solvers' answers."""
    labeled = read_labeled_answers(Layout(root))
    labeled = labeled.filter((pl.col("split") == "test") & pl.col("solver").is_in(solvers))
    table, _, outcomes = frontier_with_outcomes(labeled, pl.DataFrame(), FrontierParams(mixture_points=3), "synthetic")
    return table, outcomes


@pytest.fixture(scope="module")
def with_baselines(synthetic_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """The synthetic project plus the baselines' item-level outcomes the stage writes."""
    root = tmp_path_factory.mktemp("subset") / "project"
    shutil.copytree(synthetic_project, root)
    write_outcomes(Layout(root), BASELINES, stage(root, sorted(SOLVERS))[1])
    return root


def singles_of(outcomes: pl.DataFrame, solvers: list[str]) -> dict[str, pl.DataFrame]:
    return {s: outcomes.filter(pl.col("method") == f"always-{s}").select("seed", "item_id", "correct", "cost_usd") for s in solvers}


@pytest.mark.parametrize("chosen", [["A", "B", "C"], ["A", "B"], ["B", "C"], ["C"]])
def test_subset_oracle_is_the_stage_oracle_on_those_solvers(with_baselines: Path, chosen: list[str]) -> None:
    everything = pl.read_parquet(Layout(with_baselines).outcomes(BASELINES))
    ours = solver_subset.subset_oracle(singles_of(everything, chosen), IntervalParams())
    table, _ = stage(with_baselines, chosen)
    theirs = table.filter(pl.col("kind") == "oracle").row(0, named=True)
    assert ours["accuracy"] == pytest.approx(theirs["accuracy"])
    assert ours["cost_per_item_usd"] == pytest.approx(theirs["cost_per_item_usd"])
    assert ours["accuracy_ci_low"] <= ours["accuracy"] <= ours["accuracy_ci_high"]


def frontier_rows(singles: list[tuple[str, float, float]], extra: list[tuple[str, str, str]] = ()) -> pl.DataFrame:
    rows = [{"study": "baselines", "method": f"always-{s}", "operating_point": "default", "kind": "single",
             "accuracy": a, "cost_per_item_usd": c, "solver_set": s} for s, a, c in singles]
    rows += [{"study": st, "method": m, "operating_point": "default", "kind": k, "accuracy": 0.5, "cost_per_item_usd": 0.1,
              "solver_set": s} for st, m, k, s in extra]
    return pl.DataFrame(rows)


def test_default_subset_is_every_solver_when_few_else_the_front_and_the_best() -> None:
    few = frontier_rows([("a", 0.5, 1.0), ("b", 0.9, 2.0), ("c", 0.4, 3.0)])
    assert solver_subset.default_subset(few) == ["a", "b", "c"]
    # 12 singles: s00..s09 dominated (expensive, weak), cheap c1 and strong best on the front; tie on accuracy: cheaper wins
    many = frontier_rows([(f"s{k:02d}", 0.3, 5.0 + k) for k in range(10)] + [("cheap", 0.5, 0.1), ("best", 0.95, 2.0), ("twin", 0.95, 3.0)])
    assert solver_subset.default_subset(many) == ["best", "cheap"]


def many_model_frontier() -> pl.DataFrame:
    """14 singles; a cascade of two dominated singles (x, y) on the front, as the 42-model headline
    cascade is; a router over three dominated singles, off the front but its study's best; a point
    that ties the cascade exactly and wins the budget's tie-break (study `abc` sorts first) though
    the front's `pareto_mask` keeps only the first of equals; a mixture and an oracle."""
    singles = [("mini", 0.90, 0.0001), ("big", 0.97, 0.0016), ("mid", 0.93, 0.0004), ("x", 0.70, 0.00012),
               ("y", 0.80, 0.0009), ("r1", 0.60, 0.0005), ("r2", 0.62, 0.0006), ("r3", 0.64, 0.0007),
               ("p", 0.50, 0.0003), ("q", 0.55, 0.0002)] + [(f"s{k}", 0.40, 0.001 + k * 1e-4) for k in range(4)]
    rows = frontier_rows(singles).with_columns(pl.lit(None, dtype=pl.String).alias("verifier"))
    extra = [("baselines", "cascade:x>y", "default", "cascade", 0.96, 0.00025, "x,y"),
             ("abc", "m", "tie", "study", 0.96, 0.00025, "p,q"),
             ("abc", "m", "hi", "study", 0.965, 0.01, "big"),
             ("routers", "knn", "tau=0.5", "study", 0.935, 0.0008, "r1,r2,r3"),
             ("routers", "knn", "tau=0.9", "study", 0.92, 0.0009, "r1,r2,r3"),
             ("baselines", "mixture:s0+s1", "p=0.5", "mixture", 0.40, 0.00105, "s0,s1"),
             ("baselines", "oracle", "default", "oracle", 0.99, 0.00005, ",".join(s for s, _, _ in singles))]
    return pl.concat([rows, pl.DataFrame([dict(zip(["study", "method", "operating_point", "kind", "accuracy", "cost_per_item_usd",
                                                    "solver_set"], e)) for e in extra]).with_columns(
        pl.lit(None, dtype=pl.String).alias("verifier"))], how="vertical")


def drawn(points: pl.DataFrame) -> pl.DataFrame:
    """What the Frontier page draws by default: each method's best and the Pareto set, front recomputed."""
    return frontier_points.best_and_pareto(queries.with_pareto(points))


def test_many_model_default_keeps_the_front_each_methods_best_and_the_budget_winner() -> None:
    points = many_model_frontier()
    chosen = solver_subset.default_subset(points)
    assert {"x", "y", "r1", "r2", "r3", "p", "q", "mini", "big"} <= set(chosen)  # cascade, router, tie, front, best
    assert not {"s0", "s1", "s2", "s3"} & set(chosen)  # nothing rests on them: the subset stays small
    kept = solver_subset.within(points, chosen)
    assert {"cascade:x>y", "knn"} <= set(kept["method"])
    everything, default = drawn(points), drawn(kept)
    assert "knn" in set(default["method"])  # the router's best point stays on the default view
    # both views of the page: each method's best and the front, and every operating point
    for ours_view, their_view in ((default, everything), (queries.with_pareto(kept), queries.with_pareto(points))):
        for budget in queries.budget_steps(their_view):
            ours, theirs = queries.best_under_budget(ours_view, budget), queries.best_under_budget(their_view, budget)
            assert (ours and frontier_points.point_name(ours)) == (theirs and frontier_points.point_name(theirs)), budget
    assert frontier_points.point_name(queries.best_under_budget(everything, 0.0003)) == "cascade:x>y"
    assert frontier_points.point_name(queries.best_under_budget(points, 0.0003)) == "abc/m @ tie"  # the tie-break case is live
    # the singles' own front and best (the former default) lose the cascade: its budget winner is a single
    singles_front = solver_subset.within(points, ["big", "mid", "mini"])
    assert queries.best_under_budget(drawn(singles_front), 0.0003)["method"] == "always-mini"
    why = solver_subset.default_reasons(points)
    assert any("cascade:x>y" in r and "Pareto" in r for r in why["x"]) and any("knn" in r for r in why["r1"])
    assert "`r2`: routers/knn @ tau=0.5 (best point of its method)" in solver_subset.reasons_text(why)


def forty_two_model_frontier() -> tuple[pl.DataFrame, list[str]]:
    """(frontier rows, the 42 solvers): 42 singles, the headline cascade of two dominated singles on
    the front (as zeroeval_gsm8k's `deepseek-coder-v2→mistral-large-2`), routers that chose among
    all 42, and the oracle."""
    singles = [("mini", 0.90, 0.0001), ("big", 0.97, 0.0016), ("x", 0.70, 0.00012), ("y", 0.80, 0.0009)]
    singles += [(f"m{k:02d}", 0.30 + 0.01 * k, 0.002 + 1e-4 * k) for k in range(38)]
    models = sorted(s for s, _, _ in singles)
    every = ",".join(models)
    rows = [("baselines", "cascade:x>y", "default", "cascade", 0.96, 0.00025, "x,y"),
            ("routers", "mf", "lambda=0.1", "study", 0.965, 0.0006, every),
            ("routers", "mf", "lambda=1", "study", 0.94, 0.0003, every),
            ("routers", "knn", "tau=0.5", "study", 0.95, 0.002, every),
            ("baselines", "oracle", "default", "oracle", 0.99, 0.00005, every)]
    points = pl.concat([frontier_rows(singles).with_columns(pl.lit(None, dtype=pl.String).alias("verifier")),
                        pl.DataFrame([dict(zip(["study", "method", "operating_point", "kind", "accuracy", "cost_per_item_usd",
                                                "solver_set"], r)) for r in rows]).with_columns(
                            pl.lit(None, dtype=pl.String).alias("verifier"))], how="vertical")
    return points, models


def test_42_models_the_default_keeps_the_headline_cascade_routers_on_every_solver_and_the_budget_winner() -> None:
    """The default subset stays small (the routers need none of it: the page keeps them), the
    default view holds the cascade and the routers, and at every budget its winner is the one with
    all 42 solvers."""
    points, models = forty_two_model_frontier()
    assert len(models) == 42
    assert solver_subset.keeps_whole_pool(models)
    chosen = solver_subset.default_subset(points)
    assert set(chosen) == {"mini", "big", "x", "y"}  # the front and each method's best, routers aside
    assert solver_subset.within(points, chosen).filter(pl.col("study") == "routers").is_empty()  # the subset alone loses them
    kept = solver_subset.within(points, chosen, whole_pool=models)
    default, everything = drawn(kept), drawn(points)
    assert "cascade:x>y" in set(default["method"]) and {"mf", "knn"} <= set(default["method"])
    for budget in queries.budget_steps(everything):
        ours, theirs = queries.best_under_budget(default, budget), queries.best_under_budget(everything, budget)
        assert (ours and frontier_points.point_name(ours)) == (theirs and frontier_points.point_name(theirs)), budget
    assert frontier_points.point_name(queries.best_under_budget(everything, 0.0003)) == "cascade:x>y"
    assert frontier_points.point_name(queries.best_under_budget(everything, 0.001)) == "routers/mf @ lambda=0.1"


def test_within_keeps_points_whose_solvers_are_all_chosen() -> None:
    points = frontier_rows([("a", 0.5, 1.0), ("b", 0.9, 2.0), ("c", 0.4, 3.0)], [
        ("baselines", "cascade:a>b", "cascade", "a,b"), ("routers", "knn", "study", "a,b,c"),
        ("baselines", "oracle", "oracle", "a,b,c"), ("envsim", "planner", "study", "")])
    kept = solver_subset.within(points, ["a", "b"])
    assert kept["method"].to_list() == ["always-a", "always-b", "cascade:a>b"]
    kept = solver_subset.within(points, ["a", "b"], whole_pool=["a", "b", "c"])  # and the router on every solver
    assert kept["method"].to_list() == ["always-a", "always-b", "cascade:a>b", "knn"]


def test_frontier_page_recomputes_the_oracle_on_the_chosen_solvers(with_baselines: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLAB_ROOT", str(with_baselines))
    at = AppTest.from_file(APP, default_timeout=60).run()
    picker = widget(at.multiselect, "Solvers taking part (3)")
    assert sorted(picker.value) == ["A", "B", "C"]  # three solvers: every one by default
    picker.set_value(["B", "C"]).run()
    assert not at.exception, [e.value for e in at.exception]
    theirs = stage(with_baselines, ["B", "C"])[0].filter(pl.col("kind") == "oracle").row(0, named=True)
    assert metric(at, "Oracle accuracy") == f"{theirs['accuracy']:.2%}"
    assert metric(at, "Oracle cost per item") == f"${theirs['cost_per_item_usd']:.3g}"
    at.radio(key="view").set_value("All operating points").run()
    shown = next(df.value for df in at.dataframe if {"on_pareto", "solver_set"} <= set(df.value.columns))
    assert all(set(s.split(",")) <= {"B", "C"} for s in shown["solver_set"]) and "always-A" not in set(shown["method"])
    assert at.query_params["models"] in (["B", "C"], ["C", "B"])
