"""List answers (issue 43): `2, 5` is never graded as the number 25, `2, -1` never as 1 or 2. A comma is
a thousands separator only between groups of three digits; every other list stays a list, and the
`math` matcher (math-verify) compares lists, tuples, sets and intervals as such."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from delegation_lab.data.items import items_frame
from delegation_lab.labeling.matchers import match_frame, matcher_for
from delegation_lab.parsing import NUMBER_LIST, is_number_list, normalise_number, parse_gsm8k_gold, parse_number_answer
from delegation_lab.solvers.cache import answers_frame
from delegation_lab.solvers.replay.json_reply import answer_number, evaluate_arithmetic, json_reply_answer
from tests.labeling.test_labels_ability import make_answer
from tests.labeling.test_math_matcher import _item

SEPARATORS = st.sampled_from([", ", ",", " , ", ",  "])
INTEGERS = st.integers(min_value=-10**6, max_value=10**6)
LISTS = st.tuples(st.lists(INTEGERS, min_size=2, max_size=5), SEPARATORS).map(lambda t: t[1].join(map(str, t[0])))
THOUSANDS = r"-?[1-9]\d{0,2}(,\d{3})+"
WRAPS = st.sampled_from(["{}", "({})", "[{}]", r"\{{{}\}}"])


def _single_number(text: str | None) -> bool:
    """True when `text` is one number (what a grader would compare to a numeric gold)."""
    return text is not None and normalise_number(text) is not None and not is_number_list(text)


@settings(max_examples=300, deadline=None)
@given(LISTS, WRAPS)
def test_no_reader_turns_a_list_into_one_number(listed, wrap):
    assume(not re.fullmatch(THOUSANDS, listed))  # `1,234` is the number 1234: the one reading a comma keeps
    text = wrap.format(listed)
    assert normalise_number(listed) is None
    assert is_number_list(text)
    assert evaluate_arithmetic(text) is None  # `2, -1` is not the arithmetic 2 - 1
    assert not _single_number(answer_number(text))
    for reply in (f"#### {listed}", f"The answer is {listed}.", rf"so $\boxed{{{listed}}}$",
                  f'{{"reasoning": "...", "answer": "{text}"}}'):
        assert not _single_number(parse_number_answer(reply)), reply
        assert not _single_number(json_reply_answer(reply)[0]), reply


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-10**12, max_value=10**12))
def test_thousands_separators_still_read_as_the_number(n):
    assert normalise_number(f"{n:,}") == str(n)
    assert normalise_number(f"${n:,}.") == str(n)
    assert parse_number_answer(f"So the total is {n:,}.\n#### {n:,}") == str(n)
    assert answer_number(f"{n:,} dollars") == str(n)
    assert not is_number_list(f"{n:,}")


@pytest.mark.parametrize("text, expected", [
    ("2, 5", None), ("2, -1", None), ("1, 2, 3, 4", None), ("2,5", None), ("1,2345", None),
    ("1,234", "1234"), ("$1,080", "1080"), ("18,", "18"), ("1,000,000.50", "1000000.5"), ("3/4", "0.75"),
])
def test_normalise_number_on_the_issue_s_examples(text, expected):
    assert normalise_number(text) == expected


def test_parsed_lists_keep_every_item():
    assert parse_number_answer("There are 4 blue and 6 red boxes left.\n#### 4, 6") == "4, 6"  # a RouteLLM reply
    assert json_reply_answer('{"reasoning": "x", "answer": "2, -1"}') == ("2, -1", "json")
    assert answer_number("(2, -1)") == "(2, -1)"
    assert NUMBER_LIST.fullmatch(parse_number_answer(r"$\boxed{1,2,3,4}$"))


def test_list_golds_are_graded_as_lists():
    """ZeroEval math-l5 golds that are lists: the same list in any order / spacing is right; one of its
    numbers, or the digits run together, is wrong."""
    golds = ["2, -1", "2, 5", "1, 2, 3, 4"]
    assert [matcher_for("auto", g, False) for g in golds] == ["math"] * 3
    cases = [  # (gold, reply's parsed answer, right?)
        ("2, -1", "-1, 2", True), ("2, -1", "1", False), ("2, -1", "2", False),
        ("2, 5", "2,5", True), ("2, 5", "25", False),
        ("1, 2, 3, 4", "4, 3, 2, 1", True), ("1, 2, 3, 4", "1234", False),
    ]
    items = [_item(i, gold) for i, (gold, _, _) in enumerate(cases)]
    answers = [make_answer("S", items[i], parsed, parsed) for i, (_, parsed, _) in enumerate(cases)]
    out = match_frame(answers_frame(answers), items_frame(items), 1e-6, math_timeout_s=2).sort("item_id")
    assert out["matcher"].to_list() == ["math"] * len(cases)
    assert out["programmatic"].to_list() == [right for _, _, right in cases]
