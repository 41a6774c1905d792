"""Accuracy and cost per domain or difficulty of single frontier points, from their item-level
outcomes, with the project's item bootstrap (evaluation.statistics.ItemBootstrap, the settings of
`evaluation.intervals`). The Compare page slices a paired difference (`paired.by_slice`); the
Frontier page slices each chosen point on its own. Streamlit-free, so tests call the same code."""

from __future__ import annotations

import polars as pl

from dashboards.paired import common_items, matrix
from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.evaluation.statistics import ItemBootstrap

COLUMNS = ["point", "items", "accuracy", "accuracy low", "accuracy high", "cost (USD/item)", "cost low", "cost high"]


def point_slices(outcomes: dict[str, pl.DataFrame], slices: pl.DataFrame, column: str, intervals: IntervalParams) -> pl.DataFrame:
    """Per point (name -> its rows: seed, item_id, correct, cost_usd) and value of `column` (from
    `slices`: item_id, domain, difficulty): the items every seed of the point scored in that slice,
    accuracy and cost per item with their bootstrap intervals (items, and seeds where several,
    resampled on that slice alone)."""
    rows = []
    for name, got in outcomes.items():
        scored = set(common_items(got, got))
        meta = slices.filter(pl.col("item_id").is_in(list(scored)) & pl.col(column).is_not_null())
        for (value,), g in sorted(meta.group_by(column), key=lambda kv: kv[0]):
            ids = sorted(g["item_id"].to_list())
            boot = ItemBootstrap(len(ids), intervals.resamples, intervals.confidence, intervals.seed)
            correct, cost = matrix(got, ids, "correct"), matrix(got, ids, "cost_usd")
            (a_lo, a_hi), (c_lo, c_hi) = boot.interval(correct), boot.interval(cost)
            rows.append({"point": name, column: str(value), "items": len(ids),
                         "accuracy": float(correct.mean()), "accuracy low": a_lo, "accuracy high": a_hi,
                         "cost (USD/item)": float(cost.mean()), "cost low": c_lo, "cost high": c_hi})
    if not rows:
        return pl.DataFrame()
    return pl.DataFrame(rows).select(["point", column, *COLUMNS[1:]])
