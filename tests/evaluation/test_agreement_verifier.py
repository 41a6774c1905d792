"""The `agreement` verifier (evaluation.agreement): exact verdicts on a hand-built answers table,
answers compared as the labeler compares them, the refusal of caches without final answers, its
checks paid and counted in the frontier's cascades, and FP / FN rates against gold (evaluation.rates)."""

import json
import math
import shutil

import numpy as np
import polars as pl
import pytest

from delegation_lab.params.root import FrontierParams, parse_params, read_yaml
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation import VerifierParams, build_verifier, error_rates
from delegation_lab.evaluation.agreement import from_answers
from delegation_lab.frontier.build import SolverMatrix, baseline_points
from delegation_lab.frontier.baselines import cascade_items
from delegation_lab.pipeline.layout import Layout

from tests.conftest import REPO

ITEMS = ["i1", "i2", "i3", "i4", "i5", "i6"]
GOLD = ["10", "5", "7", "3", "0.5", "B"]
CHOICES = [None, None, None, None, None, ["x", "y", "z"]]
# parsed final answers; None with error = a backend error
ANSWERS = {
    "A": ["10", "4", "7", None, "0.5", " b"],  # i4: an error
    "B": ["10", "5", "7", "3", "0.5", "B"],   # always right
    "V": ["10", "4", "8", "3", "0.50000001", "B"],  # agrees with A on i1, i2 (both wrong), i5 (within tolerance), i6 (letter case)
}
COST = {"A": 0.001, "B": 0.01, "V": 0.1}


def answers_table(answers: dict[str, list] = ANSWERS, texts: bool = True) -> pl.DataFrame:
    rows = []
    for solver, parsed in answers.items():
        for item, gold, choices, p in zip(ITEMS, GOLD, CHOICES, parsed, strict=True):
            right = p is not None and (p.strip().upper() == gold if choices else math.isclose(float(p), float(gold), rel_tol=1e-6))
            rows.append({"solver": solver, "item_id": item, "correct": right, "parsed_answer": p,
                         "answer_text": (f"so the answer is {p}" if p is not None else None) if texts else None,
                         "error": "HTTP 500" if p is None and texts else None, "cost_usd": COST[solver] * (1 + ITEMS.index(item)),
                         "extra": json.dumps({"replay_source_file": f"/caches/{solver}.csv"}),
                         "split": "test" if item in ("i1", "i2", "i3") else "train", "gold": gold, "choices": choices,
                         "answer_format": None})
    return pl.DataFrame(rows, schema_overrides={"choices": pl.List(pl.String)})


def agreement(models=("V",), min_agree=1, answers: pl.DataFrame | None = None):
    params = VerifierParams(kind="agreement", models=list(models), min_agree=min_agree)
    return from_answers(params, answers_table() if answers is None else answers)


def verdicts(v, solver: str) -> list[bool]:
    return v.accepts(solver, ITEMS, np.zeros(len(ITEMS), dtype=bool), 0).tolist()


def test_an_answer_is_accepted_exactly_where_the_verifier_model_gives_the_same_final_answer():
    v = agreement()
    assert v.name == "agreement(V)"
    # i1 same, i2 same (both wrong: a false positive), i3 differ (a false negative), i4 A erred,
    # i5 equal within label.numeric_tolerance, i6 the same letter
    assert verdicts(v, "A") == [True, True, False, False, True, True]
    assert verdicts(v, "B") == [True, False, False, True, True, True]
    assert verdicts(v, "V") == [True] * 6  # the only verifier model checks no one's answer but others'
    # every seed sees the same verdicts, and table() serves the vectorised studies
    assert np.array_equal(v.accepts("A", ITEMS, np.ones(6, dtype=bool), 7), v.accepts("A", ITEMS, np.zeros(6, dtype=bool), 0))
    table = v.table(["A", "B"], ITEMS, np.zeros((6, 2), dtype=bool), [0, 1])
    assert table.shape == (2, 6, 2) and table[1, :, 1].tolist() == verdicts(v, "B")


def test_min_agree_counts_the_models_other_than_the_solver_checked():
    both = agreement(("B", "V"), min_agree=2)
    assert both.name == "agreement(B,V;min_agree=2)"
    assert verdicts(both, "A") == [True, False, False, False, True, True]  # B and V agree with A
    assert verdicts(both, "B") == verdicts(agreement(("V",)), "B")  # B is not its own witness: capped at 1 other
    either = agreement(("B", "V"), min_agree=1)
    assert verdicts(either, "A") == [True, True, True, False, True, True]


