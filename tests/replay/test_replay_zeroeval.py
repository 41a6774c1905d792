"""ZeroEval's result files (`result_dirs/gsm/<model>.json`) on fixtures written in that exact layout:
the reply's answer parsed as a careful grader would, labelled by our labeler against the file's gold,
replayed with provenance and estimated tokens, the `dlab import --json` report, and malformed files
failing with one line naming the file and the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.data.items import Item, items_frame, make_item_id
from delegation_lab.data.params import ReplayDatasetParams
from delegation_lab.data.replay import load_replay_items
from delegation_lab.labeling.matchers import match_frame
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.solvers.cache import answers_frame
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.solvers.replay.cache import file_sha256, read_cache
from delegation_lab.solvers.replay.json_reply import json_reply_answer
from delegation_lab.solvers.replay.records import ReplayError

QUESTIONS = [
    ("Janet's ducks lay 16 eggs per day. She eats three and bakes with four. She sells the rest at $2. How much?", "# 18"),
    ("A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total?", "# 3"),
    ("Josh buys a house for $80,000 and puts in $50,000 in repairs. Value up 150%. Profit?", "# 70000"),
    ("James runs 3 sprints 3 times a week, 60 meters each. How many meters a week?", "# 540"),
]


def reply(reasoning: str, answer: str) -> str:
    """As ZeroEval's models write it: a fenced JSON block with `reasoning` and `answer`."""
    return f'```json\n{{\n    "reasoning": "{reasoning}",\n    "answer": "{answer}"\n}}\n```'


REPLIES = {  # model -> reply per question: the grader's paths, each answer right except where noted
    "gpt-4o-mini-2024-07-18": [
        reply("16 - 3 - 4 = 9 eggs, 9 * 2 = 18.", "18"),
        reply("2 + 1 = 3.", "3 bolts"),                               # a unit after the number
        reply("80000 + 50000 = 130000; 80000 * 2.5 = 200000.", "$70,000"),  # $ and thousands commas
        reply("3 * 3 * 60.", "3 * 3 * 60 = 540"),                      # arithmetic: the value after '='
    ],
    "Yi-1.5-9B-Chat": [
        'Let me think.\n{"reasoning": "raw\nnewline", "answer": 18}',   # a raw newline, a number answer
        "The robe needs 2 + 1 bolts, so \\boxed{3}.",                     # no JSON: the last boxed
        '{"reasoning": "unbalanced "quote", "answer": "70000"',         # broken JSON: the answer key
        "Let's try 3 * 3 * 60 = 540. That doesn't add up, so",          # truncated: a step, not an answer
    ],
}


def zeroeval_record(i: int, model: str, text: str | None) -> dict:
    question, gold = QUESTIONS[i]
    return {
        "session_id": f"gsm8k-main-test-#{i}", "chat_history": [f"\n## Question: \n\n{question}\n"],
        "model_input": "n/a", "output": [text], "generator": f"org/{model}",
        "configs": {"engine": "openai", "temperature": 0.0, "max_tokens": 4096}, "dataset": "gsm",
        "id": f"gsm8k-main-test-#{i}", "question": question, "answer": gold, "source": "openai/gsm8k",
        "config": "main", "task_type": "qa",
    }


def write_result_dirs(root: Path) -> Path:
    folder = root / "result_dirs" / "gsm"
    folder.mkdir(parents=True)
    for model, replies in REPLIES.items():
        records = [zeroeval_record(i, model, text) for i, text in enumerate(replies)]
        (folder / f"{model}.json").write_text(json.dumps(records, indent=2), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("text", "answer", "source"), [
    (reply("r", "18"), "18", "json"),
    ('{"reasoning": "x \\\\(a\\\\) \\(b\\)", "answer": "\\\\frac{3}{4}"}', "0.75", "json"),  # LaTeX backslashes
    ('{"reasoning": "r", "answer": "___"}\nSo the answer is 12.', "12", "stated_number"),   # template echoed
    ('{"reasoning": "r", "answer": "(300 * 4 + 120 * 6) / 12"}', "160", "json"),
    ('{"reasoning": "r", "answer": "500 * 0.3 + 350"}', "500", "json"),                   # exact, not 499.99...
    ('{"reasoning": "r", "answer": "Cannot be determined"}', "Cannot be determined", "json"),
    ('"answer": 42, trailing', "42", "json_key"),
    ("Work: 2 + 2 = 4, so \\boxed{\\frac{1}{2}} and then 7", "0.5", "boxed"),
    ("#### 1,234", "1234", "stated_number"),
    ("no digits here", None, "none"),
    ("Let's try 4 + 4 + 2 = 10. This still doesn't add up to", None, "none"),  # a bare last number
    ("So it is 5.\n\n**Answer:** 12 gallons", "12", "stated_number"),
    ("", None, "none"),
])
def test_json_reply_answer(text, answer, source):
    assert json_reply_answer(text) == (answer, source)


def test_zeroeval_folder_parses_answers_and_keeps_gold_and_provenance(tmp_path):
    folder = write_result_dirs(tmp_path)
    df = read_cache(folder, "zeroeval")
    assert df.height == 8 and set(df["model"]) == set(REPLIES)  # the file stem names the model
    assert df["correct"].null_count() == 8 and df["tokens_out"].null_count() == 8  # nothing imported
    assert set(df["domain"]) == {"gsm"} and df["gold"].to_list()[:4] == ["18", "3", "70000", "540"]
    gpt = df.filter(df["model"] == "gpt-4o-mini-2024-07-18")
    assert gpt["parsed_answer"].to_list() == ["18", "3", "70000", "540"]
    yi = df.filter(df["model"] == "Yi-1.5-9B-Chat")
    assert yi["parsed_answer"].to_list() == ["18", "3", "70000", None]
    assert yi["answer_source"].to_list() == ["json", "boxed", "json_key", "none"]
    assert yi["source_file"][0] == str(folder / "Yi-1.5-9B-Chat.json")
    assert yi["source_sha256"][0] == file_sha256(folder / "Yi-1.5-9B-Chat.json")
    assert yi["source_index"][1] == "Yi-1.5-9B-Chat#gsm8k-main-test-#1"


