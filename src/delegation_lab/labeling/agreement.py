"""Judge vs programmatic agreement: how often the judge errs, and how (false positives / negatives)."""

from __future__ import annotations

from typing import Any

import polars as pl


def agreement_report(labels: pl.DataFrame, examples: int = 5) -> dict[str, Any]:
    """Per solver and overall: agreement, judge FP rate (judge says right, gold says wrong) and FN rate."""
    both = labels.filter(pl.col("programmatic").is_not_null() & pl.col("judge_verdict").is_not_null())
    report: dict[str, Any] = {}
    groups = [("all", both)] + [(str(k[0]), g) for k, g in both.group_by("solver", maintain_order=True)]
    for name, g in groups:
        wrong = g.filter(~pl.col("programmatic"))
        right = g.filter(pl.col("programmatic"))
        fp = wrong.filter(pl.col("judge_verdict")).height
        fn = right.filter(~pl.col("judge_verdict")).height
        report[name] = {
            "n": g.height,
            "agreement": (g.height - fp - fn) / g.height if g.height else None,
            "judge_false_positives": fp,
            "judge_false_negatives": fn,
            "judge_fp_rate": fp / wrong.height if wrong.height else None,
            "judge_fn_rate": fn / right.height if right.height else None,
        }
    disagreements = both.filter(pl.col("programmatic") != pl.col("judge_verdict"))
    report["disagreement_examples"] = disagreements.head(examples).select(
        "solver", "item_id", "programmatic", "judge_verdict"
    ).to_dicts()
    return report


def imported_agreement(labels: pl.DataFrame) -> dict[str, Any]:
    """Where a replayed cache brought labels and gold is known: how often our relabel agrees."""
    both = labels.filter(pl.col("imported").is_not_null() & pl.col("programmatic").is_not_null())
    out: dict[str, Any] = {}
    for (solver,), g in both.group_by("solver", maintain_order=True):
        out[str(solver)] = {
            "n": g.height,
            "agreement": float((g["imported"] == g["programmatic"]).mean()),
            "imported_true_programmatic_false": int((g["imported"] & ~g["programmatic"]).sum()),
            "imported_false_programmatic_true": int((~g["imported"] & g["programmatic"]).sum()),
        }
    return out
