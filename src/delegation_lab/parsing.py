"""Answer parsing: GSM8K gold (`#### N`), free-form final numbers, and choice letters.

A comma is a thousands separator only between groups of three digits (`1,234,567`); anywhere else it
separates the items of a list (`2, 5`, `(2, -1)`), and a list is never read as a number: it stays a
list (`2, 5`) for the `math` matcher, which compares lists, tuples, sets and intervals as such.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

# One number: thousands commas only in groups of three (`1,234`), never across list items (`2, 5`).
_NUMBER = r"-?\$?\s?(?:[1-9]\d{0,2}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d+)?(?:/\d+)?"
# Two or more numbers separated by commas: a list answer, kept whole (a `;` separates steps: `= 50; 50 - 5 = 45`).
_LIST = _NUMBER + r"(?:\s*,\s*" + _NUMBER + r")+"
NUMBER = re.compile(_NUMBER)
NUMBER_LIST = re.compile(_LIST)
_ANSWER = "(" + _LIST + "|" + _NUMBER + ")"
HASHES = re.compile(r"####\s*" + _ANSWER)
FINAL_PHRASES = re.compile(r"(?:final answer|the answer|answer)\s*(?:is|=|:)?\s*[:\s]*\**\s*" + _ANSWER, re.I)
BOXED = re.compile(r"\\boxed\{\s*" + _ANSWER + r"\s*\}")
CALC_ANNOTATION = re.compile(r"<<[^<>]*>>")
_THOUSANDS = re.compile(r"[-+]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")
_THOUSANDS_IN_TEXT = re.compile(r"(?<![\d,])[1-9]\d{0,2}(?:,\d{3})+(?!\d|,\d)")
_LIST_SEPARATOR = re.compile(r"\d\s*,\s*-?\$?\d")


def normalise_number(text: str) -> str | None:
    """'1,234.50' -> '1234.5', '$18' -> '18', '3/4' -> '0.75'; None if not one number ('2, 5' is a list)."""
    s = text.strip().replace("$", "").rstrip(".,")
    if "," in s:  # thousands separators only between groups of three digits, never before a space
        if re.search(r",\s", s) or not _THOUSANDS.fullmatch(s.replace(" ", "")):
            return None  # a list (`2, 5`, `0,100`), not a number with thousands separators
        s = s.replace(",", "")
    s = s.replace(" ", "")
    if not s:
        return None
    try:
        value = Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    if value.denominator == 1:
        return str(value.numerator)
    return repr(float(value)).rstrip("0").rstrip(".")


def is_number_list(text: str) -> bool:
    """Two or more numbers separated by a comma (`2, -1`, `(1, 2)`, `[0,1)`) outside a
    thousands group: an answer to compare as a list, never as one of its numbers."""
    return _LIST_SEPARATOR.search(_THOUSANDS_IN_TEXT.sub("0", text)) is not None



def normalise_answer(text: str) -> str | None:
    """A captured answer: one number normalised, or a list with each item normalised (`2,5` -> `2, 5`)."""
    if NUMBER_LIST.fullmatch(text.strip()):
        items = [normalise_number(m) for m in NUMBER.findall(text)]
        return ", ".join(i for i in items if i is not None) or None
    return normalise_number(text)


def parse_gsm8k_gold(solution: str) -> str | None:
    m = HASHES.search(solution)
    return normalise_answer(m.group(1)) if m else None


def parse_number_answer(text: str) -> str | None:
    """The answer a free-form solution commits to.

    Order: `#### N`, `\\boxed{N}`, the last "answer is N", else the last number in the text; a list
    there (`#### 2, 5`) is kept as a list. Calculator annotations `<<a*b=c>>` are dropped first so
    their operands never count.
    """
    if not text:
        return None
    clean = CALC_ANNOTATION.sub("", text)
    for pattern in (HASHES, BOXED):
        found = pattern.findall(clean)
        if found:
            return normalise_answer(found[-1])
    found = FINAL_PHRASES.findall(clean)
    if found:
        return normalise_answer(found[-1])
    numbers = re.findall(_ANSWER, clean)  # a trailing list stays a list
    return normalise_answer(numbers[-1]) if numbers else None


LETTER_PATTERNS = (
    re.compile(r"(?:answer|option|choice)\s*(?:is|:)?\s*[\(\[]?\s*([A-E])\b(?!\w)", re.I),
    re.compile(r"^\s*[\(\[]?([A-E])[\)\]\.:]", re.M),
    re.compile(r"\b([A-E])\)"),
)


def parse_choice(text: str, n_choices: int = 5) -> str | None:
    """The option letter a multiple-choice answer commits to (last explicit one wins)."""
    if not text:
        return None
    letters = "ABCDE"[:n_choices]
    for pattern in LETTER_PATTERNS:
        found = [m.upper() for m in pattern.findall(text) if m.upper() in letters]
        if found:
            return found[-1]
    bare = re.findall(r"\b([A-E])\b", text.strip())
    bare = [b for b in bare if b in letters]
    return bare[-1] if bare else None


def numbers_match(answer: str | None, gold: str | None, rel_tol: float = 1e-6) -> bool:
    if answer is None or gold is None:
        return False
    try:
        a, g = float(answer), float(gold)
    except ValueError:
        return answer.strip() == gold.strip()
    return math.isclose(a, g, rel_tol=rel_tol, abs_tol=rel_tol)


# What a mathematical gold may hold besides LaTeX commands: digits, one-letter variables, operators,
# brackets (intervals, sets, tuples). Two letters in a row mean words ("Paris", "yes"), not math.
_MATH_CHARS = re.compile(r"[\d\sA-Za-z+\-*/^_=<>()\[\]{},.!|']+")
_MATH_MARK = re.compile(r"[\d+\-*/^=<>()\[\]{}]")


def is_math_expression(gold: str) -> bool:
    """A gold that is an expression but not a plain number: `\\frac{3}{4}`, `2\\sqrt{2}`, `[0,1)`, `x^2+1`.

    Plain numbers (anything `normalise_number` reads, `3/4` included) are not: they keep the numeric
    match. LaTeX (a backslash or `$`) always is; otherwise only digits, one-letter variables, operators
    and brackets, with at least one digit or operator.
    """
    text = gold.strip()
    if not text or normalise_number(text) is not None:
        return False
    if "\\" in text or "$" in text:
        return True
    return (_MATH_CHARS.fullmatch(text) is not None and re.search(r"[A-Za-z]{2}", text) is None
            and _MATH_MARK.search(text) is not None)
