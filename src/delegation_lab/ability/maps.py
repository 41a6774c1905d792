"""Ability maps: per solver x difficulty bucket, success rate with a Wilson interval and mean cost,
measured on the ability split only (never on the items a policy trains or is tested on).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from delegation_lab.params.root import AbilityMapParams
from delegation_lab.evaluation.statistics import wilson_interval
from delegation_lab.pipeline.schemas import ABILITY_MAP_SCHEMA
from delegation_lab.pipeline.tables import conform


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


def domain_codes(domains: list[str]) -> dict[str, int]:
    """Bucket number of each domain: 1, 2, ... by domain name (stable whatever the row order)."""
    return {d: i for i, d in enumerate(sorted(set(domains)), start=1)}


def bucket_keys(frame: pl.DataFrame, params: AbilityMapParams,
                domains: list[str] | None = None) -> tuple[np.ndarray, dict[int, str]]:
    """Bucket of every row (item difficulty or domain, as `params.bucket_by` says) and each bucket's
    label; domain buckets are numbered over `domains` (every item's, so all splits agree), else the rows'."""
    if params.bucket_by == "domain":
        mine = frame["domain"].cast(pl.String).fill_null("").to_list()
        codes = domain_codes([*(domains or []), *mine])
        keys = np.asarray([codes[d] for d in mine], dtype=np.int64)
        return keys, {c: d for d, c in codes.items()}
    keys = bucket_of(frame["difficulty"].to_numpy(), params.bucket_edges)
    return keys, {int(b): bucket_label(int(b), params.bucket_edges) for b in set(keys.tolist())}


def build_ability_map(labeled: pl.DataFrame, params: AbilityMapParams, domains: list[str] | None = None) -> pl.DataFrame:
    """`labeled`: ability-split rows with solver, difficulty, domain, correct, cost_usd; `domains`:
    every item's domain, so domain buckets keep their numbers on every split."""
    if labeled.is_empty():
        raise ValueError("the ability split has no labeled answers; check data.ability_size and the label stage")
    keys, labels = bucket_keys(labeled, params, domains)
    df = labeled.with_columns(pl.Series("bucket", keys, dtype=pl.Int64))
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
        pl.Series("bucket_label", [labels[b] for b in grouped["bucket"]], dtype=pl.String),
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
