"""Every ZeroEval task's layout as published, on real records (tests/fixtures/zeroeval, verbatim from
github.com/yuchenlin/ZeroEval; SOURCE.md names each file's commit), read through `dlab import`'s own
code: the task told by the record (never the file name), its gold, choices, domain and matcher, the
answer parsed from the reply and our labeler's verdict on it; the pipeline path (items made of the
cache, replayed, labelled) for multiple choice and grids; fields named with `--field`, and the error
that names the field and that option where a record lacks one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.data.items import items_frame
from delegation_lab.data.params import ReplayDatasetParams
from delegation_lab.data.replay import load_replay_items
from delegation_lab.labeling.matchers import match_frame
from delegation_lab.labeling.structured import grid_correct, literal_correct
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.cache import answers_frame
from delegation_lab.solvers.params import LongTableFields, Price, ReplayParams, SolverParams
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.solvers.replay.cache import load_cache
from delegation_lab.solvers.replay.records import ReplayError
from delegation_lab.solvers.replay.relabel import ITEM_KEYS, relabel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "zeroeval"
FREE = Price(input_usd_per_mtok=0.0, output_usd_per_mtok=0.0, free=True)


def graded(task: str, fields: LongTableFields | None = None) -> dict[str, dict]:
    """Each row of a fixture folder as `dlab import` reads and grades it, by `model#id`."""
    cache = load_cache(FIXTURES / task, "zeroeval", fields)
    labels = relabel(cache, pl.DataFrame(schema=ITEM_KEYS)).select("model", "key", "programmatic")
    rows = cache.frame.join(labels, on=["model", "key"]).iter_rows(named=True)
    return {r["source_index"]: r for r in rows}


def import_json(tmp_path: Path, folder: Path, *args: str) -> dict:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["import", str(folder), "--format", "zeroeval", "--items-dir",
                                      str(tmp_path / "none"), "--json", str(out), *args])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_gsm_gold_is_the_number_after_the_hash():
    rows = graded("gsm")
    first = rows["yi-large-preview#gsm8k-main-test-#11"]
    assert (first["gold"], first["choices"], first["answer_format"], first["domain"]) == ("694", None, None, "gsm")
    assert first["parsed_answer"] == "694" and first["programmatic"]  # "$(3 * 68) + (2 * 80) + (6 * 55)" evaluated
    assert rows["yi-large-preview#gsm8k-main-test-#580"]["parsed_answer"] == "499.99999999999994"  # within tolerance


def test_math_l5_gold_kept_as_written_and_graded_by_math_verify(tmp_path):
    rows = graded("math-l5")
    boxed = rows["Meta-Llama-3.1-70B-Instruct@hyperbolic#0"]  # no JSON: "The final answer is: $\boxed{-15}$"
    assert (boxed["gold"], boxed["answer_format"], boxed["domain"], boxed["task"]) == ("-15", "math", "math-l5", "math-l5")
    assert (boxed["parsed_answer"], boxed["answer_source"], boxed["programmatic"]) == ("-15", "boxed", True)
    listed = rows["Qwen2.5-72B-Instruct#698"]  # a list for a one-number gold: a list, never the number 2 or -21
    assert (listed["gold"], listed["parsed_answer"], listed["programmatic"]) == ("2", "2, -1", False)
    empty = rows["o1-mini-2024-09-12#50"]
    assert (empty["response"], empty["parsed_answer"], empty["programmatic"]) == ("", None, False)
    o1 = import_json(tmp_path, FIXTURES / "math-l5")["models"]["o1-mini-2024-09-12"]
    assert (o1["n_items"], o1["accuracy"], o1["no_answer"], o1["no_reply"]) == (2, 0.5, 1, 1)  # counted wrong


def test_mmlu_redux_gold_is_the_letter_of_the_right_choice():
    rows = graded("mmlu-redux")
    right, wrong = rows["Qwen2-72B-Instruct#mmlu-redux-anatomy-#0"], rows["Qwen2-72B-Instruct#mmlu-redux-anatomy-#3"]
    assert right["choices"] == ["Dyslexia", "Epilepsy", "Hydrocephalus", "Narcolepsy"]
    assert (right["gold"], right["answer_format"], right["domain"], right["parsed_answer"]) == ("D", "choice", "anatomy", "D")
    assert (wrong["gold"], wrong["parsed_answer"]) == ("B", "C")
    assert (right["programmatic"], wrong["programmatic"]) == (True, False)


def test_zebra_grid_gold_is_the_solution_grid_where_the_file_keeps_it(tmp_path):
    rows = graded("zebra-grid")
    old = rows["Meta-Llama-3-70B-Instruct#lgp-test-4x6-1"]
    gold, answer = json.loads(old["gold"]), json.loads(old["parsed_answer"])
    assert gold["House 1"] == {"Name": "peter", "Flower": "lilies", "Occupation": "artist", "Vacation": "city",
                               "Hobby": "painting", "Nationality": "dane"} and len(gold) == 4
    assert answer["House 1"]["Name"] == "eric"  # the bare grid after "## Final answer:"
    assert (old["answer_format"], old["domain"], old["programmatic"]) == ("grid", "zebra-grid", False)
    new = rows["Meta-Llama-3.1-405B-Instruct@hyperbolic#lgp-test-5x6-16"]  # published without its solution
    assert new["gold"] is None and json.loads(new["parsed_answer"])["House 5"]["Name"] == "Alice"
    assert new["programmatic"] is None
    report = CliRunner().invoke(app, ["import", str(FIXTURES / "zebra-grid"), "--format", "zeroeval",
                                      "--items-dir", str(tmp_path)])
    assert "1 row(s) of zebra-grid have no gold" in report.output and "--field gold=FIELD" in report.output


def test_crux_outputs_compared_as_python_literals():
    rows = graded("crux")
    assert {k.split("#", 1)[1]: (r["gold"], r["answer_format"], r["programmatic"]) for k, r in rows.items()} == {
        "crux-test-#1": ("{1: None, 2: None}", "literal", True),
        "crux-test-#2": ("'hbtofdeiequ'", "literal", True),
        "crux-test-#37": ("['123', '23', '3']", "literal", True),  # ZeroEval's text compare: wrong quotes
    }
    assert rows["Athene-70B#crux-test-#37"]["parsed_answer"] == '["123", "23", "3"]'


def test_the_task_is_told_by_the_record_not_the_file_name(tmp_path):
    for task in ("math-l5", "mmlu-redux"):
        shutil.copytree(FIXTURES / task, tmp_path / "results")
        moved = {r["task"] for r in load_cache(tmp_path / "results", "zeroeval").frame.iter_rows(named=True)}
        assert moved == {task}
        shutil.rmtree(tmp_path / "results")


def test_multiple_choice_items_carry_their_choices_through_the_pipeline():
    """data.dataset replay -> replayed answers -> the label stage's matcher: the choice letter graded."""
    items = load_replay_items(ReplayDatasetParams(path=str(FIXTURES / "mmlu-redux"), format="zeroeval"))
    assert [(i.gold, i.answer_format, i.domain, len(i.choices)) for i in items] == [("D", "choice", "anatomy", 4)] * 1 + [
        ("B", "choice", "anatomy", 4)]
    params = SolverParams(backend="replay", model="qwen", price=FREE, replay=ReplayParams(
        path=str(FIXTURES / "mmlu-redux"), format="zeroeval", source_model="Qwen2-72B-Instruct"))
    answers = Solver("qwen", params, ReplayBackend(params.replay, params.price)).solve(items)
    labels = match_frame(answers_frame(answers), items_frame(items), 1e-6)
    assert labels["programmatic"].to_list() == [True, False] and labels["matcher"].to_list() == ["choice"] * 2


