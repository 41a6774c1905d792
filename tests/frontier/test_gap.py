"""Where the oracle gap goes (frontier/gap.py): the parts sum to the gap, each loss lands where it
belongs, studies without trajectories report routing and verifier together, old outcome files
still load, and the chart and the README table are written."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.evaluation import IntervalParams, Verifier
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.frontier.baselines import DEFAULT_VERIFIER, SolverMatrix
from delegation_lab.frontier.build import frontier_with_outcomes
from delegation_lab.frontier.cascades import run_cascade, verdicts
from delegation_lab.frontier.gap import decompose, oracle_gap
from delegation_lab.frontier.plot import plot_oracle_gap
from delegation_lab.params.root import FrontierParams
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import OUTCOME_OPTIONAL, OUTCOME_SCHEMA, SUMMARY_SCHEMA
from delegation_lab.pipeline.tables import read_outcomes, write_parquet_atomic

ITEMS = [f"i{k:02d}" for k in range(40)]
INTERVALS = IntervalParams(resamples=200)


def labeled(table: dict[str, tuple[list[bool], float]] | None = None) -> pl.DataFrame:
    """Labelled answers of solvers {name: (right per item, cost)}; by default three random ones."""
    if table is None:
        rng = np.random.default_rng(3)
        table = {s: ((rng.random(len(ITEMS)) < acc).tolist(), cost) for s, (acc, cost) in
                 {"A": (0.9, 3.0), "B": (0.7, 1.0), "C": (0.4, 0.1)}.items()}
    return pl.DataFrame([{"item_id": i, "solver": s, "correct": bool(right[k]), "cost_usd": cost}
                         for s, (right, cost) in table.items() for k, i in enumerate(ITEMS)])


def study(seeds: int = 2, with_columns: bool = True) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A study point (summary rows, outcomes): right on two items in three, or holding a right answer
    on every other item it got wrong."""
    rows = []
    for seed in range(seeds):
        for k, item in enumerate(ITEMS):
            right = float((k + seed) % 3 != 0)
            row = {"study": "s", "method": "m", "operating_point": "lambda=1", "seed": seed, "split": "test", "dataset": "x",
                   "verifier": DEFAULT_VERIFIER.name, "item_id": item, "correct": right, "cost_usd": 0.5 + 0.01 * k}
            if with_columns:
                row |= {"held_right": max(right, float(k % 2)), "answer_cost_usd": 0.4, "check_cost_usd": 0.05}
            rows.append(row)
    outcomes = pl.DataFrame(rows)
    summary = outcomes.group_by("study", "method", "operating_point", "seed", "split", "dataset", "verifier").agg(
        pl.col("correct").mean().alias("accuracy"), pl.col("cost_usd").mean().alias("cost_per_item_usd"),
        pl.lit(1.0).alias("calls_per_item"), pl.lit(None, dtype=pl.Float64).alias("return"),
        pl.len().cast(pl.Int64).alias("n_items"), pl.lit("A,B,C").alias("solver_set"))
    return summary.select(list(SUMMARY_SCHEMA)), outcomes


def gap_of(lab: pl.DataFrame, summaries: pl.DataFrame, outcomes: pl.DataFrame, verifier: Verifier = DEFAULT_VERIFIER,
           params: FrontierParams | None = None) -> tuple[dict, dict]:
    """(the frontier metrics, the oracle gap) as the frontier stage computes them."""
    params = params or FrontierParams(mixture_points=1, cascade={"seeds": 3})
    table, metrics, own = frontier_with_outcomes(lab, summaries, params, "x", verifier=verifier, outcomes=outcomes,
                                                 intervals=INTERVALS)
    everything = pl.concat([outcomes, own], how="diagonal_relaxed") if outcomes.height else own
    return metrics, oracle_gap(table, metrics["methods"], everything, "x", params.split, verifier.name, INTERVALS)


def test_the_parts_sum_to_the_gap_on_random_data() -> None:
    rng = np.random.default_rng(0)
    shape = (3, 500)
    oracle = (rng.random(shape[1]) < 0.9) * 1.0
    held = oracle * (rng.random(shape) < 0.8)  # a right answer within reach only where the oracle has one
    correct = held * rng.random(shape)  # fractional: expected values (a mixture), never above what it held
    cost, oracle_cost = rng.random(shape), rng.random(shape[1]) * 0.1
    check = cost * rng.random(shape) * 0.5  # what it paid splits into checks, the answer and the rest
    answer = (cost - check) * rng.random(shape)
    parts = decompose(correct, cost, oracle, oracle_cost, held, answer, check)
    np.testing.assert_allclose(parts["routing"] + parts["verifier"], parts["accuracy_gap"], rtol=0, atol=1e-15)
    np.testing.assert_allclose(parts["checks_usd"] + parts["escalations_usd"] + parts["answer_premium_usd"],
                               parts["cost_gap_usd"], rtol=0, atol=1e-15)
    assert parts["accuracy_gap"].mean() == pytest.approx(oracle.mean() - correct.mean(), abs=1e-15)
    assert (parts["routing"] >= 0).all() and (parts["verifier"] >= 0).all() and (parts["escalations_usd"] >= 0).all()