def test_a_solver_whose_cache_has_no_final_answers_is_refused_naming_the_missing_fields():
    textless = answers_table({**ANSWERS, "V": [None] * 6}).with_columns(
        pl.when(pl.col("solver") == "V").then(None).otherwise(pl.col("answer_text")).alias("answer_text"),
        pl.when(pl.col("solver") == "V").then(None).otherwise(pl.col("error")).alias("error"))
    with pytest.raises(InputError) as caught:
        agreement(answers=textless)
    message = str(caught.value)
    assert "solver 'V' has none: `parsed_answer` and `answer_text` are empty in all 6 of its answers" in message
    assert "its cache /caches/V.csv has no reply text" in message
    with pytest.raises(ConfigError, match=r"evaluation\.verifier\.models: W not among the solvers with labelled answers \(A, B, V\)"):
        agreement(("W",))
    gap = answers_table().filter(~((pl.col("solver") == "V") & (pl.col("item_id") == "i3")))
    with pytest.raises(InputError, match=r"evaluation\.verifier\.models: 'V' has no labelled answer on 1 items .*'i3'"):
        agreement(answers=gap)


def test_agreement_params_are_checked_naming_the_key():
    raw = read_yaml(REPO / "params.yaml")
    for verifier, complaint in [({"kind": "agreement"}, "kind agreement needs `models`"),
                                ({"kind": "agreement", "models": ["A", "A"]}, "distinct solver names"),
                                ({"kind": "agreement", "models": ["A"], "min_agree": 2}, "min_agree 2 is more than the 1 models"),
                                ({"kind": "judge", "models": ["A"]}, "models are for kinds agreement and learned"),
                                ({"kind": "judge", "min_agree": 2}, "min_agree is for kind agreement")]:
        raw["evaluation"] = {"verifier": verifier}
        with pytest.raises(ConfigError, match=rf"evaluation\.verifier: .*{complaint}"):
            parse_params(raw)
    raw["evaluation"] = {"verifier": {"kind": "agreement", "models": ["A"], "min_agree": 0}}
    with pytest.raises(ConfigError, match=r"evaluation\.verifier\.min_agree"):
        parse_params(raw)


def test_false_positive_and_false_negative_rates_against_gold():
    v = agreement()
    labeled = answers_table()
    rates = error_rates(v, labeled)
    # A: right on i1, i3, i5, i6; wrong on i2, i4. Accepted i1, i2, i5, i6 -> FP i2 (1 of 2), FN i3 (1 of 4)
    assert rates["by_solver"]["A"] == {"answers": 6, "right": 4, "wrong": 2, "false_positives": 1, "false_negatives": 1,
                                       "false_positive_rate": 0.5, "false_negative_rate": 0.25}
    # B: right everywhere, rejected on i2, i3 -> FN 2 of 6; no wrong answer, so no FP rate
    assert rates["by_solver"]["B"]["false_negative_rate"] == 2 / 6 and rates["by_solver"]["B"]["false_positive_rate"] is None
    # V: wrong on i2, i3, accepted everywhere -> FP 2 of 2
    assert rates["by_solver"]["V"]["false_positive_rate"] == 1.0 and rates["by_solver"]["V"]["false_negative_rate"] == 0.0
    assert rates["all"] == {"answers": 18, "right": 14, "wrong": 4, "false_positives": 3, "false_negatives": 3,
                            "false_positive_rate": 0.75, "false_negative_rate": 3 / 14}
    # measured at build on the answers it checks (V's own pass unchecked), by split, and in the
    # verifier's description (what metrics files record): A and B, FP 1 of 2, FN 3 of 10
    assert v.measured["all"]["by_solver"] == {s: rates["by_solver"][s] for s in ("A", "B")}
    assert v.measured["test"]["by_solver"]["A"]["false_negatives"] == 1 and v.measured["train"]["all"]["answers"] == 6
    described = v.describe()
    assert (described["false_positive_rate"], described["false_negative_rate"]) == (0.5, 0.3)
    assert described["models"] == ["V"] and described["kind"] == "agreement" and described["name"] == "agreement(V)"
    assert v.deployable and described["deployable"] is True  # a real check a deployment can run
    json.dumps(described)  # a metrics file can hold it


