"""A verifier's error rates against gold on a labelled answers table: a false positive is a wrong
answer it accepts, a false negative a right answer it rejects. What an experiment reports to compare
a real verifier (`agreement`) with the simulated judge on the same answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from delegation_lab.evaluation.verifier import Verifier


def error_rates(verifier: Verifier, labeled: pl.DataFrame, seeds: Sequence[int] = (0,)) -> dict[str, Any]:
    """FP rate = accepted wrong answers / wrong answers, FN rate = rejected right answers / right answers,
    over the rows of `labeled` (columns `solver`, `item_id`, `correct` = gold) and verifier seeds `seeds`
    (a noisy judge draws anew per seed; other kinds repeat): pooled (`all`) and per solver (`by_solver`).
    Counts of false positives / negatives are summed over the seeds; a rate is null without a wrong
    (right) answer to err on."""
    correct = labeled["correct"].cast(pl.Boolean).to_numpy().astype(bool)
    solvers = labeled["solver"].to_numpy().astype(object)
    accepted = np.stack([verifier.accepts(solvers, labeled["item_id"].to_numpy().astype(object), correct, int(s))
                         for s in seeds]) if len(correct) else np.zeros((len(seeds), 0), dtype=bool)
    out: dict[str, Any] = {"verifier": verifier.name, "seeds": len(seeds), "all": _counts(correct, accepted)}
    out["by_solver"] = {str(s): _counts(correct[solvers == s], accepted[:, solvers == s]) for s in sorted(set(solvers))}
    return out


def _counts(correct: np.ndarray, accepted: np.ndarray) -> dict[str, Any]:
    seeds = accepted.shape[0]
    right, wrong = int(correct.sum()), int((~correct).sum())
    fp, fn = int((accepted & ~correct).sum()), int((~accepted & correct).sum())
    return {"answers": len(correct), "right": right, "wrong": wrong, "false_positives": fp, "false_negatives": fn,
            "false_positive_rate": fp / (wrong * seeds) if wrong else None,
            "false_negative_rate": fn / (right * seeds) if right else None}