def test_every_reported_gap_is_the_measured_one_and_its_parts_sum_to_it() -> None:
    summaries, outcomes = study()
    metrics, gap = gap_of(labeled(), summaries, outcomes)
    assert gap["n_items"] == len(ITEMS) and gap["oracle"]["accuracy"] == pytest.approx(metrics["oracle"]["accuracy"], abs=1e-6)
    assert set(gap["methods"]) == {k for k, m in metrics["methods"].items() if m["kind"] != "oracle"}
    for name, m in gap["methods"].items():
        measured = metrics["oracle"]["accuracy"] - metrics["methods"][name]["best_accuracy"]
        assert m["accuracy_gap"] == pytest.approx(measured, abs=1.5e-6), name
        assert m["routing"] + m["verifier"] == pytest.approx(m["accuracy_gap"], abs=1.5e-6), name
        assert m["checks_usd"] + m["escalations_usd"] + m["answer_premium_usd"] == pytest.approx(m["cost_gap_usd"], abs=1e-12), name
        assert m["cost_gap_usd"] == pytest.approx(metrics["methods"][name]["best_accuracy_cost_per_item_usd"]
                                                  - metrics["oracle"]["cost_per_item_usd"], abs=1e-12), name
        for part in ("accuracy_gap", "routing", "verifier", "cost_gap_usd"):
            lo, hi = m[f"{part}_ci"]
            assert lo <= m[part] + 1e-9 and m[part] <= hi + 1e-9, (name, part)
    s = gap["methods"]["s/m"]  # the study's own columns: half its lost items held a right answer
    assert s["n_seeds"] == 2 and s["verifier"] > 0 and s["routing"] > 0
    assert s["checks_usd"] == pytest.approx(0.05) and s["escalations_usd"] == pytest.approx(np.mean(0.05 + 0.01 * np.arange(40)))


def test_a_single_solver_loses_only_to_routing() -> None:
    _, gap = gap_of(labeled(), pl.DataFrame(schema=SUMMARY_SCHEMA), pl.DataFrame(schema=OUTCOME_SCHEMA))
    for name in ("always-A", "always-B", "always-C"):
        m = gap["methods"][name]
        assert m["verifier"] == 0 and m["routing"] == m["accuracy_gap"] > 0
        assert m["checks_usd"] == 0 and m["escalations_usd"] == 0 and m["answer_premium_usd"] == pytest.approx(m["cost_gap_usd"])


