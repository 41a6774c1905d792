"""The answer a reply commits to when it was asked for a JSON block with an `answer` field (ZeroEval's
prompt: "Present your reasoning and solution in the following json format ... `"answer": "42"`"),
read as a careful grader would:

1. the first JSON object in the reply with a non-empty `answer` (raw newlines inside strings allowed,
   LaTeX backslashes such as `\\(` repaired, a template's `___` skipped);
2. else the first `"answer": ...` key of a block that is not valid JSON (unbalanced quotes, a
   missing comma);
3. else the last `\\boxed{...}`;
4. else the number the free text commits to: the last `#### N`, else the last "answer is N" /
   `**Answer:** N` / `Answer: "N"`; never a bare last number, which in a reply that broke the
   format is as often a step of a truncated or looping derivation as an answer;
5. else nothing: the reply has no extractable answer (`no_answer`).

An answer that is a list (`2, -1`, `(1, 2)`, `[0, 1)`) stays that list, for the `math` matcher to compare
as a list, tuple, set or interval: never one of its numbers, nor the arithmetic `2 - 1`. Otherwise an
answer's text becomes a number where it holds one: the whole text when it is a number (`$1,080`,
`3/4`), else its value when it is plain arithmetic (`(300 * 4 + 120 * 6) / 12`), else the number
after the last `=` (`20 * 40 + 80 * 30 = 3200`), else the first number (`18
dollars per day`, `2:00 pm`); a text without a number (`Cannot be determined`) is kept as the answer,
so it is graded wrong rather than counted as missing. docs/zeroeval_grading.md compares this with
ZeroEval's own grader item by item.

Where the gold is not a number (`as_number=False`: MATH's `\\frac{3}{4}` or `(2, -1)`, CRUXEval's Python
literals) the answer's text is kept as written for the task's matcher. A logic grid (ZebraLogic) is
read by `grid_reply_answer`: the `solution` object of the last JSON block that has one.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from fractions import Fraction
from typing import Any

from delegation_lab.errors import InputError
from delegation_lab.json_input import raw_decode
from delegation_lab.parsing import CALC_ANNOTATION, HASHES, NUMBER, NUMBER_LIST, is_number_list, normalise_answer, normalise_number

_DECODER = json.JSONDecoder(strict=False)  # strict=False: raw newlines inside strings, as models write them
_ESCAPES = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|\\')
_ANSWER_KEY = re.compile(r'"answer"\s*:\s*(?:"((?:[^"\\]|\\.)*)"|([^\s",}][^,}\n]*))', re.S)
_BOXED = "\\boxed{"
_COMMITTED = re.compile(r"(?:final answer|answer)\s*(?:is|=|:)?[\s:*\"'\\]*(" + NUMBER_LIST.pattern + "|" + NUMBER.pattern + ")", re.I)
_LATEX_FRAC = re.compile(r"\\[dt]?frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}")
_LATEX_TEXT = re.compile(r"\\(?:text|mathrm|textbf|mbox)\{[^{}]*\}")
_ARITHMETIC = re.compile(r"[\d\s.+\-*/()]+")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.USub: operator.neg, ast.UAdd: operator.pos}
PLACEHOLDERS = {"", "___", "..."}
"""Values of `answer` that are the prompt's template echoed, not an answer."""

SOURCES = ("json", "json_key", "boxed", "stated_number", "stated_choice", "none")
"""Where an answer came from, in the order tried (`answer_source` column of a zeroeval cache);
`stated_choice`: a multiple-choice reply with no JSON answer, read by `parsing.parse_choice`."""


_OBJECT_START = re.compile(r'\{(?=[ \t\n\r]*["}])')


def _repair_escapes(text: str) -> str:
    """A lone backslash (LaTeX `\\(`, `\\times`'s cousins that are not JSON escapes) doubled."""
    return _ESCAPES.sub(lambda m: m.group(0) if len(m.group(0)) > 1 else "\\\\", text)


def _json_objects(text: str, where: str = "reply", error: type[InputError] = InputError):
    """Every JSON object that starts at a `{` of the text, in order of position. Only a `{` that can open
    an object (a key's quote or `}` next) is decoded: each failed decode costs O(position) (the error's
    line number), so trying every `{` of a reply of 400 k `{` was quadratic (90 s). An object nested
    deeper than the decoder can read is `error` naming `where` and the depth."""
    for start in (m.start() for m in _OBJECT_START.finditer(text)):
        try:
            value, _ = raw_decode(_DECODER, text, start, where, error)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def _value_text(value: Any, as_number: bool = True) -> str | None:
    """A JSON answer value as text; None for a missing or placeholder answer. Kept as written
    (`as_number=False`), `true` / `null` read as Python writes them (a CRUXEval output may be `None`)."""
    if value is None or isinstance(value, bool):
        return None if as_number or value is None else str(value)
    if isinstance(value, (int, float)):
        return str(value)
    text = value if isinstance(value, str) else json.dumps(value)
    if not as_number:  # before the strip: a swallowed `\\f` is a form feed, which strip would drop
        text = text.translate(_LATEX_CONTROLS)
    return None if text.strip() in PLACEHOLDERS else text.strip()