def test_zeroeval_replay_hands_over_the_parsed_answer_and_estimates_tokens(tmp_path):
    folder = write_result_dirs(tmp_path)
    params = SolverParams(backend="replay", model="yi", price=Price(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0,
                                                                    source="fixture"),
                          replay=ReplayParams(path=str(folder), format="zeroeval", source_model="Yi-1.5-9B-Chat"))
    items = [Item(item_id=make_item_id("t", str(i)), split="test", question=q, gold=g.strip("# "), domain="gsm",
                  source="t", source_id=str(i)) for i, (q, g) in enumerate(QUESTIONS)]
    answers = Solver("yi", params, ReplayBackend(params.replay, params.price)).solve(items)
    assert [a.parsed_answer for a in answers] == ["18", "3", "70000", None]
    extra = json.loads(answers[1].extra)
    assert extra["tokens_estimated"] is True and "imported_correct" not in extra
    assert extra["replay_source_model"] == "Yi-1.5-9B-Chat" and extra["price_source"] == "fixture"
    assert answers[1].tokens_out > 0 and answers[1].cost_usd > 0


def test_zeroeval_cache_as_its_own_dataset_is_labelled_by_our_labeler(tmp_path):
    folder = write_result_dirs(tmp_path)
    items = load_replay_items(ReplayDatasetParams(path=str(folder), format="zeroeval"))
    assert [i.gold for i in items] == ["18", "3", "70000", "540"]  # the file's gold, `#` dropped
    params = SolverParams(backend="replay", model="yi", price=Price(input_usd_per_mtok=0.0, output_usd_per_mtok=0.0,
                                                                    free=True),
                          replay=ReplayParams(path=str(folder), format="zeroeval", source_model="Yi-1.5-9B-Chat"))
    answers = Solver("yi", params, ReplayBackend(params.replay, params.price)).solve(items)
    labels = match_frame(answers_frame(answers), items_frame(items), 1e-6)  # what the label stage runs
    assert labels["programmatic"].to_list() == [True, True, True, False] and labels["imported"].null_count() == 4
    assert labels["matcher"].to_list() == ["numeric"] * 4


def test_dlab_import_json_reports_our_accuracy_and_no_answer(tmp_path):
    folder = write_result_dirs(tmp_path)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["import", str(folder), "--format", "zeroeval", "--items-dir",
                                      str(tmp_path / "none"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "our labeler: accuracy 75.0% over 4 question(s) with a gold" in result.output
    report = json.loads(out.read_text())
    assert report["format"] == "zeroeval" and report["questions"] == 4 and len(report["files"]) == 2
    gpt, yi = report["models"]["gpt-4o-mini-2024-07-18"], report["models"]["Yi-1.5-9B-Chat"]
    assert (gpt["n_items"], gpt["accuracy"], gpt["no_answer"]) == (4, 1.0, 0)
    assert (yi["n_items"], yi["accuracy"], yi["no_answer"]) == (4, 0.75, 1)  # no answer counts wrong
    assert yi["imported_accuracy"] is None and yi["agreement"] is None  # ZeroEval grades nothing itself


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("content", "message"), [
    ("", r"m\.json: empty file"),
    ("[{", r"m\.json: not valid JSON \(line 1"),
    ('{"a": 1}', r"m\.json: expected a JSON list .* got a JSON dict \(keys: \['a'\]\)"),
    ("[]", r"m\.json: no records"),
    (json.dumps([zeroeval_record(0, "m", "18"), {"id": "gsm8k-main-test-#1", "question": "q", "output": ["1"]}]),
     r"m\.json: record 1 \(gsm8k-main-test-#1\): missing field 'answer'"),
    (json.dumps([{**zeroeval_record(0, "m", "18"), "output": "18"}]), r"m\.json: record 0 .*'output' must be a list"),
])
def test_malformed_zeroeval_file_names_file_and_record(tmp_path, content, message):
    path = write(tmp_path / "gsm" / "m.json", content)
    with pytest.raises(ReplayError, match=message) as e:
        read_cache(path, "zeroeval")
    assert "\n" not in str(e.value)


def test_gzipped_result_files_read_as_the_plain_ones(tmp_path):
    """Experiments ship `<model>.json.gz` (data_src/compact.py): same models, answers and gold."""
    import gzip

    plain = write_result_dirs(tmp_path / "plain")
    packed = tmp_path / "packed" / "gsm"
    packed.mkdir(parents=True)
    for path in plain.glob("*.json"):
        (packed / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
    columns = ["model", "source_index", "prompt", "response", "gold", "parsed_answer", "answer_source"]
    a, b = read_cache(plain, "zeroeval"), read_cache(packed, "zeroeval")
    assert b.sort(columns[:2]).select(columns).equals(a.sort(columns[:2]).select(columns))
    (packed / "broken.json.gz").write_bytes(b"not gzip")
    with pytest.raises(ReplayError, match=r"broken\.json\.gz: not a gzip file"):
        read_cache(packed, "zeroeval")