def test_a_cascade_whose_verifier_rejects_a_right_answer_loses_it_to_the_verifier() -> None:
    # B (cheap) is right on the first half, A (dear) nowhere; a verifier that rejects every right
    # answer passes B's right answers on to A, which returns a wrong one: all lost to the verifier
    half = [k < len(ITEMS) // 2 for k in range(len(ITEMS))]
    lab = labeled({"A": ([False] * len(ITEMS), 3.0), "B": (half, 1.0)})
    rejects_right = Verifier("judge", 0.0, 1.0)
    _, gap = gap_of(lab, pl.DataFrame(schema=SUMMARY_SCHEMA), pl.DataFrame(schema=OUTCOME_SCHEMA), rejects_right)
    cascade = gap["methods"]["cascade:B>A"]
    assert cascade["accuracy_gap"] == pytest.approx(0.5) and cascade["verifier"] == pytest.approx(0.5) and cascade["routing"] == 0
    # it rejects B's wrong answers too: B paid and passed over on every item (escalation), A's answer
    # returned at 3.0 where the oracle pays B's 1.0 (its cheapest solver where none is right)
    assert cascade["escalations_usd"] == pytest.approx(1.0) and cascade["checks_usd"] == 0
    assert cascade["answer_premium_usd"] == pytest.approx(2.0) and cascade["cost_gap_usd"] == pytest.approx(3.0)
    assert gap["methods"]["always-A"]["routing"] == pytest.approx(0.5)


@dataclass(frozen=True)
class PricedCheck(Verifier):
    """A gold verdict whose check of any answer buys `model`'s answer at 0.2 per item."""

    model: str = "C"

    def check_costs(self, solver, item_ids):
        return {self.model: np.full(len(item_ids), 0.2)} if solver != self.model else {}


def test_a_cascade_splits_its_dollars_into_answer_escalations_and_checks() -> None:
    right = {"A": [True, False, True, False], "B": [False, True, True, False], "C": [False, False, True, True]}
    m = SolverMatrix(["A", "B", "C"], np.array([right[s] for s in "ABC"]).T, np.tile([0.1, 1.0, 0.2], (4, 1)),
                     ["i0", "i1", "i2", "i3"])
    verifier = PricedCheck("gold")
    run = run_cascade(m, [0, 1], verdicts(m, verifier, [0]), verifier)  # A, checked with C's answer, then B
    np.testing.assert_allclose(run.check_cost[0], 0.2)  # every answer of A is checked
    np.testing.assert_allclose(run.answer_cost[0], [0.1, 1.0, 0.1, 1.0])  # A's where it was accepted, else B's
    np.testing.assert_allclose(run.cost[0], [0.3, 1.3, 0.3, 1.3])  # escalations: A's 0.1 where B answered
    # C as a later member: its answer, bought by A's check, becomes the member's and is not bought again
    run = run_cascade(m, [0, 2], verdicts(m, verifier, [0]), verifier)
    np.testing.assert_allclose(run.cost[0], 0.3)
    np.testing.assert_allclose(run.check_cost[0], [0.2, 0.0, 0.2, 0.0])
    np.testing.assert_allclose(run.answer_cost[0], [0.1, 0.2, 0.1, 0.2])


def test_a_study_without_trajectories_reports_routing_and_verifier_together() -> None:
    summaries, outcomes = study(with_columns=False)
    parts = decompose(np.array([[1.0, 0.0]]), np.array([[1.0, 2.0]]), np.array([1.0, 1.0]), np.array([0.5, 0.5]))
    assert set(parts) == {"accuracy_gap", "routing_or_verifier", "cost_gap_usd"}
    _, gap = gap_of(labeled(), summaries, outcomes)
    s = gap["methods"]["s/m"]
    assert "routing" not in s and "verifier" not in s and "checks_usd" not in s
    assert s["routing_or_verifier"] == s["accuracy_gap"] and len(s["notes"]) == 2 and "trajectory" in s["notes"][0]


def test_outcome_files_without_the_optional_columns_still_load(tmp_path) -> None:
    layout = Layout(tmp_path)
    _, old = study(seeds=1, with_columns=False)
    write_parquet_atomic(old.with_columns(pl.lit("old").alias("study")), layout.outcomes("old"))  # from before the columns
    _, new = study(seeds=1)
    write_outcomes(layout, "s", new.drop("check_cost_usd"))  # a study that records two of them
    back = read_outcomes(layout)
    assert back.schema == pl.Schema(OUTCOME_SCHEMA) and back.height == 2 * len(ITEMS)
    mine = back.filter(pl.col("study") == "s")
    assert mine["check_cost_usd"].null_count() == len(ITEMS) and mine["held_right"].null_count() == 0
    olds = back.filter(pl.col("study") == "old")
    assert olds.height == len(ITEMS) and all(olds[c].null_count() == len(ITEMS) for c in OUTCOME_OPTIONAL)


def test_the_chart_and_the_readme_table_are_written(tmp_path) -> None:
    summaries, outcomes = study()
    metrics, gap = gap_of(labeled(), summaries, outcomes)
    png = plot_oracle_gap(gap, tmp_path / "oracle_gap.png", "x")
    assert png.stat().st_size > 10_000
    path = tmp_path / "frontier.json"
    path.write_text(json.dumps({"dataset": "x", "split": "test", **metrics, "oracle_gap": gap}))
    out = CliRunner().invoke(app, ["gap-table", str(path), "--top", "3"])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("| ")]
    assert len(lines) == 1 + 3 and lines[0].startswith("| method | kind | gap (acc) | routing | verifier")
    gaps = [float(line.split(" | ")[2].split()[0]) for line in lines[1:]]
    assert gaps == sorted(gaps) and gaps[0] == pytest.approx(min(m["accuracy_gap"] for m in gap["methods"].values()), abs=5e-4)


@pytest.mark.parametrize("text", [
    '{"dataset": "x", "split": "test", "methods": {}}', "[1, 2]",
    '{"dataset": "x", "split": "test", "oracle_gap": {"methods": {"m": {}}}}',
    '{"dataset": "x", "split": "test", "oracle_gap": {"oracle": {}, "n_items": 3, "methods": {"m": {}}}}',
])
def test_gap_table_of_a_file_of_another_shape_is_one_line(tmp_path, text: str) -> None:
    path = tmp_path / "frontier.json"
    path.write_text(text)
    out = CliRunner().invoke(app, ["gap-table", str(path)])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1 and "oracle_gap" in out.output, out.output


@pytest.mark.slow
def test_the_frontier_stage_decomposes_every_method_of_the_smoke_dag(smoke_dag) -> None:
    project = smoke_dag[0]
    fm = json.loads((project / "metrics" / "frontier.json").read_text())
    gap = fm["oracle_gap"]
    assert set(gap["methods"]) | set(gap["without_outcomes"]) == {k for k, m in fm["methods"].items() if m["kind"] != "oracle"}
    for name, m in gap["methods"].items():
        assert m["accuracy_gap"] == pytest.approx(fm["oracle"]["accuracy"] - fm["methods"][name]["best_accuracy"], abs=2e-6), name
        assert sum(m.get(p, 0.0) for p in ("routing", "verifier", "routing_or_verifier")) == pytest.approx(m["accuracy_gap"], abs=2e-6)
    split = {name for name, m in gap["methods"].items() if "verifier" in m and "checks_usd" in m}
    assert {n for n in gap["methods"] if n.split("/")[0] in ("routers", "coordinator") or n.startswith(("always-", "cascade:"))} <= split
    assert (project / "plots" / "frontier" / "oracle_gap.png").stat().st_size > 10_000
