"""The paper's diagnostics on an interventional collection.

- Table 1: measured oracle accuracy by maximum depth, A_k = share of items with a success at
  depth <= k (the root counts at depth 0), and Gain@1 = (A_1 - A_0) / (A_D - A_0).
- Table 2: net marginal value of one forced call, 100 * mean(Delta(root, a)) over every root,
  with Delta = C(delegate(a)) - C(commit) in {-1, 0, +1}.
- Rescue P(right after a | root wrong) and corruption P(wrong after a | root right), with Wilson
  intervals, overall and by difficulty.
"""

from __future__ import annotations

import polars as pl

from delegation_lab.evaluation.statistics import wilson_interval


def _one_step(collection: pl.DataFrame) -> pl.DataFrame:
    frame = collection.filter(~pl.col("blank"))
    roots = frame.filter(pl.col("depth") == 0).select("item_index", pl.col("correct").alias("root_correct"))
    return frame.filter(pl.col("depth") == 1).join(roots, on="item_index", how="inner")


def table1(collection: pl.DataFrame, depth: int) -> dict[str, float | int | None]:
    frame = collection.filter(~pl.col("blank"))
    n = frame.filter(pl.col("depth") == 0).height
    first = frame.filter(pl.col("correct")).group_by("item_index").agg(pl.col("depth").min().alias("first"))
    out: dict[str, float | int | None] = {"n": n, "depth": depth}
    for k in range(depth + 1):
        out[f"A{k}"] = 100.0 * first.filter(pl.col("first") <= k).height / n if n else None
    out["AD"] = out[f"A{depth}"]
    a0, a1, ad = out["A0"], out["A1"], out["AD"]
    out["gain_at_1"] = 100.0 * (a1 - a0) / (ad - a0) if n and ad is not None and ad > a0 else None  # type: ignore[operator]
    return out


def marginal_values(collection: pl.DataFrame, pool: tuple[str, ...], confidence: float) -> dict[str, dict[str, float | int | None]]:
    """Per sub-agent: net value (points), rescue and corruption probabilities with intervals, errors."""
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
        out[agent] = {
            "net_value": 100.0 * float(delta.mean()) if rows.height else None,
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
