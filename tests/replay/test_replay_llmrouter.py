"""LLMRouter's routing data on fixtures written in its `data/` layout: the dcrouter_preprocessed
per-model scores joined to the query files' task, gold and metric, scores kept and `correct` at the
documented threshold, the price table beside them not read as scores, and malformed files (bad
JSON, empty, a missing field, a score out of range) named by file and record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.data.params import ReplayDatasetParams
from delegation_lab.data.replay import load_replay_items
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.solvers.replay.cache import read_cache
from delegation_lab.solvers.replay.records import ReplayError

from tests.replay.test_replay import item

MODELS = ("qwen2.5-7b-instruct", "gemma-2-9b-it")
QUERIES = {  # split -> (task_name, query, ground_truth, metric, scores of MODELS)
    "train": [
        ("gsm8k", "Natalia sold clips to 48 friends in April and half as many in May. How many in all?",
         "Natalia sold 48/2 = 24 clips in May.\n#### 72", "GSM8K", (1.0, 0.0)),
        ("natural_qa", "who wrote the declaration of independence", "Thomas Jefferson", "f1_score", (0.4, 0.8)),
        ("mbpp", "Write a function to find the shared elements from the given two lists.",
         "['assert set(similar_elements((3, 4), (5, 4))) == set((4,))']", "code_eval", (0.5, 1.0)),
    ],
    "test": [
        ("mmlu", "Which planet is largest?\nA. Mars\nB. Jupiter", "B", "em_mc", (1.0, 1.0)),
        # the same question as train's mbpp one: LLMRouter's splits share 119 questions
        ("mbpp", "Write a function to find the shared elements from the given two lists.",
         "['assert set(similar_elements((3, 4), (5, 4))) == set((4,))']", "code_eval", (0.0, 1.0)),
    ],
}


def write_llmrouter_data(root: Path) -> Path:
    data = root / "LLMRouter" / "data"
    (data / "dcrouter_preprocessed").mkdir(parents=True)
    (data / "example_data" / "query_data").mkdir(parents=True)
    (data / "example_data" / "llm_candidates").mkdir(parents=True)
    for split, rows in QUERIES.items():
        scores = [{"question": q, "scores": dict(zip(MODELS, s, strict=True)), **({"cluster_id": 3} if split == "train" else {})}
                  for _, q, _, _, s in rows]
        (data / "dcrouter_preprocessed" / f"{split}.json").write_text(json.dumps(scores), encoding="utf-8")
        lines = [json.dumps({"task_name": t, "query": q, "ground_truth": g, "metric": m, "choices": None, "task_id": None},
                            ensure_ascii=False) for t, q, g, m, _ in rows]
        if split == "train":  # a query string holding U+2028, which str.splitlines() would cut
            lines.append(json.dumps({"task_name": "trivia_qa", "query": "back in '\u2028sixty three'",
                                     "ground_truth": "x", "metric": "f1_score"}, ensure_ascii=False))
        (data / "example_data" / "query_data" / f"default_query_{split}.jsonl").write_text("\n".join(lines) + "\n",
                                                                                          encoding="utf-8")
    prices = {m: {"size": "7B", "input_price": 0.2, "output_price": 0.2, "model": f"org/{m}"} for m in MODELS}
    (data / "example_data" / "llm_candidates" / "default_llm.json").write_text(json.dumps(prices), encoding="utf-8")
    return data


def test_llmrouter_scores_join_the_query_files(tmp_path):
    data = write_llmrouter_data(tmp_path)
    df = read_cache(data.parent, "llmrouter")  # the repository root works as well as its data/ folder
    assert set(df["source_file"]) == {str(data / "dcrouter_preprocessed" / f"{s}.json") for s in ("train", "test")}
    assert df.height == 10 and set(df["model"]) == set(MODELS)
    gemma = df.filter(df["model"] == "gemma-2-9b-it")
    assert gemma["domain"].to_list() == ["mmlu", "mbpp", "gsm8k", "natural_qa", "mbpp"]  # test.json sorts first
    assert gemma["metric"].to_list() == ["em_mc", "code_eval", "GSM8K", "f1_score", "code_eval"]
    assert gemma["score"].to_list() == [1.0, 1.0, 0.0, 0.8, 1.0]
    qwen = df.filter(df["model"] == "qwen2.5-7b-instruct")
    assert qwen["correct"].to_list() == [True, False, True, False, True]  # score >= 0.5
    assert (df["response"] == "").all() and df["tokens_in"].null_count() == 10
    assert qwen["ground_truth"][2].endswith("#### 72") and qwen["source_split"].to_list()[:2] == ["test", "test"]
    assert qwen["query_file"][2] == str(data / "example_data" / "query_data" / "default_query_train.jsonl")
    strict = read_cache(data, "llmrouter", score_threshold=0.9)
    assert strict.filter(strict["model"] == "qwen2.5-7b-instruct")["correct"].to_list() == [True, False, True, False, False]


def test_llmrouter_replays_scores_and_becomes_a_dataset(tmp_path):
    data = write_llmrouter_data(tmp_path)
    params = SolverParams(backend="replay", model="gemma", price=Price(input_usd_per_mtok=0.2, output_usd_per_mtok=0.2,
                                                                       source="LLMRouter default_llm.json"),
                          replay=ReplayParams(path=str(data), format="llmrouter", source_model="gemma-2-9b-it"))
    answers = Solver("gemma", params, ReplayBackend(params.replay, params.price)).solve(
        [item("who wrote the declaration of independence")])
    extra = json.loads(answers[0].extra)
    assert answers[0].error is None and extra["imported_correct"] is True and extra["imported_score"] == 0.8
    items = load_replay_items(ReplayDatasetParams(path=str(data), format="llmrouter"))
    assert len(items) == 4 and {i.domain for i in items} == {"mmlu", "mbpp", "gsm8k", "natural_qa"}


def test_dlab_import_json_on_llmrouter(tmp_path):
    data = write_llmrouter_data(tmp_path)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["import", str(data), "--format", "llmrouter", "--items-dir", str(tmp_path),
                                      "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 question(s) appear in more than one split file" in result.output
    assert "default_llm.json" not in result.output  # the price table is not a score file
    report = json.loads(out.read_text())
    assert report["domains"] == {"mmlu": 1, "mbpp": 1, "gsm8k": 1, "natural_qa": 1}
    qwen = report["models"]["qwen2.5-7b-instruct"]
    assert (qwen["n_items"], qwen["duplicates"], qwen["accuracy"], qwen["no_answer"]) == (4, 1, 0.5, None)
    assert qwen["our_accuracy"] is None and qwen["agreement"] is None  # no answer texts to relabel


def scores_file(tmp_path: Path, content: str) -> Path:
    data = write_llmrouter_data(tmp_path)
    path = data / "dcrouter_preprocessed" / "test.json"
    path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize(("content", "message"), [
    ("", r"test\.json: empty file"),
    ('[{"question": "q"', r"test\.json: not valid JSON"),
    ('[{"question": "q", "scores": {"m": 1}}, {"question": "r"}]', r"test\.json: record 1: missing field 'scores'"),
    ('[{"scores": {"m": 1}}]', r"test\.json: record 0: missing field 'question'"),
    ('[{"question": "q", "scores": {"m": 1.5}}]', r"test\.json: record 0, scores\['m'\]: score 1.5 is outside \[0, 1\]"),
    ('[{"question": "q", "scores": {"m": -0.1}}]', r"test\.json: record 0, scores\['m'\]: score -0.1 is outside"),
    ('[{"question": "q", "scores": {"m": "high"}}]', r"test\.json: record 0, scores\['m'\]: score 'high' is not a number"),
    ('[{"question": "q", "scores": []}]', r"test\.json: record 0: field 'scores' must be a non-empty object"),
])
def test_malformed_llmrouter_scores_name_file_and_record(tmp_path, content, message):
    path = scores_file(tmp_path, content)
    with pytest.raises(ReplayError, match=message) as e:
        read_cache(path, "llmrouter")
    assert "\n" not in str(e.value)


def test_malformed_or_missing_query_files_are_named(tmp_path):
    data = write_llmrouter_data(tmp_path)
    query = data / "example_data" / "query_data" / "default_query_test.jsonl"
    query.write_text('{"task_name": "mmlu", "query": "q"}\n{"task_name": \n', encoding="utf-8")
    with pytest.raises(ReplayError, match=r"default_query_test\.jsonl: line 2: malformed JSON"):
        read_cache(data, "llmrouter")
    query.write_text('{"query": "q"}\n', encoding="utf-8")
    with pytest.raises(ReplayError, match=r"default_query_test\.jsonl: line 1: missing field 'task_name'"):
        read_cache(data, "llmrouter")
    for f in query.parent.iterdir():
        f.unlink()
    with pytest.raises(ReplayError, match=r"test\.json: LLMRouter's query files are missing: expected .*default_query_test\.jsonl"):
        read_cache(data / "dcrouter_preprocessed" / "test.json", "llmrouter")
