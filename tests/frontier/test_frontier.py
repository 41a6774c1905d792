"""Frontier: baselines, oracle, Pareto marks, AIQ / APGR / CPT, and the RouteLLM reference numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from delegation_lab.params.root import FrontierParams
from delegation_lab.data import build_items
from delegation_lab.data.params import DataParams
from delegation_lab.evaluation import IntervalParams, Verifier
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.frontier.build import (
    Anchors,
    SolverMatrix,
    aiq,
    apgr,
    baseline_points,
    build_frontier,
    cascade_outcome,
    cpt,
    hull,
    pareto_mask,
)
from delegation_lab.labeling.matchers import imported_correct
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA, SUMMARY_SCHEMA
from delegation_lab.pipeline.tables import with_outcome_columns
from delegation_lab.solvers import build_solver

DEFAULT_NAME = Verifier("judge", 0.02, 0.03).name
ANCHORS = Anchors(weak_cost=1.0, weak_acc=0.5, strong_cost=3.0, strong_acc=0.9)


def test_pareto_mask():
    cost = np.array([1.0, 2.0, 2.0, 3.0, 0.5])
    acc = np.array([0.6, 0.7, 0.65, 0.69, 0.6])
    assert pareto_mask(cost, acc).tolist() == [False, True, False, False, True]


def test_hull_is_concave_and_non_decreasing():
    pts = [(0.0, 0.0), (1.0, 0.5), (2.0, 0.55), (3.0, 0.9), (4.0, 0.8), (2.0, 0.4)]
    assert hull(pts) == [(0.0, 0.0), (1.0, 0.5), (3.0, 0.9)]


def test_random_router_has_apgr_one_half_and_linear_cpt():
    mixture = [(1.0 + 2.0 * p, 0.5 + 0.4 * p) for p in np.linspace(0, 1, 11)]
    assert apgr(mixture, ANCHORS) == pytest.approx(0.5, abs=1e-6)
    assert cpt(mixture, ANCHORS, 0.5) == pytest.approx(0.5, abs=1e-3)
    assert cpt(mixture, ANCHORS, 0.8) == pytest.approx(0.8, abs=1e-3)


def test_a_router_that_reaches_strong_quality_cheaply():
    router = [(1.5, 0.9)]  # strong quality at a quarter of the extra cost
    assert apgr(router, ANCHORS) == pytest.approx(1 - 0.25 / 2, abs=1e-3)
    assert cpt(router, ANCHORS, 0.5) == pytest.approx(0.125, abs=1e-3)
    # a point under the weak-strong line never helps: CPT falls back to the line itself
    assert cpt([(2.0, 0.6)], ANCHORS, 0.8) == pytest.approx(0.8, abs=1e-3)


def test_aiq_of_a_flat_method():
    # one point at the cheapest cost: the hull is flat at its accuracy over the whole interval
    assert aiq([(1.0, 0.7)], 1.0, 3.0) == pytest.approx(0.7, abs=1e-6)
    # reaching the accuracy only at the top of the interval: a ramp from (0, 0)
    assert aiq([(3.0, 0.9)], 1.0, 3.0) == pytest.approx(0.9 * (2.0 / 3.0), abs=1e-3)


def matrix() -> SolverMatrix:
    correct = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]], dtype=bool)
    cost = np.array([[3.0, 1.0, 0.1]] * 4)
    return SolverMatrix(["A", "B", "C"], correct, cost)


def test_oracle_and_singles():
    points = baseline_points(matrix(), FrontierParams(mixture_points=1, cascade={"seeds": 2}))
    oracle = points.filter(pl.col("method") == "oracle").row(0, named=True)
    assert oracle["accuracy"] == 0.75
    assert oracle["cost_per_item_usd"] == pytest.approx((1.0 + 3.0 + 0.1 + 0.1) / 4)  # B, A, C, cheapest on a miss
    singles = points.filter(pl.col("kind") == "single").sort("method")
    assert singles["accuracy"].to_list() == [0.75, 0.5, 0.25]
    mix = points.filter(pl.col("method") == "mix:A+C").row(0, named=True)
    assert mix["accuracy"] == pytest.approx(0.5) and mix["cost_per_item_usd"] == pytest.approx(1.55)


def test_cascade_with_a_perfect_judge_is_the_escalation_ladder():
    m = matrix()
    acc, cost, calls = cascade_outcome(m, [2, 1, 0], Verifier("gold"), seed=0)
    assert acc == 0.75  # every item some solver gets right is answered right
    assert cost == pytest.approx(((0.1 + 1.0) + (0.1 + 1.0 + 3.0) + 0.1 + (0.1 + 1.0 + 3.0)) / 4)
    assert calls == pytest.approx((2 + 3 + 1 + 3) / 4)
    noisy = cascade_outcome(m, [2, 1, 0], Verifier("judge", 1.0, 0.0), seed=0)
    assert noisy[0] == 0.25 and noisy[2] == 1.0  # a judge that accepts everything stops at C


def test_frontier_merges_study_summaries():
    labeled = pl.DataFrame({
        "item_id": ["a", "b", "c", "d"] * 3,
        "solver": ["A"] * 4 + ["B"] * 4 + ["C"] * 4,
        "correct": [True, True, True, False, True, False, True, False, False, False, True, False],
        "cost_usd": [3.0] * 4 + [1.0] * 4 + [0.1] * 4,
    })
    summaries = pl.DataFrame([
        {"study": "s", "method": "m", "seed": k, "split": "test", "operating_point": "default", "accuracy": 0.7 + 0.02 * k,
         "cost_per_item_usd": 0.5, "calls_per_item": 1.2, "return": None, "n_items": 4, "dataset": "x", "solver_set": "A,B,C", "run_id": f"r{k}",
         "verifier": DEFAULT_NAME}
        for k in range(3)
    ] + [{"study": "s", "method": "env.oracle", "seed": 0, "split": "test", "operating_point": "default", "accuracy": 0.9,
          "cost_per_item_usd": 0.2, "calls_per_item": 1.0, "return": None, "n_items": 4, "dataset": "x", "solver_set": "A,B,C", "run_id": None,
          "verifier": DEFAULT_NAME}],
        schema=SUMMARY_SCHEMA)
    table, metrics = build_frontier(labeled, summaries, FrontierParams(mixture_points=1, cascade={"seeds": 1}), "x")
    study = table.filter(pl.col("study") == "s").row(0, named=True)
    assert study["n_seeds"] == 3 and study["accuracy"] == pytest.approx(0.72)
    assert study["on_pareto"]  # 0.72 at $0.50 beats every baseline at that price
    assert not table.filter(pl.col("kind") == "oracle")["on_pareto"].any()
    assert table.filter(pl.col("method") == "env.oracle")["kind"].to_list() == ["oracle"]  # a study's oracle: upper bound
    assert metrics["weak_solver"] == "C" and metrics["strong_solver"] == "A"
    assert metrics["methods"]["s/m"]["best_accuracy"] == pytest.approx(0.72)


def test_routellm_gsm8k_reference_numbers(shared_data: Path):
    """On RouteLLM's cached GSM8K answers: always-GPT-4 85.7 %, always-Mixtral 63.8 %, oracle 92.9 %."""
    items = [i for i in build_items(DataParams(dataset="gsm8k", gsm8k={"path": str(shared_data / "gsm8k")})) if i.split == "test"]
    rows = []
    for name, model, price in [("mixtral", "mistralai/Mixtral-8x7B-Instruct-v0.1", (0.6, 0.6)), ("gpt4", "gpt-4-1106-preview", (10.0, 30.0))]:
        params = SolverParams(backend="replay", model=model, price=Price(input_usd_per_mtok=price[0], output_usd_per_mtok=price[1]),
                              replay=ReplayParams(path=str(shared_data / "routellm_gsm8k" / "gsm8k_responses.csv"), source_model=model))
        for item, answer in zip(items, build_solver(name, params).solve(items), strict=True):
            assert answer.error is None
            rows.append({"item_id": item.item_id, "solver": name, "correct": imported_correct(answer.extra), "cost_usd": answer.cost_usd})
    table, metrics = build_frontier(pl.DataFrame(rows), pl.DataFrame(schema=SUMMARY_SCHEMA), FrontierParams(), "gsm8k")
    acc = {r["method"]: r["accuracy"] for r in table.iter_rows(named=True)}
    assert round(acc["always-gpt4"], 3) == 0.857
    assert round(acc["always-mixtral"], 3) == 0.638
    assert round(acc["oracle"], 3) == 0.929
    assert metrics["strong_solver"] == "gpt4" and metrics["weak_solver"] == "mixtral"


