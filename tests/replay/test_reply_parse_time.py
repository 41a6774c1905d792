"""ZeroEval reply parsing is linear (issue 42): a reply of 400 k `{` took 90 s (200 k: 25 s)."""

from __future__ import annotations

import time

from delegation_lab.solvers.replay.json_reply import json_reply_answer


def test_a_reply_of_many_braces_parses_fast():
    start = time.perf_counter()
    assert json_reply_answer("{" * 400_000) == (None, "none")
    assert time.perf_counter() - start < 5


def test_json_answers_still_found():
    assert json_reply_answer('x {{ {"reasoning": "r", "answer": "42"} }') == ("42", "json")
    assert json_reply_answer('{\n  "answer": 7}') == ("7", "json")
    assert json_reply_answer("so \\boxed{12}") == ("12", "boxed")