def test_grid_items_are_graded_by_the_grid_matcher_in_the_label_stage():
    items = [i for i in load_replay_items(ReplayDatasetParams(path=str(FIXTURES / "zebra-grid"), format="zeroeval"))
             if i.gold is not None]
    params = SolverParams(backend="replay", model="llama", price=FREE, replay=ReplayParams(
        path=str(FIXTURES / "zebra-grid"), format="zeroeval", source_model="Meta-Llama-3-70B-Instruct"))
    answers = Solver("llama", params, ReplayBackend(params.replay, params.price)).solve(items)
    labels = match_frame(answers_frame(answers), items_frame(items), 1e-6)
    assert labels["matcher"].to_list() == ["grid"] and labels["programmatic"].to_list() == [False]


def test_grid_matcher_needs_every_cell():
    gold = json.dumps({"House 1": {"Name": "peter", "Drink": "tea"}, "House 2": {"Name": "eric", "Drink": "milk"}})
    right = {"House 1": {"Name": " Peter", "Drink": ["tea"]}, "House 2": {"Name": "ERIC", "Drink": "milk", "X": "y"}}
    assert grid_correct(json.dumps(right), gold)
    assert not grid_correct(json.dumps({**right, "House 2": {"Name": "eric", "Drink": "tea"}}), gold)
    assert not grid_correct(json.dumps({"House 1": right["House 1"]}), gold)  # a house missing
    assert not grid_correct(None, gold) and not grid_correct("not json", gold)


