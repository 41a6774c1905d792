"""One way to count a solver's accuracy, used by `dlab import --json` (`solvers.replay.relabel`), the
label stage's metrics/solve.json and metrics/replay_accuracy.json (`labeling.labels`), so that the
three agree on the same answers.

- An answer's label is the cache's own where it brings one and `label.use_imported` is set (or the
  item has no gold), else our verdict against gold (`final_label`).
- An answer with no reply (no text, empty or blank) and no label of the cache's own is wrong: it is
  in the denominator and counted in `no_reply`. (A correctness-only cache's rows have no text but
  a label: they are labelled answers, not missing replies.)
- An answer with no label at all is counted in `unlabelled` and left out of the denominator: the
  label stage refuses such answers, and `dlab params check` names them first (`labeling.preflight`).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


def takes_imported(use_imported: bool) -> pl.Expr:
    """Where the label is the cache's own: it brought one, and `use_imported` or the item has no gold."""
    return pl.col("imported").is_not_null() & (pl.lit(use_imported) | pl.col("gold").is_null())


def final_label(use_imported: bool) -> pl.Expr:
    """The label an answer gets from `programmatic` (ours), `imported` (the cache's) and `gold`."""
    return pl.when(takes_imported(use_imported)).then(pl.col("imported")).otherwise(pl.col("programmatic"))


def no_reply(reply: str) -> pl.Expr:
    """An answer whose text (column `reply`) is missing or blank and that the cache did not label."""
    text = pl.col(reply)
    return (text.is_null() | (text.str.strip_chars() == "")) & pl.col("imported").is_null()


@dataclass(frozen=True)
class Accuracy:
    n_items: int
    """Labelled answers: the denominator."""
    right: int
    no_reply: int
    """Answers with no reply and no label of the cache's own (wrong, and in `n_items`)."""
    unlabelled: int
    """Answers with no label (outside `n_items`)."""

    @property
    def accuracy(self) -> float | None:
        return self.right / self.n_items if self.n_items else None


def count_accuracy(rows: pl.DataFrame, reply: str) -> Accuracy:
    """The accuracy of `rows` (one answer each, with the final label `correct`, `imported` and the
    reply text in column `reply`)."""
    labelled = rows.filter(pl.col("correct").is_not_null())
    return Accuracy(
        n_items=labelled.height,
        right=int(labelled["correct"].sum()),
        no_reply=int(labelled.select(no_reply(reply)).to_series().sum()),
        unlabelled=rows.height - labelled.height,
    )
