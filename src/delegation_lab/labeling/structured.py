"""Matchers for answers that are a structure rather than a number: a logic puzzle's solution grid
(`grid`, ZebraLogic) and a Python literal (`literal`, CRUXEval's output prediction). Registered in
`labeling.MATCHERS`; a ZeroEval cache names them per item (`answer_format`).

`grid`: the gold and the answer are JSON objects `{"House 1": {"Name": "peter", ...}, ...}`; the
answer is right when every cell of the gold is matched (case and surrounding space ignored, a list
cell read as its first element), ZeroEval's puzzle accuracy (src/evaluation/zebra_grid_eval.py).

`literal`: right when ZeroEval's comparison holds (src/evaluation/crux_eval.py: both texts with
surrounding quotes stripped are equal) or when both read as Python literals of equal value, as
CRUXEval's own `assert f(x) == answer` decides (`{1: None, 2: None}` = `{2: None, 1: None}`,
`[1,2]` = `[1, 2]`, `"a"` = `'a'`). Literals are read with `ast.literal_eval`, never evaluated.
"""

from __future__ import annotations

import ast
import json
import warnings
from typing import Any

from delegation_lab.labeling.matchers import MatchSettings, MatchStats, ToMatch

MAX_LITERAL_CHARS = 10_000
"""Longest answer read as a literal: longer ones are compared as text only (parsing is quadratic in
nesting, and no CRUXEval output is near it)."""


def _cell(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return value.lower().strip() if isinstance(value, str) else None


def grid_correct(answer: str | None, gold: str) -> bool:
    """Every cell of the gold grid in the answer's grid (JSON texts); no or unreadable answer: wrong."""
    try:
        truth, grid = json.loads(gold), json.loads(answer) if answer else None
    except json.JSONDecodeError:
        return False
    if not isinstance(grid, dict) or not isinstance(truth, dict) or not truth:
        return False
    for house, cells in truth.items():
        row = grid.get(house)
        if not isinstance(row, dict):
            return False
        if any(_cell(row.get(column)) != str(value).lower().strip() for column, value in cells.items()):
            return False
    return True


def _literal(text: str) -> tuple[bool, Any]:
    if len(text) > MAX_LITERAL_CHARS:
        return False, None
    try:
        with warnings.catch_warnings():  # `8.5abc` warns "invalid decimal literal" before it fails
            warnings.simplefilter("ignore", SyntaxWarning)
            return True, ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def literal_correct(answer: str | None, gold: str) -> bool:
    """ZeroEval's text comparison, or equal Python literal values."""
    if answer is None:
        return False
    if answer.strip("'\"").replace("\n", "\\n") == gold.strip("'\""):
        return True
    (a_ok, a), (g_ok, g) = _literal(answer), _literal(gold)
    return a_ok and g_ok and bool(a == g)


def match_grid(rows: list[ToMatch], settings: MatchSettings, stats: MatchStats) -> list[bool]:
    return [grid_correct(r.parsed, r.gold) for r in rows]


def match_literal(rows: list[ToMatch], settings: MatchSettings, stats: MatchStats) -> list[bool]:
    return [literal_correct(r.parsed, r.gold) for r in rows]
