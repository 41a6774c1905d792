"""Programmatic labels: numeric match with tolerance, choice-letter match, or math-expression
equivalence (math-verify), chosen per item (`answer_format`) or for the dataset (`label.matcher`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.labeling import AUTO, MATCHERS
from delegation_lab.labeling.math_verifier import MathVerifier, math_answer
from delegation_lab.parsing import is_math_expression, numbers_match


def programmatic_correct(parsed: str | None, gold: str | None, is_choice: bool, rel_tol: float) -> bool | None:
    """True / False against gold; None when the item has no gold to compare with."""
    if gold is None:
        return None
    if parsed is None:
        return False
    if is_choice:
        return parsed.strip().upper() == gold.strip().upper()
    return numbers_match(parsed, gold, rel_tol)


@dataclass(frozen=True)
class ToMatch:
    """One answer with gold (never null) to grade."""

    parsed: str | None
    reply: str | None
    gold: str


@dataclass(frozen=True)
class MatchSettings:
    rel_tol: float = 1e-6
    math_timeout_s: int = 2


@dataclass
class MatchStats:
    math_answers: int = 0
    math_timeouts: int = 0


def match_numeric(rows: list[ToMatch], settings: MatchSettings, stats: MatchStats) -> list[bool]:
    return [bool(programmatic_correct(r.parsed, r.gold, False, settings.rel_tol)) for r in rows]


def match_choice(rows: list[ToMatch], settings: MatchSettings, stats: MatchStats) -> list[bool]:
    return [bool(programmatic_correct(r.parsed, r.gold, True, settings.rel_tol)) for r in rows]


def match_math(rows: list[ToMatch], settings: MatchSettings, stats: MatchStats) -> list[bool]:
    """math-verify's verdict; a gold it reads nothing in is matched as `numeric` would."""
    out = []
    with MathVerifier(settings.math_timeout_s) as verifier:
        for r in rows:
            answer = math_answer(r.parsed, r.reply)
            verdict = verifier.verify(r.gold, answer) if answer is not None else False
            if verdict is None:
                verdict = bool(programmatic_correct(r.parsed, r.gold, False, settings.rel_tol))
            out.append(verdict)
        stats.math_answers += len(rows)
        stats.math_timeouts += verifier.timeouts
    return out


Matcher = Callable[[list[ToMatch], MatchSettings, MatchStats], list[bool]]


def matcher_for(declared: str, gold: str, has_choices: bool) -> str:
    """`declared` (an item's answer_format or label.matcher), with `auto` resolved for this item."""
    if declared != AUTO:
        return declared
    if has_choices:
        return "choice"
    return "math" if is_math_expression(gold) else "numeric"


def imported_correct(extra: str | None) -> bool | None:
    """Correctness a replayed cache brought with it (answers.extra `imported_correct`)."""
    if not extra:
        return None
    value = json.loads(extra).get("imported_correct")
    return None if value is None else bool(value)


def match_frame(
    answers: pl.DataFrame, items: pl.DataFrame, rel_tol: float, matcher: str = AUTO, math_timeout_s: int = 2,
    stats: MatchStats | None = None,
) -> pl.DataFrame:
    """answers joined to gold with `programmatic` and `imported` verdict columns, and the `matcher` used.

    A backend error is wrong; an item without gold gets no programmatic verdict.
    """
    stats = stats if stats is not None else MatchStats()
    if "answer_format" not in items.columns:
        items = items.with_columns(pl.lit(None, dtype=pl.String).alias("answer_format"))
    _check_formats(items)
    joined = answers.join(
        items.select(["item_id", "gold", "choices", "split", "difficulty", "answer_format"]), on="item_id", how="left"
    )
    names: list[str | None] = []
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(joined.select("gold", "choices", "answer_format", "error").iter_rows(named=True)):
        name = None
        if r["gold"] is not None and r["error"] is None:
            name = matcher_for(r["answer_format"] or matcher, r["gold"], r["choices"] is not None)
            groups.setdefault(name, []).append(i)
        names.append(name)
    programmatic: list[bool | None] = [
        None if g is None else False for g in joined["gold"].to_list()
    ]
    rows = joined.select("parsed_answer", "answer_text", "gold").rows()
    settings = MatchSettings(rel_tol, math_timeout_s)
    for name, index in groups.items():
        verdicts = MATCHERS.get(name)([ToMatch(*rows[i]) for i in index], settings, stats)
        for i, verdict in zip(index, verdicts, strict=True):
            programmatic[i] = verdict
    imported = [imported_correct(e) for e in joined["extra"].to_list()]
    return joined.drop("answer_format").with_columns(
        pl.Series("programmatic", programmatic, dtype=pl.Boolean),
        pl.Series("imported", imported, dtype=pl.Boolean),
        pl.Series("matcher", names, dtype=pl.String),
    )


def _check_formats(items: pl.DataFrame) -> None:
    allowed = {AUTO, *MATCHERS.names()}
    bad = items.filter(pl.col("answer_format").is_not_null() & ~pl.col("answer_format").is_in(sorted(allowed)))
    if bad.height:
        row = bad.row(0, named=True)
        raise InputError(
            f"items: item {row['item_id']} has answer_format {row['answer_format']!r}; "
            f"expected one of {sorted(allowed)} or null ({bad.height} such items)"
        )
