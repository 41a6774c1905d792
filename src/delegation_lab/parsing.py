"""Answer parsing: GSM8K gold (`#### N`), free-form final numbers, and choice letters."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_NUMBER = r"-?\$?\s?\d[\d,]*(?:\.\d+)?(?:/\d+)?"
NUMBER = re.compile(_NUMBER)
HASHES = re.compile(r"####\s*(" + _NUMBER + ")")
FINAL_PHRASES = re.compile(
    r"(?:final answer|the answer|answer)\s*(?:is|=|:)?\s*[:\s]*\**\s*(" + _NUMBER + ")", re.I
)
BOXED = re.compile(r"\\boxed\{\s*(" + _NUMBER + r")\s*\}")
CALC_ANNOTATION = re.compile(r"<<[^<>]*>>")


def normalise_number(text: str) -> str | None:
    """'1,234.50' -> '1234.5', '$18' -> '18', '3/4' -> '0.75'; None if not a number."""
    s = text.strip().replace("$", "").replace(",", "").replace(" ", "").rstrip(".")
    if not s:
        return None
    try:
        value = Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    if value.denominator == 1:
        return str(value.numerator)
    return repr(float(value)).rstrip("0").rstrip(".")


def parse_gsm8k_gold(solution: str) -> str | None:
    m = HASHES.search(solution)
    return normalise_number(m.group(1)) if m else None


def parse_number_answer(text: str) -> str | None:
    """The answer a free-form solution commits to.

    Order: `#### N`, `\\boxed{N}`, the last "answer is N", else the last number in the text.
    Calculator annotations `<<a*b=c>>` are dropped first so their operands never count.
    """
    if not text:
        return None
    clean = CALC_ANNOTATION.sub("", text)
    for pattern in (HASHES, BOXED):
        found = pattern.findall(clean)
        if found:
            return normalise_number(found[-1])
    found = FINAL_PHRASES.findall(clean)
    if found:
        return normalise_number(found[-1])
    numbers = NUMBER.findall(clean)
    return normalise_number(numbers[-1]) if numbers else None


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
