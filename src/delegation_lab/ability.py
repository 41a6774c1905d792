"""Ability maps: per solver x difficulty bucket, success rate with a Wilson interval and mean cost,
measured on the ability split only (never on the items a policy trains or is tested on).
"""

from __future__ import annotations


import numpy as np
import polars as pl

from delegation_lab.config import AbilityMapParams
from delegation_lab.evaluation.statistics import wilson_interval
from delegation_lab.tables import ABILITY_MAP_SCHEMA, conform


def bucket_of(difficulty: np.ndarray | list[int], edges: list[int] | None) -> np.ndarray:
    """Lower edge of each difficulty's bucket (difficulties below the first edge join the first)."""
    d = np.asarray(difficulty)
    if edges is None:
        return d
    e = np.asarray(edges)
    return e[np.clip(np.searchsorted(e, d, side="right") - 1, 0, len(e) - 1)]


def bucket_label(lower: int, edges: list[int] | None) -> str:
    if edges is None:
        return str(lower)
    i = edges.index(lower)
    return f"{lower}+" if i == len(edges) - 1 else (f"{lower}" if edges[i + 1] == lower + 1 else f"{lower}-{edges[i + 1] - 1}")


def build_ability_map(labeled: pl.DataFrame, params: AbilityMapParams) -> pl.DataFrame:
    """`labeled`: ability-split rows with solver, difficulty, correct, cost_usd."""
    if labeled.is_empty():
        raise ValueError("the ability split has no labeled answers; check data.ability_size and the label stage")
    df = labeled.with_columns(
        pl.Series("bucket", bucket_of(labeled["difficulty"].to_numpy(), params.bucket_edges), dtype=pl.Int64)
    )
    grouped = (
        df.group_by(["solver", "bucket"])
        .agg(
            pl.len().alias("n"),
            pl.col("correct").sum().cast(pl.Int64).alias("successes"),
            pl.col("cost_usd").mean().alias("mean_cost_usd"),
        )
        .sort(["solver", "bucket"])
    )
    intervals = [wilson_interval(s, n, params.confidence) for s, n in zip(grouped["successes"], grouped["n"], strict=True)]
    out = grouped.with_columns(
        (pl.col("successes") / pl.col("n")).alias("success_rate"),
        pl.Series("ci_low", [lo for lo, _ in intervals]),
        pl.Series("ci_high", [hi for _, hi in intervals]),
        pl.Series("bucket_label", [bucket_label(b, params.bucket_edges) for b in grouped["bucket"]]),
    )
    return conform(out, ABILITY_MAP_SCHEMA, "ability_map").select(list(ABILITY_MAP_SCHEMA))


def lookup(ability_map: pl.DataFrame, solver: str, difficulty: int, edges: list[int] | None) -> dict[str, float]:
    """Success rate and mean cost of `solver` in the bucket of `difficulty` (nearest bucket if unseen)."""
    rows = ability_map.filter(pl.col("solver") == solver)
    if rows.is_empty():
        raise KeyError(f"ability map has no rows for solver {solver!r}")
    bucket = int(bucket_of([difficulty], edges)[0])
    nearest = rows.with_columns((pl.col("bucket") - bucket).abs().alias("_dist")).sort(["_dist", "bucket"]).row(0, named=True)
    return {"success_rate": nearest["success_rate"], "mean_cost_usd": nearest["mean_cost_usd"]}
