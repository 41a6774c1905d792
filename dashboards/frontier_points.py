"""Which frontier points the chart draws and where it looks: each method's best point plus the
Pareto set (all operating points on demand), the contested accuracy band to zoom to, the log-dollar
budget stops, the zoom widened to the budget's winner and the methods tied with it, cheapest
first. Streamlit-free, so tests call it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from dashboards.charts import point_label

BEST, ALL_POINTS = "Each method's best point and the Pareto set", "All operating points"
VIEWS = [BEST, ALL_POINTS]


def best_and_pareto(points: pl.DataFrame) -> pl.DataFrame:
    """Rows on the Pareto front (`on_pareto`, computed on every point), each (study, method)'s most
    accurate point (the cheapest of ties), and every oracle: a method with 40 operating points
    shows one point unless more of them are on the front."""
    if points.is_empty():
        return points
    key = ["study", "method", "operating_point"]
    best = (points.sort(["accuracy", "cost_per_item_usd", "operating_point"], descending=[True, False, False])
            .unique(["study", "method"], keep="first").select(key).with_columns(pl.lit(True).alias("_best")))
    marked = points.with_row_index("_row").join(best, on=key, how="left").sort("_row")
    return marked.filter(pl.col("on_pareto") | (pl.col("kind") == "oracle") | pl.col("_best").fill_null(False)).drop("_row", "_best")


def contested_band(points: pl.DataFrame) -> tuple[float, float] | None:
    """(low, high) accuracy of the band where methods compete: from the lower quartile of the
    contenders' accuracies to the best one (or the oracle), padded; None when the points already
    fill the band (nothing to zoom)."""
    acc = points.filter(pl.col("kind") != "oracle")["accuracy"].drop_nulls().to_numpy()
    if acc.size < 4:
        return None
    top = float(points["accuracy"].max())
    low = float(np.quantile(acc, 0.25))
    pad = max(0.1 * (top - low), 0.005)
    band = (max(0.0, low - pad), min(1.0, top + pad))
    full = (float(acc.min()), top)
    return band if (band[1] - band[0]) < 0.8 * (full[1] - full[0]) else None


def cost_range(points: pl.DataFrame, band: tuple[float, float] | None) -> tuple[float, float] | None:
    """(low, high) cost per item of the positive-cost points inside the band (all of them without one)."""
    shown = points.filter(pl.col("cost_per_item_usd") > 0)
    if band is not None:
        shown = shown.filter(pl.col("accuracy").is_between(*band))
    if shown.is_empty():
        return None
    return float(shown["cost_per_item_usd"].min()), float(shown["cost_per_item_usd"].max())


def outside(points: pl.DataFrame, band: tuple[float, float] | None) -> int:
    """How many drawn points the zoom leaves out of view."""
    return 0 if band is None else points.filter(~pl.col("accuracy").is_between(*band)).height


def budget_stops(points: pl.DataFrame, per_decade: int = 12) -> list[float]:
    """The budget slider's stops: evenly spaced in log dollars from the cheapest to the dearest
    contender (per_decade stops a decade), each rounded to 3 significant digits; the last stop
    admits every contender."""
    costs = points.filter((pl.col("kind") != "oracle") & (pl.col("cost_per_item_usd") > 0))["cost_per_item_usd"]
    if costs.is_empty():
        return []
    lo, hi = math.log10(costs.min()), math.log10(costs.max())
    n = max(2, math.ceil((hi - lo) * per_decade) + 1)
    inner = {float(f"{10 ** v:.3g}") for v in np.linspace(lo, hi, n)[1:-1]}
    # the ends are the cheapest and the dearest cost themselves: the first stop admits the cheapest point
    return sorted({float(costs.min()), float(costs.max())} | {v for v in inner if costs.min() < v < costs.max()})


def point_name(row: dict[str, Any]) -> str:
    """A point's full name: its method's label, with its operating point unless that is `default`."""
    op = "" if row["operating_point"] == "default" else f" @ {row['operating_point']}"
    return point_label(row["study"], row["method"]) + op


def zoom_window(points: pl.DataFrame, band: tuple[float, float] | None,
                winner: dict[str, Any] | None) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """(accuracy band, cost range) of the zoom: the band widened to hold the budget's winner (a zoom
    must not hide the answer it is read for) and the cost range of the points inside it widened to
    the winner's cost; (None, None) without a zoom."""
    if band is None:
        return None, None
    if winner is not None:
        acc, pad = winner["accuracy"], 0.1 * (band[1] - band[0])
        band = (max(0.0, acc - pad) if acc < band[0] else band[0], min(1.0, acc + pad) if acc > band[1] else band[1])
    costs = cost_range(points, band)
    cost = winner["cost_per_item_usd"] if winner is not None else None
    if costs is not None and cost is not None and cost > 0:
        costs = (min(costs[0], cost), max(costs[1], cost))
    return band, costs


TIED_COLUMNS = ["study", "method", "operating_point", "accuracy", "cost_per_item_usd", "share_of_winner_cost"]


def tied_with(points: pl.DataFrame, best: dict[str, Any], budget: float) -> pl.DataFrame:
    """The other methods within budget with a point whose accuracy interval overlaps the winner's
    (these items do not tell it apart from the winner), each by its cheapest such point, cheapest
    first: study, method, operating point, accuracy, cost per item and that cost as a share of the
    winner's (null when the winner costs nothing)."""
    lo, cost = best.get("accuracy_ci_low"), best["cost_per_item_usd"]
    share = (pl.col("cost_per_item_usd") / cost) if cost and cost > 0 else pl.lit(None, dtype=pl.Float64)
    fits = points.filter((pl.col("kind") != "oracle") & (pl.col("cost_per_item_usd") <= budget)
                         & ~((pl.col("study") == best["study"]) & (pl.col("method") == best["method"]))
                         & (pl.col("accuracy_ci_high") >= lo)) if lo is not None else points.head(0)
    return (fits.sort(["cost_per_item_usd", "accuracy", "study", "method"], descending=[False, True, False, False])
            .unique(["study", "method"], keep="first", maintain_order=True)
            .with_columns(share.alias("share_of_winner_cost")).select(TIED_COLUMNS))


def cheapest_tie(tied: pl.DataFrame, best: dict[str, Any]) -> str | None:
    """One sentence naming the cheapest option within the winner's interval, with its cost and its
    share of the winner's; None when nothing is tied with the winner."""
    if tied.is_empty():
        return None
    row = tied.row(0, named=True)
    if row["share_of_winner_cost"] is None or row["share_of_winner_cost"] >= 1:
        return (f"The winner is the cheapest option within its interval: the {tied.height} tied with it "
                f"cost at least as much (from ${row['cost_per_item_usd']:.3g} per item).")
    return (f"Cheapest within the winner's interval: {point_name(row)} at ${row['cost_per_item_usd']:.3g} per item, "
            f"{100 * row['share_of_winner_cost']:.3g} % of the winner's cost.")
