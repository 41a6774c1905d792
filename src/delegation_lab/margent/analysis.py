"""The paper's diagnostics on an interventional collection.

- Table 1: measured oracle accuracy by maximum depth, A_k = share of items with a success at
  depth <= k (the root counts at depth 0), and Gain@1 = (A_1 - A_0) / (A_D - A_0).
- Table 2: net marginal value of one forced call, 100 * mean(Delta(root, a)) over every root,
  with Delta = C(delegate(a)) - C(commit) in {-1, 0, +1}.
- Rescue P(right after a | root wrong) and corruption P(wrong after a | root right), with Wilson
  intervals, overall and by difficulty.

Table 1's A_k and Gain@1 and Table 2's net values are item-level: their `*_ci` ([low, high]) are item
bootstrap intervals (`evaluation.statistics.ItemBootstrap`; A_0, A_1, A_D resampled together, so
Gain@1's interval is the ratio's over the same resamples).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.evaluation.statistics import ItemBootstrap, wilson_interval


def _percentiles(draws: np.ndarray, confidence: float) -> list[float] | None:
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return None
    lo, hi = np.percentile(finite, [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2])
    return [float(lo), float(hi)]


def _one_step(collection: pl.DataFrame) -> pl.DataFrame:
    frame = collection.filter(~pl.col("blank"))
    roots = frame.filter(pl.col("depth") == 0).select("item_index", pl.col("correct").alias("root_correct"))
    return frame.filter(pl.col("depth") == 1).join(roots, on="item_index", how="inner")


def table1(collection: pl.DataFrame, depth: int, intervals: IntervalParams | None = None) -> dict:
    iv = intervals or IntervalParams()
    frame = collection.filter(~pl.col("blank"))
    n = frame.filter(pl.col("depth") == 0).height
    first = frame.filter(pl.col("correct")).group_by("item_index").agg(pl.col("depth").min().alias("first"))
    out: dict = {"n": n, "depth": depth}
    for k in range(depth + 1):
        out[f"A{k}"] = 100.0 * first.filter(pl.col("first") <= k).height / n if n else None
    out["AD"] = out[f"A{depth}"]
    a0, a1, ad = out["A0"], out["A1"], out["AD"]
    out["gain_at_1"] = 100.0 * (a1 - a0) / (ad - a0) if n and ad is not None and ad > a0 else None  # type: ignore[operator]
    if n:
        items = frame.filter(pl.col("depth") == 0).select("item_index").join(first, on="item_index", how="left")
        depth_of_first = items["first"].fill_null(depth + 1).to_numpy()
        boot = ItemBootstrap(n, iv.resamples, iv.confidence, iv.seed)
        draws = {k: 100.0 * boot.draws((depth_of_first <= k).astype(float)) for k in range(depth + 1)}
        for k in range(depth + 1):
            out[f"A{k}_ci"] = _percentiles(draws[k], iv.confidence)
        out["AD_ci"] = out[f"A{depth}_ci"]
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = 100.0 * (draws[1] - draws[0]) / (draws[depth] - draws[0]) if depth >= 1 else np.full(iv.resamples, np.nan)
        out["gain_at_1_ci"] = _percentiles(np.where(draws[depth] > draws[0], gain, np.nan), iv.confidence) if depth >= 1 else None
    return out


def marginal_values(collection: pl.DataFrame, pool: tuple[str, ...], confidence: float,
                    intervals: IntervalParams | None = None) -> dict[str, dict]:
    """Per sub-agent: net value (points) with an item bootstrap interval, rescue and corruption
    probabilities with Wilson intervals, errors."""
    iv = intervals or IntervalParams()
    steps = _one_step(collection)
    out = {}
    for agent in pool:
        rows = steps.filter(pl.col("agent") == agent)
        wrong = rows.filter(~pl.col("root_correct"))
        right = rows.filter(pl.col("root_correct"))
        rescued, corrupted = int(wrong["correct"].sum()), int((~right["correct"]).sum())
        r_lo, r_hi = wilson_interval(rescued, wrong.height, confidence)
        c_lo, c_hi = wilson_interval(corrupted, right.height, confidence)
        delta = rows["correct"].cast(pl.Int64) - rows["root_correct"].cast(pl.Int64)
        net_ci = (ItemBootstrap(rows.height, iv.resamples, iv.confidence, iv.seed).interval(100.0 * delta.to_numpy().astype(float))
                  if rows.height else None)
        out[agent] = {
            "net_value": 100.0 * float(delta.mean()) if rows.height else None,
            "net_value_ci": list(net_ci) if net_ci else None,
            "rescue": rescued / wrong.height if wrong.height else None, "rescue_low": r_lo, "rescue_high": r_hi,
            "corruption": corrupted / right.height if right.height else None, "corruption_low": c_lo, "corruption_high": c_hi,
            "n_rescues": rescued, "n_corruptions": corrupted, "n_wrong_roots": wrong.height, "n_right_roots": right.height,
            "errors": int(rows["error"].is_not_null().sum()),
        }
    return out


def by_difficulty(collection: pl.DataFrame, confidence: float) -> pl.DataFrame:
    """Rescue and corruption probability per sub-agent and difficulty (plot data)."""
    steps = _one_step(collection)
    rows = []
    for (agent, d), g in steps.group_by(["agent", "difficulty"]):
        wrong, right = g.filter(~pl.col("root_correct")), g.filter(pl.col("root_correct"))
        for kind, base, hits in (("rescue", wrong, int(wrong["correct"].sum())), ("corruption", right, int((~right["correct"]).sum()))):
            lo, hi = wilson_interval(hits, base.height, confidence)
            rows.append({"series": f"{agent} {kind}", "agent": agent, "difficulty": d, "kind": kind, "n": base.height,
                         "probability": hits / base.height if base.height else None, "ci_low": lo, "ci_high": hi})
    return pl.DataFrame(rows).sort(["agent", "kind", "difficulty"])