@pytest.mark.parametrize(("answer", "gold", "right"), [
    ("'abc'", "'abc'", True), ('"abc"', "'abc'", True), ("abc", "'abc'", True),  # ZeroEval strips quotes
    ("[1,2]", "[1, 2]", True), ("8.50", "8.5", True), ("{2: 1, 1: 0}", "{1: 0, 2: 1}", True),
    ("'a\\nb'", "'a\\nb'", True), ("[1, 2]", "[2, 1]", False), ("'1'", "1", True), ("(1,)", "(1, 2)", False),
    ("f(1)", "1", False), (None, "1", False),
])
def test_literal_matcher(answer, gold, right):
    assert literal_correct(answer, gold) is right


def test_a_field_the_layout_cannot_map_names_the_field_and_the_option(tmp_path):
    record = json.loads((FIXTURES / "math-l5" / "o1-mini-2024-09-12.json").read_text())[0]
    record["query"] = record.pop("problem")  # a MATH record whose question is under another name
    folder = tmp_path / "renamed"
    folder.mkdir()
    (folder / "m.json").write_text(json.dumps([record]), encoding="utf-8")
    with pytest.raises(ReplayError, match=r"record 0 \(0\): missing field 'problem' .*'query'.*"
                                          r"`dlab import --field question=FIELD` \(a replay section's `fields.question`\)"):
        load_cache(folder, "zeroeval")
    result = CliRunner().invoke(app, ["import", str(folder), "--format", "zeroeval", "--items-dir", str(tmp_path)])
    assert result.exit_code == 1 and "--field question=FIELD" in result.output and "Traceback" not in result.output
    report = import_json(tmp_path, folder, "--field", "question=query")
    assert report["models"]["m"]["accuracy"] == 1.0
    cache = load_cache(folder, "zeroeval", LongTableFields(question="query", gold="answer"))
    assert cache.frame["prompt"][0].startswith("Find the sum") and cache.frame["gold"][0] == "-15"


def test_a_field_the_format_does_not_read_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["import", str(FIXTURES / "gsm"), "--format", "zeroeval", "--items-dir",
                                      str(tmp_path), "--field", "correct=is_right"])
    assert result.exit_code == 2
    assert "fields.correct (dlab import --field correct=...) is not read by the zeroeval format; it reads: question, " \
           "gold, id, domain, response" in result.output


def test_the_import_snippet_keeps_the_field_mapping(tmp_path):
    result = CliRunner().invoke(app, ["import", str(FIXTURES / "crux"), "--format", "zeroeval", "--items-dir",
                                      str(tmp_path), "--field", "domain=source"])
    assert result.exit_code == 0, result.output
    assert 'fields: {"domain": "source"}' in result.output
    domains = load_cache(FIXTURES / "crux", "zeroeval", LongTableFields(domain="source")).frame["domain"]
    assert set(domains) == {"cruxeval-org/cruxeval"}


def test_long_table_gold_column_is_graded_by_our_labeler(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("question,model,correct,target,response\nq1,m,,7,The answer is 7.\nq2,m,,3,It is 4.\n",
                    encoding="utf-8")
    cache = load_cache(path, "long_table", LongTableFields(gold="target"))
    assert cache.frame["gold"].to_list() == ["7", "3"]
    assert relabel(cache, pl.DataFrame(schema=ITEM_KEYS))["programmatic"].to_list() == [True, False]


@pytest.mark.parametrize(("reply", "answer"), [
    ('{"answer": "\\frac{3}{4}"}', "\\frac{3}{4}"),     # the JSON escape \f swallowed the backslash: spelled back
    ('{"answer": "3 \\times 4"}', "3 \\times 4"),
    ('{"answer": "___3___"}', "3"),                     # the template's blanks around the answer
    ('{"answer": "2, -1"}', "2, -1"),                   # a list stays a list
    ('{"reasoning": "r"}\nSo \\boxed{(2, -1)}', "(2, -1)"),
    ('{"answer": true}', "True"),                       # as Python writes it (a CRUXEval output)
])
def test_answers_kept_as_written(reply, answer):
    from delegation_lab.solvers.replay.json_reply import json_reply_answer

    assert json_reply_answer(reply, as_number=False)[0] == answer


def test_grid_reply_is_the_last_block_holding_a_grid():
    from delegation_lab.solvers.replay.json_reply import grid_reply_answer

    reply = ('{"reasoning": "draft", "solution": {"House 1": {"Name": "a"}}}\nNo, rather:\n'
             '{"reasoning": "r", "solution": {"House 1": {"Name": "b"}}}')
    assert grid_reply_answer(reply) == ('{"House 1": {"Name": "b"}}', "json")
    assert grid_reply_answer('{"reasoning": "r", "solution": "House 1 is b"}') == (None, "none")
