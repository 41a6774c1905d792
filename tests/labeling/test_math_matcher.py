"""The math-answer matcher (math-verify in a killable child process), its `auto` choice, the items'
`answer_format` override, and that numeric / choice labels are exactly what they were."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest

from delegation_lab.params.root import LabelParams
from delegation_lab.data.items import Item, items_frame, items_from_frame
from delegation_lab.errors import InputError
from delegation_lab.labeling.labels import build_labels
from delegation_lab.labeling.matchers import match_frame, matcher_for, programmatic_correct
from delegation_lab.labeling.math_verifier import MathAnswer, MathVerifier, math_answer
from delegation_lab.parsing import is_math_expression
from delegation_lab.solvers.cache import AnswerCache, answers_frame

from tests.labeling.test_labels_ability import PARAMS, make_answer

TIMEOUT_S = 1
# A pathological answer costs at most math-verify's alarm (one parse + one comparison) plus the start
# of a fresh worker when the parent had to kill one; generous for a loaded two-core machine.
QUICK_S = 4 * TIMEOUT_S + 8


@pytest.fixture(scope="module")
def verifier():
    with MathVerifier(TIMEOUT_S) as v:
        yield v


def reply(text: str) -> MathAnswer:
    return MathAnswer(text, True)


def expr(text: str) -> MathAnswer:
    return MathAnswer(text, False)


@pytest.mark.parametrize("gold, answer", [
    (r"\frac{1}{2}", expr("0.5")),
    (r"\frac{1}{2}", expr("1/2")),
    ("0.5", expr(r"\frac{1}{2}")),
    (r"\sqrt{8}", expr(r"2\sqrt{2}")),
    (r"2\sqrt{2}", expr(r"\sqrt{8}")),
    (r"\frac34", reply(r"Adding the parts gives $\frac{3}{4}$, so the answer is $\boxed{\frac{3}{4}}$.")),
    ("(x+1)^2", expr("x^2+2x+1")),
    ("[0,1)", expr("[0, 1)")),
    (r"\{1, 2\}", expr(r"\{2, 1\}")),
    ("3", reply(r"First $\boxed{2}$; checking again, the answer is $\boxed{3}$.")),  # the last box wins
])
def test_equivalent_answers_match(verifier, gold, answer):
    assert verifier.verify(gold, answer) is True


@pytest.mark.parametrize("gold, answer", [
    (r"\frac{1}{3}", expr("0.33")),
    (r"2\sqrt{2}", expr("2")),
    ("[0,1)", expr("[0,1]")),
    ("(x+1)^2", expr("x^2+1")),
    ("2", reply(r"First $\boxed{2}$; checking again, the answer is $\boxed{3}$.")),
])
def test_different_answers_do_not_match(verifier, gold, answer):
    assert verifier.verify(gold, answer) is False


NESTED = "{" * 5000 + "1" + "}" * 5000  # 10 kB of nested braces


@pytest.mark.parametrize("gold, answer", [
    ("2", expr("9^{9^{9^9}}")),
    ("9^{9^{9^9}}", expr("3")),
    ("3", expr("10^{10^{10}}!")),
    ("1", reply(NESTED)),
    ("1", reply(r"\boxed{" + NESTED + "}")),
    ("1", reply("$" + "(" * 3000 + "1" + ")" * 3000 + "$")),
    ("x", expr(r"\frac{" * 2000)),
    (NESTED, expr("1")),
    ("", expr("1")),
    ("1", reply("")),
])
def test_pathological_input_is_refused_quickly(verifier, gold, answer):
    start = time.monotonic()
    assert verifier.verify(gold, answer) in (False, None)
    assert time.monotonic() - start < QUICK_S
    assert verifier.verify("0.5", expr(r"\frac12")) is True  # the worker (or its successor) still answers


def test_a_worker_past_its_deadline_is_killed_and_replaced():
    with MathVerifier(TIMEOUT_S) as v:
        v.deadline_s = 0.3  # shorter than the alarm: the parent has to kill the worker
        assert v.verify("2", expr("9^{9^{9^9}}")) is False
        assert v.timeouts == 1 and v._proc is None
        v.deadline_s = 30
        assert v.verify(r"\frac{1}{2}", expr("0.5")) is True and v.timeouts == 1


def test_verifies_from_worker_threads():
    """math-verify's own alarm fails outside the main thread; the child process does not care."""
    with MathVerifier(TIMEOUT_S) as v, ThreadPoolExecutor(1) as pool:
        assert pool.submit(v.verify, r"2\sqrt{2}", expr(r"\sqrt{8}")).result(timeout=120) is True


def test_math_answer_prefers_a_boxed_reply_then_the_parsed_answer():
    assert math_answer("4", r"so \boxed{x+1}") == reply(r"so \boxed{x+1}")
    assert math_answer("4", "the answer is 4") == expr("4")
    assert math_answer(None, "the answer is $x$") == reply("the answer is $x$")
    assert math_answer(None, "  ") is None and math_answer("", None) is None


@pytest.mark.parametrize("gold, is_math", [
    (r"\frac{3}{4}", True), (r"2\sqrt{2}", True), ("[0,1)", True), ("x^2+2x+1", True), ("(1, 2)", True),
    ("$5", False), ("42", False), ("-3.5", False), ("1,234", False), ("3/4", False),  # plain numbers
    ("Paris", False), ("yes", False), ("A", False), ("", False), ("10%", False),
])
def test_which_golds_are_math_expressions(gold, is_math):
    assert is_math_expression(gold) is is_math


