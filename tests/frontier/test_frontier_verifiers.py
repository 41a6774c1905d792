"""The frontier under several verifiers (frontier/verifiers.py): `evaluation.compare_verifiers` sets
with their own cascades and Pareto front, every row's `verifier_deployable`, methods resting on a
simulated or gold verifier marked, each verifier's FP / FN on test and train, and the table."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation import Verifier, VerifierParams
from delegation_lab.evaluation.agreement import from_answers
from delegation_lab.frontier.baselines import SolverMatrix, cascade_items
from delegation_lab.frontier.build import frontier_with_outcomes
from delegation_lab.frontier.verifiers import verifier_sets
from delegation_lab.params.root import FrontierParams
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA

SOLVERS = {"A": (0.9, 3.0), "B": (0.7, 1.0), "C": (0.5, 0.1), "D": (0.6, 0.2)}  # accuracy, US$ per answer
JUDGE = Verifier("judge", 0.05, 0.05)
PARAMS = FrontierParams(mixture_points=1, cascade={"seeds": 2, "max_length": 3}, exhaustive_limit=0)  # searched on train


def answers(n: int = 160, seed: int = 0) -> pl.DataFrame:
    """Every solver's final answer to n items (half test, half train); gold is 1, a wrong answer 2 or 3,
    so wrong answers sometimes agree with each other (a vote's false positives)."""
    rng = np.random.default_rng(seed)
    rows = []
    for solver, (p, price) in SOLVERS.items():
        for k in range(n):
            right = bool(rng.random() < p)
            final = "1" if right else str(rng.integers(2, 4))
            rows.append({"solver": solver, "item_id": f"i{k:03d}", "correct": right, "parsed_answer": final,
                         "answer_text": f"the answer is {final}", "error": None, "cost_usd": price, "extra": None,
                         "split": "test" if k % 2 else "train", "gold": "1", "choices": None, "answer_format": None})
    return pl.DataFrame(rows, schema_overrides={"choices": pl.List(pl.String)})


def vote(table: pl.DataFrame) -> Verifier:
    return from_answers(VerifierParams(kind="agreement", models=["B", "C", "D"], min_agree=2), table)


def study(verifier: str, method: str = "m", accuracy: float = 0.8) -> pl.DataFrame:
    return pl.DataFrame([{"study": "s", "method": method, "seed": 0, "split": "test", "operating_point": "default",
                          "accuracy": accuracy, "cost_per_item_usd": 0.5, "calls_per_item": 1.0, "return": None, "n_items": 80,
                          "dataset": "x", "solver_set": "A,B,C,D", "run_id": None, "verifier": verifier}], schema=SUMMARY_SCHEMA)


def frontier(summaries: pl.DataFrame, compared: dict | None = None, verifier: Verifier = JUDGE):
    table = answers()
    test, train = table.filter(pl.col("split") == "test"), table.filter(pl.col("split") == "train")
    return frontier_with_outcomes(test, summaries, PARAMS, "x", verifier=verifier, search_labeled=train,
                                  compared=compared, rates_labeled={"train": train})


def test_a_compared_vote_gets_its_own_set_with_cascades_searched_under_it():
    v = vote(answers())
    table, metrics, outcomes = frontier(study(JUDGE.name), {"vote": v})
    assert set(table["verifier"]) == {JUDGE.name, v.name, "oracle"}
    assert table.filter(pl.col("kind") == "oracle").height == 1  # one oracle, whatever the verifiers
    assert set(table.filter(pl.col("study") == "s")["verifier"]) == {JUDGE.name}  # the studies stay under the main one
    under_vote = table.filter(pl.col("verifier") == v.name)
    assert sorted(under_vote.filter(pl.col("kind") == "single")["method"]) == [f"always-{s}" for s in SOLVERS]
    cascades = under_vote.filter(pl.col("kind") == "cascade")
    assert cascades.height >= 1 and under_vote["on_pareto"].any() and table.filter(pl.col("verifier") == JUDGE.name)["on_pareto"].any()
    assert metrics["search"][v.name]["cascades_considered"] > 0  # searched on train under the vote
    # a cascade's point under the vote is the vote's cascade: its verdicts, its checks paid
    test = answers().filter(pl.col("split") == "test")
    m = SolverMatrix.from_labeled(test)
    row = cascades.row(0, named=True)
    order = [m.solvers.index(s) for s in row["method"].removeprefix("cascade:").split(">")]
    final, cost, _ = cascade_items(m, order, v, 0)
    assert row["accuracy"] == pytest.approx(final.mean()) and row["cost_per_item_usd"] == pytest.approx(cost.mean())
    assert f"{row['method']} [{v.name}]" in metrics["methods"] and "s/m" in metrics["methods"]
    assert set(outcomes["verifier"]) <= {JUDGE.name, "oracle"}  # outcome rows: the main set's only
    # the vote's FP / FN against gold on the test split (every solver's answers), by hand
    correct = test["correct"].to_numpy()
    accepted = v.accepts(test["solver"].to_numpy().astype(object), test["item_id"].to_numpy().astype(object), correct, 0)
    rates = metrics["verifiers"][v.name]
    assert rates["error_rates"]["test"]["false_positive_rate"] == pytest.approx((accepted & ~correct).sum() / (~correct).sum())
    assert rates["error_rates"]["test"]["false_negative_rate"] == pytest.approx((~accepted & correct).sum() / correct.sum())
    assert rates["error_rates"]["train"]["answers"] == answers().filter(pl.col("split") == "train").height
    assert (rates["role"], rates["compare_name"], rates["deployable"], rates["not_deployable"]) == ("compared", "vote", True, None)
    main = metrics["verifiers"][JUDGE.name]
    assert (main["role"], main["deployable"], main["not_deployable"]) == ("main", False, "simulated verifier: not deployable")
    assert main["error_rates"]["test"]["false_positive_rate"] == pytest.approx(0.05, abs=0.06)  # the judge's own rate, drawn
    json.dumps(metrics)


def test_rows_under_a_judge_are_not_deployable_and_say_so():
    v = vote(answers())
    summaries = pl.concat([study(JUDGE.name), study("gold", "m_gold"), study(None, "m_unknown")])
    table, metrics, _ = frontier(summaries, {"vote": v})
    deployable = dict(table.group_by("verifier").agg(pl.col("verifier_deployable").unique()).iter_rows())
    assert deployable == {JUDGE.name: [False], "gold": [False], v.name: [True], "oracle": [False], "unrecorded": [None]}
    methods = metrics["methods"]
    assert methods["s/m"]["not_deployable"] == "simulated verifier: not deployable"
    assert methods["s/m_gold [gold]"]["not_deployable"] == "gold verifier: upper bound, not deployable"
    assert methods["s/m_unknown [unrecorded]"]["verifier_deployable"] is None and "not_deployable" not in methods["s/m_unknown [unrecorded]"]
    judged = [k for k, e in methods.items() if e["kind"] == "cascade" and e["verifier"] == JUDGE.name]
    assert judged and all(methods[k]["not_deployable"] == "simulated verifier: not deployable" for k in judged)
    voted = [k for k, e in methods.items() if e["kind"] == "cascade" and e["verifier"] == v.name]
    assert voted and all(methods[k]["verifier_deployable"] and "not_deployable" not in methods[k] for k in voted)
    # a single takes no accept decision: its set's verifier is recorded, nothing is flagged
    assert methods["always-A"]["verifier_deployable"] is False and "not_deployable" not in methods["always-A"]


def test_two_sets_under_one_verifier_name_are_refused():
    same = Verifier("judge", 0.05, 0.05, seed=1)  # another seed, the same name: its rows would merge with the main set's
    with pytest.raises(ConfigError, match=r"evaluation\.compare_verifiers: 'again' is the verifier judge\(.*\), as evaluation\.verifier is"):
        verifier_sets(JUDGE, {"again": same}, [])
    assert [s.verifier.name for s in verifier_sets(JUDGE, {"g": Verifier("gold")}, ["gold"])] == [JUDGE.name, "gold"]  # one gold set


def test_the_frontier_table_marks_points_resting_on_a_simulated_verifier(tmp_path):
    v = vote(answers())
    _, metrics, _ = frontier(study(JUDGE.name), {"vote": v})
    path = tmp_path / "frontier.json"
    path.write_text(json.dumps({"dataset": "x", "split": "test", "n_items": 80, "verifier": JUDGE.describe(), **metrics}))
    got = CliRunner().invoke(app, ["frontier-table", str(path)])
    assert got.exit_code == 0, got.output
    header, table = got.output.split("\n\n", 1)
    rates = metrics["verifiers"][v.name]["error_rates"]["test"]
    assert f"verifier {JUDGE.name} (simulated verifier: not deployable, FP " in header
    assert (f"`vote` = {v.name} (deployable, FP {rates['false_positive_rate']:.3f} / FN {rates['false_negative_rate']:.3f} "
            "on test)") in header
    assert table.splitlines()[0].endswith("| verifier |")
    study_row = next(line for line in table.splitlines() if line.startswith("| s/m |"))
    assert study_row.endswith("| simulated verifier: not deployable |")
    vote_rows = [line for line in table.splitlines() if " [vote] |" in line]
    assert vote_rows and all(r.startswith("| cascade:") and r.endswith("| deployable |") for r in vote_rows)
    assert next(line for line in table.splitlines() if line.startswith("| always-A |")).endswith("| — |")
    assert table.count("| always-A") == 1  # the vote's singles are the main set's again: listed once
