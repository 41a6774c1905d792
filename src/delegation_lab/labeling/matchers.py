"""Programmatic labels: numeric match with tolerance, or choice-letter match."""

from __future__ import annotations

import json

import polars as pl

from delegation_lab.parsing import numbers_match


def programmatic_correct(parsed: str | None, gold: str | None, is_choice: bool, rel_tol: float) -> bool | None:
    """True / False against gold; None when the item has no gold to compare with."""
    if gold is None:
        return None
    if parsed is None:
        return False
    if is_choice:
        return parsed.strip().upper() == gold.strip().upper()
    return numbers_match(parsed, gold, rel_tol)


def imported_correct(extra: str | None) -> bool | None:
    """Correctness a replayed cache brought with it (answers.extra `imported_correct`)."""
    if not extra:
        return None
    value = json.loads(extra).get("imported_correct")
    return None if value is None else bool(value)


def match_frame(answers: pl.DataFrame, items: pl.DataFrame, rel_tol: float) -> pl.DataFrame:
    """answers joined to gold with `programmatic` and `imported` verdict columns."""
    joined = answers.join(items.select(["item_id", "gold", "choices", "split", "difficulty"]), on="item_id", how="left")
    programmatic = [
        programmatic_correct(r["parsed_answer"], r["gold"], r["choices"] is not None, rel_tol)
        if r["error"] is None else (False if r["gold"] is not None else None)
        for r in joined.select(["parsed_answer", "gold", "choices", "error"]).iter_rows(named=True)
    ]
    imported = [imported_correct(e) for e in joined["extra"].to_list()]
    return joined.with_columns(
        pl.Series("programmatic", programmatic, dtype=pl.Boolean),
        pl.Series("imported", imported, dtype=pl.Boolean),
    )