def test_auto_picks_choice_then_math_then_numeric():
    assert matcher_for("auto", r"\frac34", has_choices=True) == "choice"
    assert matcher_for("auto", r"\frac34", has_choices=False) == "math"
    assert matcher_for("auto", "42", has_choices=False) == "numeric"
    assert matcher_for("auto", "Paris", has_choices=False) == "numeric"
    assert matcher_for("numeric", r"\frac34", has_choices=False) == "numeric"
    assert matcher_for("math", "42", has_choices=True) == "math"


def _item(k: int, gold: str | None, choices: list[str] | None = None, answer_format: str | None = None) -> Item:
    return Item(item_id=f"i{k}", split="test", question=f"q{k}", gold=gold, choices=choices,
                answer_format=answer_format)


def test_match_frame_routes_each_item_to_its_matcher():
    items = [
        _item(0, r"\frac{3}{4}"),                                  # auto -> math
        _item(1, "12"),                                            # auto -> numeric
        _item(2, "B", choices=["1", "2", "3"]),                    # auto -> choice
        _item(3, "0.5", answer_format="math"),                     # the item says math
        _item(4, r"\frac{1}{2}", answer_format="numeric"),         # the item says numeric: exact text only
        _item(5, None),                                            # no gold: no verdict
    ]
    answers = [
        make_answer("S", items[0], r"So $\boxed{0.75}$.", "0.75"),
        make_answer("S", items[1], "#### 12.0", "12"),
        make_answer("S", items[2], "Answer: b", "b"),
        make_answer("S", items[3], r"$\boxed{\frac12}$", "12"),
        make_answer("S", items[4], r"$\boxed{\frac12}$", "12"),
        make_answer("S", items[5], "7", "7"),
    ]
    out = match_frame(answers_frame(answers), items_frame(items), 1e-6).sort("item_id")
    assert out["matcher"].to_list() == ["math", "numeric", "choice", "math", "numeric", None]
    assert out["programmatic"].to_list() == [True, True, True, True, False, None]


def test_an_unknown_answer_format_fails_naming_the_item():
    items = [_item(0, "1", answer_format="latex")]
    with pytest.raises(InputError, match="item i0 has answer_format 'latex'"):
        match_frame(answers_frame([make_answer("S", items[0], "1", "1")]), items_frame(items), 1e-6)


def test_numeric_and_choice_labels_are_exactly_the_old_ones():
    """`auto` (the default) on numbers, letters and non-math text golds gives programmatic_correct's verdicts."""
    golds = ["18", "0.5", "3/4", "1,234", "$5", "Paris", "B", "C"]
    items = [_item(k, g, choices=["x", "y", "z"] if g in "BC" else None) for k, g in enumerate(golds)]
    parsed = ["18.0", "0.5000001", "0.75", "1234", "5", "Paris", "b", None]
    answers = [make_answer("S", i, f"#### {p}", p) for i, p in zip(items, parsed, strict=True)]
    answers.append(make_answer("S", items[0], "", None).model_copy(update={"solver": "T", "error": "timeout"}))
    out = match_frame(answers_frame(answers), items_frame(items), 1e-6).sort("solver", "item_id")
    old = [programmatic_correct(p, i.gold, i.choices is not None, 1e-6) for i, p in zip(items, parsed, strict=True)]
    assert out.filter(pl.col("solver") == "S")["programmatic"].to_list() == old  # i0..i7 sort in order
    assert old == [True, True, False, False, False, True, True, False]
    assert out.filter(pl.col("solver") == "T")["programmatic"].to_list() == [False]  # a backend error is wrong
    assert "math" not in out["matcher"].to_list()


def _label(items: list[Item], answers, tmp_path: Path, **label):
    raw = PARAMS.label.model_dump()
    raw["judge"]["sample_size"] = 0
    raw.update(label)
    return build_labels(answers_frame(answers), items_frame(items), {i.item_id: i for i in items},
                        LabelParams.model_validate(raw), AnswerCache(tmp_path / "j.parquet", tmp_path / "jj"),
                        progress=False)


def test_build_labels_reports_math_answers_only_where_there_are_some(tmp_path: Path):
    items = [_item(0, r"2\sqrt{2}"), _item(1, r"\frac{1}{3}")]
    answers = [make_answer("S", items[0], r"$\boxed{\sqrt{8}}$", "8"), make_answer("S", items[1], "0.33", "0.33")]
    # a generous limit: this test is about the report, not the timeout (1 s fails under a loaded machine)
    labels, report, _ = _label(items, answers, tmp_path, math_timeout_s=30)
    assert labels.sort("item_id")["correct"].to_list() == [True, False]
    assert report["math_matcher"] == {"answers": 2, "timeouts": 0}

    labels, report, _ = _label(items, answers, tmp_path, matcher="numeric")
    assert labels["correct"].to_list() == [False, False] and "math_matcher" not in report


def test_label_matcher_is_checked():
    raw = PARAMS.label.model_dump() | {"matcher": "latex"}
    with pytest.raises(ValueError, match="matcher"):
        LabelParams.model_validate(raw)


def test_answer_format_column_is_written_only_when_set():
    plain = items_frame([_item(0, "1"), _item(1, "2")])
    assert "answer_format" not in plain.columns  # items tables of today's datasets are unchanged
    assert items_from_frame(plain)[0].answer_format is None
    hinted = items_frame([_item(0, "1"), _item(1, r"\frac12", answer_format="math")])
    assert hinted["answer_format"].to_list() == [None, "math"]
    assert [i.answer_format for i in items_from_frame(hinted)] == [None, "math"]
