"""The content of metrics/routers.json: every router's operating points on test (mean over seeds, item-level
bootstrap intervals paired across routers, seeds resampled too), its dev figures, fit and routing
speed, the single solvers and the oracle, the field's metrics, and the strong-weak gap recovered at
under half the strong solver's cost (RouteLLM's question)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from delegation_lab.evaluation import ItemBootstrap
from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.routers import learned_routers
from delegation_lab.routers.study import StudyRun
from delegation_lab.frontier.metrics import field_metrics


def singles_and_oracle(run: StudyRun) -> tuple[dict[str, tuple[float, float]], tuple[float, float]]:
    rows = run.data.rows("test")
    correct, cost = run.data.correct[rows], run.data.cost[rows]
    singles = {s: (float(cost[:, j].mean()), float(correct[:, j].mean())) for j, s in enumerate(run.data.solvers)}
    any_right = correct.any(axis=1)
    oracle_cost = np.where(any_right, np.where(correct, cost, np.inf).min(axis=1), cost.min(axis=1))
    return singles, (float(oracle_cost.mean()), float(any_right.mean()))


def gap_recovery(points: list[tuple[float, float]], singles: dict[str, tuple[float, float]]) -> dict:
    """The largest share of the (strongest - cheapest) accuracy gap a method recovers at under half
    the strongest solver's cost."""
    strong = max(singles, key=lambda s: (singles[s][1], -singles[s][0]))
    weak = min(singles, key=lambda s: singles[s][0])
    (c_s, a_s), (_, a_w) = singles[strong], singles[weak]
    gap = a_s - a_w
    shares = [(a - a_w) / gap for c, a in points if c < 0.5 * c_s] if gap > 0 else []
    best = max(shares) if shares else None
    return {"strong": strong, "weak": weak, "best_share_under_half_cost": best,
            "recovers_half_gap_under_half_cost": bool(best is not None and best > 0.5)}


def study_metrics(run: StudyRun, intervals: IntervalParams, verifier: dict, embedder: dict) -> dict:
    test = run.data.rows("test")
    boot = ItemBootstrap(len(test), intervals.resamples, intervals.confidence, intervals.seed)
    grouped: dict[tuple[str, str, str], list] = defaultdict(list)
    for p in run.points:
        grouped[(p.router, p.operating_point, p.split)].append(p)
    routers: dict[str, dict] = {}
    curves: dict[str, list[tuple[float, float]]] = {}
    for name in dict.fromkeys(p.router for p in run.points):
        ops = []
        for label in run.fitted[name].knobs:
            tp, dp = grouped[(name, label, "test")], grouped[(name, label, "dev")]
            acc = np.stack([p.outcome.correct.astype(float) for p in tp])
            cost = np.stack([p.outcome.cost for p in tp])
            a_lo, a_hi = boot.interval(acc)
            c_lo, c_hi = boot.interval(cost)
            knob = tp[0].knob
            ops.append({
                "operating_point": label, "knob": float(knob) if np.isfinite(knob) else None,
                "accuracy": float(acc.mean()), "accuracy_ci": [a_lo, a_hi],
                "cost_per_item_usd": float(cost.mean()), "cost_ci": [c_lo, c_hi],
                "calls_per_item": float(np.mean([p.outcome.called.sum(axis=1).mean() for p in tp])),
                "dev_accuracy": float(np.mean([p.outcome.correct.mean() for p in dp])),
                "dev_cost_per_item_usd": float(np.mean([p.outcome.cost.mean() for p in dp])),
                "seeds": len(tp),
            })
        curves[name] = [(o["cost_per_item_usd"], o["accuracy"]) for o in ops]
        best = max(ops, key=lambda o: (o["accuracy"], -o["cost_per_item_usd"]))
        routers[name] = {
            "operating_points": ops, "n_operating_points": len(ops),
            "best_accuracy": best["accuracy"], "best_accuracy_ci": best["accuracy_ci"],
            "best_accuracy_cost_per_item_usd": best["cost_per_item_usd"], "best_operating_point": best["operating_point"],
            "fit_seconds": round(run.fit_seconds[name], 4), "route_items_per_second": round(run.route_items_per_second[name], 1),
        }
    singles, oracle = singles_and_oracle(run)
    field = field_metrics(curves, singles, oracle)
    for name in routers:
        routers[name]["field"] = field[name]
        routers[name]["gap_recovery"] = gap_recovery(curves[name], singles)
    learns = learned_routers()
    learned = {n: routers[n]["gap_recovery"]["best_share_under_half_cost"] for n in routers if n in learns}
    recovered = [n for n in learned if routers[n]["gap_recovery"]["recovers_half_gap_under_half_cost"]]
    return {
        "routers": routers,
        "singles": {s: {"cost_per_item_usd": c, "accuracy": a} for s, (c, a) in singles.items()},
        "oracle": {"cost_per_item_usd": oracle[0], "accuracy": oracle[1]},
        "split_sizes": {s: int((run.data.split == s).sum()) for s in ("train", "dev", "test")},
        "solvers": run.data.solvers, "verifier": verifier, "embedding": embedder,
        "learned_half_gap_under_half_cost": recovered,
        "intervals": {"confidence": intervals.confidence, "resamples": intervals.resamples, "kind": "item bootstrap, seeds resampled"},
    }