def _labeled(n: int = 200, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    ids = [f"i{k:04d}" for k in range(n)]
    rows = []
    for solver, p, price in [("A", 0.9, 3.0), ("B", 0.7, 1.0), ("C", 0.4, 0.1)]:
        for item, right in zip(ids, rng.random(n) < p, strict=True):
            rows.append({"item_id": item, "solver": solver, "correct": bool(right), "cost_usd": price})
    return pl.DataFrame(rows)


def _study(labeled: pl.DataFrame, verifier: str, method: str = "m", picks: str = "B") -> tuple[pl.DataFrame, pl.DataFrame]:
    """A 'study' that always answers with solver `picks`, two seeds: its summaries and outcomes."""
    mine = labeled.filter(pl.col("solver") == picks).sort("item_id")
    outcomes = with_outcome_columns(pl.concat([  # it records no trajectory: the oracle-gap columns null
        mine.select(pl.lit("s").alias("study"), pl.lit(method).alias("method"), pl.lit("default").alias("operating_point"),
                    pl.lit(seed, dtype=pl.Int64).alias("seed"), pl.lit("test").alias("split"), pl.lit("x").alias("dataset"),
                    pl.lit(verifier).alias("verifier"), "item_id", pl.col("correct").cast(pl.Float64), "cost_usd")
        for seed in (0, 1)
    ])).select(list(OUTCOME_SCHEMA))
    summaries = pl.DataFrame([
        {"study": "s", "method": method, "seed": seed, "split": "test", "operating_point": "default",
         "accuracy": float(mine["correct"].mean()), "cost_per_item_usd": float(mine["cost_usd"].mean()), "calls_per_item": 1.0,
         "return": None, "n_items": mine.height, "dataset": "x", "solver_set": "A,B,C", "run_id": None, "verifier": verifier}
        for seed in (0, 1)
    ], schema=SUMMARY_SCHEMA)
    return summaries, outcomes


def test_every_point_has_an_item_bootstrap_interval_and_its_verifier():
    labeled = _labeled()
    judge = Verifier("judge", 0.05, 0.05)
    summaries, outcomes = _study(labeled, judge.name)
    table, metrics = build_frontier(labeled, summaries, FrontierParams(mixture_points=1, cascade={"seeds": 2}), "x",
                                    verifier=judge, outcomes=outcomes, intervals=IntervalParams(resamples=400))
    for col in ("verifier", "accuracy_ci_low", "accuracy_ci_high", "cost_ci_low", "cost_ci_high"):
        assert col in table.columns
    assert set(table.filter(pl.col("kind") != "oracle")["verifier"]) == {judge.name}
    assert table["accuracy_ci_low"].null_count() == 0
    assert ((table["accuracy_ci_low"] <= table["accuracy"]) & (table["accuracy"] <= table["accuracy_ci_high"])).all()
    width = table.filter(pl.col("method") == "always-C").row(0, named=True)
    assert 0.05 < width["accuracy_ci_high"] - width["accuracy_ci_low"] < 0.2  # ~ +-1.96 sqrt(.24/200)
    m = metrics["methods"]["s/m"]
    assert m["verifier"] == judge.name and m["accuracy_ci"][0] < m["best_accuracy"] < m["accuracy_ci"][1]
    # the study is always-B: always-B ties it (no domination), a cheaper cascade may beat it; the
    # paired test against the best single solver at <= cost (always-B itself) is exactly zero
    dom = table.filter(pl.col("method") == m["dominated_by"].split("@")[0]).sort("cost_per_item_usd").row(0, named=True)
    assert dom["kind"] in ("cascade", "mixture") and dom["cost_per_item_usd"] <= m["best_accuracy_cost_per_item_usd"]
    assert dom["accuracy"] >= m["best_accuracy"]
    assert m["vs_best_single"]["against"] == "always-B" and m["vs_best_single"]["difference"] == 0.0
    assert m["vs_best_single"]["p_value"] == 1.0


def test_a_dominated_learned_method_names_the_cheapest_dominating_baseline():
    labeled = _labeled()
    summaries, outcomes = _study(labeled, DEFAULT_NAME, picks="A")
    worse = summaries.with_columns(pl.col("accuracy") - 0.3, pl.col("cost_per_item_usd") * 2)  # pays A's price twice, less accurate
    _, metrics = build_frontier(labeled, worse, FrontierParams(mixture_points=1, cascade={"seeds": 1}), "x")
    assert metrics["methods"]["s/m"]["dominated_by"] is not None
    assert metrics["methods"]["s/m"]["accuracy_ci"] is None  # no outcomes given: no interval, never a made-up one


def test_a_gold_verifier_run_forms_its_own_set():
    labeled = _labeled()
    judge = Verifier("judge", 0.05, 0.05)
    s_judge, o_judge = _study(labeled, judge.name, method="m")
    s_gold, o_gold = _study(labeled, "gold", method="m_gold", picks="A")
    table, metrics = build_frontier(labeled, pl.concat([s_judge, s_gold]), FrontierParams(mixture_points=1, cascade={"seeds": 1}),
                                    "x", verifier=judge, outcomes=pl.concat([o_judge, o_gold]))
    assert set(table["verifier"]) == {judge.name, "gold", "oracle"}
    gold = table.filter(pl.col("verifier") == "gold")
    assert "cascade:C>B>A" in gold["method"].to_list()  # baselines recomputed under a perfect verifier
    assert gold.filter(pl.col("method") == "cascade:C>B>A")["accuracy"].item() == pytest.approx(
        labeled.group_by("item_id").agg(pl.col("correct").any())["correct"].mean())
    assert "s/m_gold [gold]" in metrics["methods"] and metrics["methods"]["s/m"]["verifier"] == judge.name
    # Pareto within each set: the judge set has its own front
    for v in (judge.name, "gold"):
        assert table.filter((pl.col("verifier") == v) & pl.col("on_pareto")).height >= 1


def test_cascades_share_the_verifiers_common_random_numbers():
    m = SolverMatrix.from_labeled(_labeled())
    v = Verifier("judge", 0.2, 0.2)
    assert cascade_outcome(m, [2, 1, 0], v, 3) == cascade_outcome(m, [2, 1, 0], v, 3)
    assert cascade_outcome(m, [2, 1, 0], v, 3) != cascade_outcome(m, [2, 1, 0], v, 4)


def test_a_summary_without_its_verifier_is_kept_apart():
    labeled = _labeled()
    summaries, _ = _study(labeled, DEFAULT_NAME)
    table, metrics = build_frontier(labeled, summaries.with_columns(pl.lit(None, dtype=pl.String).alias("verifier")),
                                    FrontierParams(mixture_points=1, cascade={"seeds": 1}), "x")
    assert "s/m [unrecorded]" in metrics["methods"]
    assert table.filter(pl.col("study") == "s")["verifier"].to_list() == ["unrecorded"]


def test_methods_carry_the_fields_metrics():
    labeled = _labeled()
    summaries, outcomes = _study(labeled, DEFAULT_NAME, picks="B")
    _, metrics = build_frontier(labeled, summaries, FrontierParams(mixture_points=1, cascade={"seeds": 1}), "x", outcomes=outcomes)
    m, a = metrics["methods"]["s/m"], metrics["methods"]["always-A"]
    for key in ("gain_at_best_single", "gap_at_oracle", "cost_save", "pareto_dist", "arena_score"):
        assert key in m and key in a
    assert a["gain_at_best_single"] == 0.0 and a["cost_save"] == 0.0  # the best single solver against itself
    assert m["gain_at_best_single"] < 0 and m["cost_save"] is None  # always-B never reaches A's accuracy
    assert "gain_at_best_single" not in metrics["methods"]["oracle"]


def test_frontier_table_command_renders_the_metrics(tmp_path):
    import json

    from typer.testing import CliRunner

    from delegation_lab.cli import app

    labeled = _labeled()
    summaries, outcomes = _study(labeled, DEFAULT_NAME, picks="B")
    _, metrics = build_frontier(labeled, summaries, FrontierParams(mixture_points=1, cascade={"seeds": 1}), "x", outcomes=outcomes)
    path = tmp_path / "frontier.json"
    path.write_text(json.dumps({"dataset": "x", "split": "test", "n_items": 200, "verifier": {"name": DEFAULT_NAME}, **metrics}))
    got = CliRunner().invoke(app, ["frontier-table", str(path), "--kinds", "single,study"])
    assert got.exit_code == 0, got.output
    m = metrics["methods"]["s/m"]
    assert f"| s/m | study | {m['best_accuracy']:.3f} [{m['accuracy_ci'][0]:.3f}, {m['accuracy_ci'][1]:.3f}]" in got.output
    assert "| always-A | single |" in got.output and "\n| cascade:" not in got.output  # cascades only as dominators
    assert CliRunner().invoke(app, ["frontier-table", str(tmp_path / "missing.json")]).exit_code == 1