def test_error_rates_of_the_simulated_judge_and_gold_on_the_same_table():
    many = pl.DataFrame({"solver": ["A"] * 20_000, "item_id": [f"i{k}" for k in range(20_000)],
                         "correct": [k % 2 == 0 for k in range(20_000)]})
    judge = build_verifier(VerifierParams(false_positive_rate=0.1, false_negative_rate=0.2))
    rates = error_rates(judge, many, seeds=[0, 1])
    assert rates["seeds"] == 2 and rates["all"]["wrong"] == 10_000
    assert abs(rates["all"]["false_positive_rate"] - 0.1) < 0.01 and abs(rates["all"]["false_negative_rate"] - 0.2) < 0.01
    gold = error_rates(build_verifier(VerifierParams(kind="gold")), many)["all"]
    assert (gold["false_positives"], gold["false_negatives"]) == (0, 0)


def matrix(solvers=("A", "B", "V")) -> SolverMatrix:
    table = answers_table()
    correct = np.column_stack([table.filter(pl.col("solver") == s)["correct"].to_numpy() for s in solvers])
    cost = np.column_stack([table.filter(pl.col("solver") == s)["cost_usd"].to_numpy() for s in solvers])
    return SolverMatrix(list(solvers), correct, cost, ITEMS)


def test_a_cascade_pays_and_counts_each_verifier_answer_once_per_item():
    m, v = matrix(), agreement()
    a, b, cv = (m.cost[:, k] for k in range(3))
    right, cost, calls = cascade_items(m, [0, 1], v, seed=0)  # A > B, A checked against V
    rejected = ~np.array(verdicts(v, "A"))  # i3, i4
    assert np.allclose(cost, a + cv + np.where(rejected, b, 0))
    assert calls.tolist() == [2, 2, 3, 3, 2, 2]
    assert right.tolist() == [True, False, True, True, True, True]  # i2: the accepted wrong answer
    # A > V: V's answer bought for the check is the answer taken on escalation, paid once
    _, cost, calls = cascade_items(m, [0, 2], v, seed=0)
    assert np.allclose(cost, a + cv) and calls.tolist() == [2] * 6
    # A > B > V: B's check needs V too; the last solver is never checked
    _, cost, calls = cascade_items(m, [0, 1, 2], v, seed=0)
    assert np.allclose(cost, a + cv + np.where(rejected, b, 0)) and calls.tolist() == [2, 2, 3, 3, 2, 2]
    # a judge's checks cost nothing, as before
    judge = build_verifier(VerifierParams(false_positive_rate=0.0, false_negative_rate=0.0))
    _, cost, calls = cascade_items(m, [0, 1], judge, seed=0)
    assert np.allclose(cost, a + np.where(m.correct[:, 0], 0, b)) and calls.max() == 2


def test_the_frontier_cascades_name_the_agreement_verifier():
    points = baseline_points(matrix(("A", "B")), FrontierParams(mixture_points=1, cascade={"seeds": 3}), agreement(("B",)))
    cascade = points.filter(pl.col("kind") == "cascade")
    assert cascade["method"].to_list() == ["cascade:A>B"]  # one seed: agreement draws no noise
    assert set(points["verifier"].to_list()) == {"agreement(B)", "oracle"}
    assert cascade["calls_per_item"].item() == 2.0  # A, then B's answer for the check, kept on escalation
    assert cascade["cost_per_item_usd"].item() == pytest.approx(np.mean([(COST["A"] + COST["B"]) * k for k in range(1, 7)]))


def test_the_registered_builder_reads_the_project(tmp_path):
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    layout = Layout(tmp_path)
    table = answers_table()
    layout.answers_dir.mkdir(parents=True)
    for solver, part in table.group_by("solver"):
        part.select("solver", "item_id", "parsed_answer", "answer_text", "error", "cost_usd", "extra").with_columns(
            request_hash=pl.lit("h")).write_parquet(layout.answers(solver[0]))
    table.select("solver", "item_id", "correct").with_columns(request_hash=pl.lit("h")).write_parquet(layout.labels)
    layout.items_dir.mkdir()
    items = table.filter(pl.col("solver") == "A").select("item_id", "split", "gold", "choices")
    for split in ("ability", "train", "test"):
        items.filter(pl.col("split") == split).write_parquet(layout.items(split))
    v = build_verifier(VerifierParams(kind="agreement", models=["V"]), tmp_path)
    assert verdicts(v, "A") == verdicts(agreement(), "A")
    assert v.check_costs("A", ["i2"])["V"].tolist() == [COST["V"] * 2] and v.check_costs("V", ITEMS) == {}
