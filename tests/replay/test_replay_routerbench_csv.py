"""RouterBench's wide frame exported to CSV, one file per dataset as RouterBench derivatives commit it
(pandas' index first, `sample_id`, `prompt`, `eval_name`, per model `<model>`, `<model>|model_response`,
`<model>|total_cost`): correctness at the score threshold, responses and costs kept, the pickle's
reader shared, and malformed files named by file and row."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.solvers.replay.cache import read_cache
from delegation_lab.solvers.replay.records import ReplayError

from tests.replay.test_replay import item, write_routerbench_pickle

GSM = pd.DataFrame({
    "sample_id": ["gsm8k.0", "gsm8k.1"],
    "prompt": ["['What is 2 + 2?']", "What is 3 \u00d7 3?"],
    "eval_name": ["gsm8k", "gsm8k"],
    "oracle_model_to_route_to": ["a/small", "b"],
    "a/small": [1.0, 0.0],
    "a/small|model_response": ["['4']", "None"],  # "None" is an answer text, not a missing cell
    "a/small|total_cost": [0.0001, 0.0002],
    "b": [1.0, 0.6],
    "b|model_response": ["four", "9.50"],
    "b|total_cost": [0.01, 0.02],
})
MMLU = pd.DataFrame({
    "sample_id": ["mmlu.0"], "prompt": ["Capital of France?"], "eval_name": ["mmlu"],
    "oracle_model_to_route_to": ["b"],
    "a/small": [0.7], "a/small|model_response": ["Paris"], "a/small|total_cost": [0.0003],
    "b": [None], "b|model_response": [None], "b|total_cost": [0.03],
})


def write_csv_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    GSM.to_csv(folder / "gsm8k.csv")  # pandas writes its index as a first, unnamed column
    MMLU.to_csv(folder / "mmlu.csv")
    return folder


def test_routerbench_csv_folder(tmp_path):
    folder = write_csv_folder(tmp_path / "routerbench")
    df = read_cache(folder, "routerbench_csv")
    assert df.height == 6 and set(df["model"]) == {"a/small", "b"}
    small = df.filter(df["model"] == "a/small")
    assert small["prompt"][0] == "What is 2 + 2?" and small["response"].to_list() == ["4", "None", "Paris"]
    assert small["correct"].to_list() == [True, False, True] and small["score"].to_list() == [1.0, 0.0, 0.7]
    assert small["cost_usd"].to_list() == [0.0001, 0.0002, 0.0003]
    assert small["domain"].to_list() == ["gsm8k", "gsm8k", "mmlu"]  # eval_name
    b = df.filter(df["model"] == "b")
    assert b["response"].to_list() == ["four", "9.50", None]  # text as written
    assert b["correct"].to_list() == [True, True, None]
    assert "Unnamed: 0" not in df.columns and b["source_index"][0] == "gsm8k#gsm8k.0"
    strict = read_cache(folder, "routerbench_csv", score_threshold=0.65)
    assert strict.filter(strict["model"] == "b")["correct"].to_list() == [True, False, None]


def test_routerbench_csv_and_pickle_read_the_same_frame(tmp_path):
    pkl = write_routerbench_pickle(tmp_path / "rb.pkl")
    pd.read_pickle(pkl).to_csv(tmp_path / "rb.csv", index=False)
    columns = ["source_index", "prompt", "model", "response", "correct", "cost_usd", "score", "domain"]
    a = read_cache(pkl, "routerbench_pickle", trust_pickle=True).select(columns)
    b = read_cache(tmp_path / "rb.csv", "routerbench_csv").select(columns)
    assert a.to_dicts() == b.to_dicts()


def test_routerbench_csv_replays_cost_and_response(tmp_path):
    folder = write_csv_folder(tmp_path / "routerbench")
    params = SolverParams(backend="replay", model="b", price=Price(input_usd_per_mtok=1.0, output_usd_per_mtok=1.0),
                          replay=ReplayParams(path=str(folder), format="routerbench_csv", source_model="b",
                                              score_threshold=0.65))
    answers = Solver("b", params, ReplayBackend(params.replay, params.price)).solve([item("what is 3 \u00d7 3?")])
    extra = json.loads(answers[0].extra)
    assert answers[0].answer_text == "9.50" and answers[0].cost_usd == 0.02
    assert extra["imported_correct"] is False and extra["imported_score"] == 0.6
    assert extra["replay_source_file"] == str(folder / "gsm8k.csv")


def test_dlab_import_json_on_routerbench_csv(tmp_path):
    folder = write_csv_folder(tmp_path / "routerbench")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["import", str(folder), "--format", "routerbench_csv", "--items-dir",
                                      str(tmp_path), "--json", str(out), "--score-threshold", "0.65"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["score_threshold"] == 0.65 and report["domains"] == {"gsm8k": 2, "mmlu": 1}
    b = report["models"]["b"]
    # no gold: nothing parsed; mmlu's row has neither a reply nor a score: unlabelled, outside the accuracy
    assert (b["n_items"], b["accuracy"], b["unlabelled"], b["no_reply"], b["no_answer"]) == (3, 0.5, 1, 0, None)


@pytest.mark.parametrize(("content", "message"), [
    ("", r"x\.csv: empty file"),
    ("sample_id,prompt\n", r"x\.csv: no rows"),
    ("sample_id,question,m,m|model_response\n1,q,1,a\n", r"x\.csv: the RouterBench CSV has no column 'prompt'"),
    ("sample_id,prompt,m|model_response\n1,q,a\n", r"x\.csv: the RouterBench CSV has no column 'm' .*beside 'm\|model_response'"),
    ("sample_id,prompt,m,m|model_response\ns1,q,1.5,a\n", r"x\.csv: row 2 \(sample_id 's1'\), column 'm': score '1.5' is outside \[0, 1\]"),
    ("sample_id,prompt,m,m|model_response\ns1,q,yes,a\n", r"x\.csv: row 2 \(sample_id 's1'\), column 'm': score 'yes' is not a number"),
    ('sample_id,prompt,m,m|model_response\ns1,"q,1,a\n', r"x\.csv: not a readable CSV"),
])
def test_malformed_routerbench_csv_names_file_and_row(tmp_path, content, message):
    path = tmp_path / "x.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ReplayError, match=message) as e:
        read_cache(path, "routerbench_csv")
    assert "\n" not in str(e.value)


def test_dlab_import_relabels_against_matching_items_and_reports_agreement(tmp_path):
    folder = write_csv_folder(tmp_path / "routerbench")
    items = tmp_path / "items"
    items.mkdir()
    pl.DataFrame({"question": ["What is 2 + 2?", "what is 3 \u00d7 3?"], "gold": ["4", "9"]},
                 schema={"question": pl.String, "gold": pl.String}).with_columns(
        pl.lit(None, dtype=pl.List(pl.String)).alias("choices")).write_parquet(items / "test.parquet")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["import", str(folder), "--format", "routerbench_csv", "--items-dir", str(items),
                                      "--json", str(out)])
    assert result.exit_code == 0, result.output
    models = json.loads(out.read_text())["models"]
    small, b = models["a/small"], models["b"]
    # a/small: "4" right, "None" holds no number (wrong, and a reply without an answer); both as imported
    assert (small["our_accuracy"], small["no_answer"], small["agreement"]["agreement"]) == (0.5, 1, 1.0)
    # b: "four" and "9.50" are wrong to our labeler, right to RouterBench's scores (1.0, 0.6)
    assert b["agreement"] == {"n": 2, "agreement": 0.0, "imported_true_programmatic_false": 2,
                              "imported_false_programmatic_true": 0}
    # the accuracy is the label stage's under label.use_imported (the default): RouterBench's scores win
    assert (b["accuracy"], b["our_accuracy"], b["imported_accuracy"]) == (1.0, 0.0, 1.0)
    assert b["unlabelled"] == 1  # mmlu: no gold, no label (b's score is empty)
    assert "1 question(s) with no label (no gold, no correctness or score)" in result.output
    assert "agrees with the cache's labels on 0.0% of 2" in result.output