def _arithmetic(node: ast.AST) -> Fraction:
    """Exact: `500 * 0.3 + 350` is 500, not 499.99999999999994."""
    if isinstance(node, ast.Expression):
        return _arithmetic(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_arithmetic(node.left), _arithmetic(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_arithmetic(node.operand))
    raise ValueError("not plain arithmetic")


def evaluate_arithmetic(text: str) -> str | None:
    """The value of an answer that is plain arithmetic (`((300 * 4) + (120 * 6)) / 12`, `$`, thousands
    commas allowed), never `eval`: only numbers, + - * / and brackets; None for anything else (a list
    `2, -1` is not the arithmetic `2 - 1`)."""
    if is_number_list(text):
        return None
    expr = text.replace("$", "").replace(",", "").strip()
    if not _ARITHMETIC.fullmatch(expr) or not re.search(r"\d\s*[-+*/]", expr) or len(expr) > 200:
        return None
    try:
        value = _arithmetic(ast.parse(expr, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None
    if abs(value) >= 10**15:
        return None
    return normalise_number(f"{value.numerator}/{value.denominator}")


def answer_number(text: str) -> str:
    """The number an answer's text states (see the module docstring), else the text itself."""
    clean = _LATEX_TEXT.sub("", _LATEX_FRAC.sub(r"\1/\2", text)).replace("\\$", "$").replace("{,}", ",")
    if is_number_list(clean):
        return normalise_answer(clean) or text  # a list is compared as a list, never as one of its numbers
    whole = normalise_number(clean.replace("%", ""))
    if whole is not None:
        return whole
    boxed = last_boxed(clean)
    if boxed is not None and boxed != clean:
        return answer_number(boxed)
    value = evaluate_arithmetic(clean)
    if value is not None:
        return value
    tail = clean.rsplit("=", 1)[1] if "=" in clean else clean
    for part in (tail, clean):
        for found in NUMBER.findall(part):
            number = normalise_number(found)
            if number is not None:
                return number
    return text


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (nested braces kept), None when there is none."""
    start = text.rfind(_BOXED)
    while start >= 0:
        depth, i = 1, start + len(_BOXED)
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[start + len(_BOXED): i - 1].strip()
        start = text.rfind(_BOXED, 0, start)
    return None


_TEMPLATE_BLANKS = re.compile(r"_{3,}(.*?)_{3,}", re.S)
_LATEX_CONTROLS = str.maketrans({"\f": "\\f", "\b": "\\b", "\t": "\\t", "\r": "\\r", "\n": "\\n"})


def as_written(text: str) -> str:
    """An answer kept as the model wrote it: a JSON escape that swallowed a LaTeX backslash (`"\\frac"`
    decodes to a form feed and `rac`, `"\\times"` to a tab) spelled back, as a newline is (CRUXEval's
    gold writes `\\n`, ZeroEval's crux_eval.py turns the answer's newlines into it too); the blanks of
    the prompt's template the answer was written into (`___3___`) dropped."""
    text = text.translate(_LATEX_CONTROLS).strip()
    blank = _TEMPLATE_BLANKS.fullmatch(text)
    return blank.group(1).strip() if blank and blank.group(1).strip() else text


def json_reply_answer(reply: str | None, where: str = "reply", error: type[InputError] = InputError,
                      as_number: bool = True) -> tuple[str | None, str]:
    """(the answer, where it came from: one of `SOURCES`) of a reply asked for a JSON `answer`; a JSON
    block nested too deep to read is `error` naming `where` (exit code 2). `as_number`: the number the
    answer states (`answer_number`), else the answer's text as written."""
    if not reply:
        return None, "none"
    final = answer_number if as_number else as_written
    for text in (reply, _repair_escapes(reply)):
        for obj in _json_objects(text, where, error):
            value = _value_text(obj.get("answer"), as_number)
            if value is not None:
                return final(value), "json"
    for m in _ANSWER_KEY.finditer(reply):
        value = _value_text(m.group(1) if m.group(1) is not None else m.group(2))
        if value is not None:
            return final(value), "json_key"
    boxed = last_boxed(reply)
    if boxed:
        return final(boxed), "boxed"
    number = committed_number(reply)
    return (number, "stated_number") if number is not None else (None, "none")


def committed_number(text: str) -> str | None:
    """The number free text states as its answer (`#### N`, else "answer is N" and its spellings)."""
    clean = CALC_ANNOTATION.sub("", text)
    for pattern in (HASHES, _COMMITTED):
        found = pattern.findall(clean)
        if found:
            return normalise_answer(found[-1])
    return None


def _grid(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The house -> attribute -> value grid a JSON object holds: its `solution`, or the object itself
    when every key is a house (ZebraLogic's first prompt asked for the bare grid)."""
    grid = obj.get("solution", obj)
    if isinstance(grid, dict) and grid and all(isinstance(k, str) and k.startswith("House") for k in grid):
        return grid
    return None


def grid_reply_answer(reply: str | None, where: str = "reply",
                      error: type[InputError] = InputError) -> tuple[str | None, str]:
    """(the grid as JSON text, "json") of a reply asked for a ZebraLogic solution grid: the last JSON
    block's, as ZeroEval reads the last one; (None, "none") when no block holds a grid."""
    found = None
    for text in (reply or "", _repair_escapes(reply or "")):
        for obj in _json_objects(text, where, error):
            found = _grid(obj) or found
        if found is not None:
            return json.dumps(found, ensure_ascii=False), "json"
    return None, "none"
