"""The compare page's arithmetic: two points' item-level outcomes on their common items, the paired
bootstrap of the accuracy and cost differences (evaluation.statistics), and the items where they
disagree. Streamlit-free, so tests call the very same code."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from delegation_lab.evaluation.params import IntervalParams, TieParams
from delegation_lab.evaluation.statistics import ItemBootstrap, paired_bootstrap


def common_items(a: pl.DataFrame, b: pl.DataFrame) -> list[str]:
    """Items every seed of both points scored, sorted."""
    def complete(rows: pl.DataFrame) -> set[str]:
        n = rows["seed"].n_unique()
        counts = rows.group_by("item_id").agg(pl.col("seed").n_unique().alias("k"))
        return set(counts.filter(pl.col("k") == n)["item_id"].to_list())

    return sorted(complete(a) & complete(b))


def matrix(rows: pl.DataFrame, items: list[str], column: str) -> np.ndarray:
    """[n_seeds, n_items] of `column` over `items` (every seed scored every item)."""
    wide = (rows.filter(pl.col("item_id").is_in(items)).pivot(on="item_id", index="seed", values=column)
            .sort("seed").select(items))
    return wide.to_numpy().astype(float)


@dataclass(frozen=True)
class Comparison:
    n_items: int
    summary: pl.DataFrame  # per quantity (accuracy, cost per item): A, B, A - B with its interval, p-value and tie
    disagreements: pl.DataFrame  # items where the mean correct over seeds differs


def compare(a: pl.DataFrame, b: pl.DataFrame, intervals: IntervalParams, ties: TieParams | None = None) -> Comparison | None:
    """A versus B on their common items, paired: one ItemBootstrap, both resampled identically; a
    difference within `ties` (`evaluation.ties`) is a tie."""
    items = common_items(a, b)
    if not items:
        return None
    ties = ties or TieParams()
    boot = ItemBootstrap(len(items), intervals.resamples, intervals.confidence, intervals.seed)
    rows = []
    for quantity, column, tolerance in (("accuracy", "correct", ties.accuracy(len(items))),
                                        ("cost per item (USD)", "cost_usd", ties.cost_usd)):
        va, vb = matrix(a, items, column), matrix(b, items, column)
        test = paired_bootstrap(boot, va, vb, tolerance)
        (a_lo, a_hi), (b_lo, b_hi) = boot.interval(va), boot.interval(vb)
        rows.append({"quantity": quantity, "A": float(va.mean()), "A low": a_lo, "A high": a_hi,
                     "B": float(vb.mean()), "B low": b_lo, "B high": b_hi,
                     "A − B": test["difference"], "low": test["ci_low"], "high": test["ci_high"], "p-value": test["p_value"],
                     "tie": test["tie"]})
    per_item = lambda rows: rows.filter(pl.col("item_id").is_in(items)).group_by("item_id").agg(  # noqa: E731
        pl.col("correct").mean(), pl.col("cost_usd").mean())
    both = per_item(a).join(per_item(b), on="item_id", suffix="_b").rename({"correct": "correct_a", "cost_usd": "cost_a", "cost_usd_b": "cost_b"})
    disagree = both.filter(pl.col("correct_a") != pl.col("correct_b")).with_columns(
        (pl.col("correct_a") - pl.col("correct_b")).alias("A − B correct")).sort(["A − B correct", "item_id"], descending=[True, False])
    return Comparison(len(items), pl.DataFrame(rows), disagree.select("item_id", "correct_a", "correct_b", "A − B correct", "cost_a", "cost_b"))


def disagreeing_seeds(rows: pl.DataFrame, disagreements: pl.DataFrame, side: str) -> list[int | None]:
    """Per disagreement (in its order), the seed of `side`'s `rows` ("A" or "B") that shows its part
    of it: where that side is right more often, its first seed with its best outcome on the item,
    else its first seed with its worst — the run a link to its steps should open."""
    sign = 1 if side == "A" else -1
    better = disagreements.select("item_id", (sign * pl.col("A − B correct") > 0).alias("better"))
    picked = (rows.join(better, on="item_id")
              .with_columns(pl.when(pl.col("better")).then(pl.col("correct").max()).otherwise(pl.col("correct").min())
                            .over("item_id").alias("target"))
              .filter(pl.col("correct") == pl.col("target"))
              .group_by("item_id").agg(pl.col("seed").min()))
    seeds = dict(picked.iter_rows())
    return [None if seeds.get(item) is None else int(seeds[item]) for item in disagreements["item_id"].to_list()]


def p_value_text(p_value: float | None, resamples: int) -> str:
    """A bootstrap p-value as every table and metric of the dashboard shows it: 0 means below the
    test's resolution, `< 1/R` with R resamples (`< 0.001` for 1,000); `—` where there is none."""
    if p_value is None or p_value != p_value:
        return "—"
    return f"< {1 / resamples:.2g}" if p_value == 0 else f"{p_value:.3g}"


def summary_table(summary: pl.DataFrame, resamples: int) -> pl.DataFrame:
    """`Comparison.summary` for display: its p-values as `p_value_text` writes them, so the table and
    the metrics above it read alike."""
    return summary.with_columns(pl.Series("p-value", [p_value_text(v, resamples) for v in summary["p-value"]], dtype=pl.String))


def by_slice(a: pl.DataFrame, b: pl.DataFrame, slices: pl.DataFrame, column: str, intervals: IntervalParams) -> pl.DataFrame:
    """Per value of `column` (an item's `domain` or `difficulty`, from `slices`: item_id, column) over
    the common items: n items, A's and B's accuracy and cost per item, and the paired A − B of each
    with its interval (a bootstrap on that slice's items alone, same settings as the whole)."""
    items = set(common_items(a, b))
    meta = slices.filter(pl.col("item_id").is_in(list(items)) & pl.col(column).is_not_null())
    rows = []
    for (value,), g in sorted(meta.group_by(column), key=lambda kv: kv[0]):
        ids = sorted(g["item_id"].to_list())
        boot = ItemBootstrap(len(ids), intervals.resamples, intervals.confidence, intervals.seed)
        row: dict = {column: str(value), "items": len(ids)}
        for quantity, col in (("accuracy", "correct"), ("cost (USD/item)", "cost_usd")):
            va, vb = matrix(a, ids, col), matrix(b, ids, col)
            test = paired_bootstrap(boot, va, vb)
            row.update({f"A {quantity}": float(va.mean()), f"B {quantity}": float(vb.mean()),
                        f"A − B {quantity}": test["difference"], f"low {quantity}": test["ci_low"], f"high {quantity}": test["ci_high"]})
        rows.append(row)
    return pl.DataFrame(rows)
