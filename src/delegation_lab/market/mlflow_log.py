"""The market study's MLflow children: one per chain cell x seed (the density sweep; the spread sweep
and the other belief reading are read from metrics/market.json) and one per answers method x seed
(every operating point's curves and finals in it)."""

from __future__ import annotations

import numpy as np

from delegation_lab.market.study import WorldResult, operating_point
from delegation_lab.pipeline.study import ChildRun

SERIES_POINTS = 50  # learning curves go to MLflow as at most this many bucket means (full curves: plots/market/*_curves)


def downsample(values, points: int = SERIES_POINTS) -> list[float]:
    """Bucket means (NaN-aware) so a curve of any length is at most `points` values."""
    values = np.asarray(values, dtype=float)
    if values.size <= points:
        return values.tolist()
    buckets = np.array_split(values, points)
    return [float(np.nanmean(b)) if np.isfinite(b).any() else float("nan") for b in buckets]


def child_runs(worlds: list[WorldResult]) -> list[ChildRun]:
    """One MLflow child per chain cell x seed and per answers method x seed, keyed (cell, seed)."""
    children: list[ChildRun] = []
    answers: dict[tuple[str, int], list[WorldResult]] = {}
    for w in worlds:
        if w.domain == "chain" and w.group != "main":
            continue  # the spread sweep and the other reading are read from metrics/market.json
        if w.domain == "chain":
            child_params = {"domain": "chain", "protocol": w.protocol, "bidder": w.bidder, "N": w.density, "seed": w.seed}
            children.append(ChildRun(
                w.cell, w.seed, params=child_params, tags={"domain": "chain"},
                series=[{f"train/{k}": downsample(w.curves[k]) for k in ("success", "margin", "subsidy", "alive")}],
                metrics=[{f"final/{k}": v for k, v in w.final.items() if not isinstance(v, dict)}
                         | {"final/bankruptcies": len(w.bankrupt_agents)}
                         | {f"final/price/{k}": v for k, v in w.final["price"].items()}],
                key=(w.cell, w.seed)))
        else:
            answers.setdefault((w.cell, w.seed), []).append(w)
    for (cell, seed), ws in answers.items():
        child_params = {"domain": "answers", "protocol": ws[0].protocol, "bidder": ws[0].bidder, "seed": seed,
                        "reward_multiples": [w.multiple for w in ws], "reward_usd": [w.reward_usd for w in ws]}
        series: dict[str, list[float]] = {}
        finals: dict[str, float] = {}
        for w in ws:  # every operating point's curves and finals in one call each (not two per point)
            op = operating_point(w.multiple)
            series |= {f"{op}/train/{k}": downsample(w.curves[k]) for k in ("success", "cost")}
            f = w.final
            finals |= {
                f"{op}/eval/accuracy": f["accuracy"], f"{op}/cost/per_item_usd": f["cost_per_item"],
                f"{op}/eval/calls_per_item": f["calls_per_item"], f"{op}/market/margin": f["margin"],
                f"{op}/market/subsidy": f["subsidy"], f"{op}/market/clearing_price": f["clearing_price"],
                f"{op}/market/consumer_pays": f["consumer_pays"], f"{op}/market/bankruptcies": len(w.bankrupt_agents),
            }
        children.append(ChildRun(cell, seed, params=child_params, tags={"domain": "answers"}, series=[series],
                                 metrics=[finals], key=(cell, seed)))
    return children
