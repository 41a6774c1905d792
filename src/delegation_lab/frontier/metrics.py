"""The routing field's summary metrics, beside our AIQ / APGR / CPT (`frontier.py`).

Inputs are plain numbers: per method its operating points [(cost per item, accuracy)], the single
solvers {name: (cost, accuracy)} and the oracle (cost, accuracy), all on the same test items.
Accuracy is a fraction in [0, 1]; cost is US dollars per item.

Definitions and sources
- **Gain@BestSingle** (LLMRouterBench, Li et al. 2026, arXiv 2601.07206, repository
  ynulihao/LLMRouterBench; "improvement over the best single model"): the relative accuracy gain of
  the method's best-accuracy point over the most accurate single solver,
  (acc - acc_best_single) / acc_best_single. Negative when the router loses to always calling it.
- **Gap@Oracle** (LLMRouterBench, "gap to Oracle, an instance-level upper bound that always picks the
  best available model for each query"): (acc_oracle - acc) / acc_oracle at the best-accuracy point.
- **CostSave** (LLMRouterBench, "cost reduction achieved while maintaining comparable accuracy to the
  best single model"): 1 - c / c_best_single, with c the cheapest of the method's points whose
  accuracy is >= the best single solver's (minus `tolerance`); None when no point gets there.
- **ParetoDist** (LLMRouterBench, "average distance to the Pareto frontier, lower is better"): the
  mean over the method's points of the Euclidean distance, in (cost / max cost of all points,
  accuracy) coordinates, to the nearest non-dominated point of all points given (every method, the
  single solvers; the oracle excluded); 0 for a method whose every point is on the front.
- **Arena score** (RouterArena, Lu et al. 2025, arXiv 2510.00202, repository RouteWorks/RouterArena):
  a weighted harmonic mean of accuracy A and log-normalised cost C,
  S = (1 + beta) A C / (beta A + C), C = (log2 c_max - log2 c) / (log2 c_max - log2 c_min), with c the
  cost per 1000 queries in dollars clipped to [c_min, c_max]; published constants beta = 0.1,
  c_max = 200, c_min = 0.0044. A method's score is its best point's.

The LLMRouterBench repository we read documents these metrics in prose (README, paper) rather than
as one reference function, so the formulas above are our reading of those definitions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

Point = tuple[float, float]  # (cost per item in dollars, accuracy in [0, 1])

ARENA_BETA, ARENA_C_MAX, ARENA_C_MIN = 0.1, 200.0, 0.0044


def best_point(points: Sequence[Point]) -> Point:
    """The most accurate point, the cheaper one among equals."""
    if not points:
        raise ValueError("a method needs at least one operating point")
    return min(points, key=lambda p: (-p[1], p[0]))


def best_single(singles: Mapping[str, Point]) -> tuple[str, Point]:
    name = min(singles, key=lambda s: (-singles[s][1], singles[s][0]))
    return name, singles[name]


def gain_at_best_single(points: Sequence[Point], singles: Mapping[str, Point]) -> float:
    _, (_, acc_single) = best_single(singles)
    return (best_point(points)[1] - acc_single) / acc_single if acc_single > 0 else math.nan


def gap_at_oracle(points: Sequence[Point], oracle: Point) -> float:
    return (oracle[1] - best_point(points)[1]) / oracle[1] if oracle[1] > 0 else math.nan


def cost_save(points: Sequence[Point], singles: Mapping[str, Point], tolerance: float = 0.0) -> float | None:
    _, (c_single, acc_single) = best_single(singles)
    ok = [c for c, a in points if a >= acc_single - tolerance]
    if not ok or c_single <= 0:
        return None
    return round(1.0 - min(ok) / c_single, 12) + 0.0  # + 0.0: no -0.0 for the best single itself


def pareto_front(points: Sequence[Point]) -> np.ndarray:
    """The non-dominated points [m, 2] (cheaper or more accurate than every other), sorted by cost."""
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    order = np.lexsort((-pts[:, 1], pts[:, 0]))
    front, best = [], -np.inf
    for c, a in pts[order]:
        if a > best:
            front.append((c, a))
            best = a
    return np.asarray(front)


def pareto_dist(points: Sequence[Point], everyone: Sequence[Point]) -> float:
    allp = np.asarray(list(everyone) + list(points), dtype=float).reshape(-1, 2)
    scale = float(allp[:, 0].max()) or 1.0
    front = pareto_front(allp)
    own = np.asarray(points, dtype=float).reshape(-1, 2)
    d = np.hypot((own[:, None, 0] - front[None, :, 0]) / scale, own[:, None, 1] - front[None, :, 1])
    return float(d.min(axis=1).mean())


def arena_score(accuracy: float, cost_per_item: float, beta: float = ARENA_BETA, c_max: float = ARENA_C_MAX,
                c_min: float = ARENA_C_MIN) -> float:
    c = min(max(cost_per_item * 1000.0, c_min), c_max)  # RouterArena's costs are per 1000 queries
    norm = (math.log2(c_max) - math.log2(c)) / (math.log2(c_max) - math.log2(c_min))
    denom = beta * accuracy + norm
    return (1 + beta) * accuracy * norm / denom if denom > 0 else 0.0


def field_metrics(methods: Mapping[str, Sequence[Point]], singles: Mapping[str, Point], oracle: Point) -> dict[str, dict]:
    """Per method: gain_at_best_single, gap_at_oracle, cost_save, pareto_dist, arena_score (see above).
    ParetoDist is measured against the front of every method's points plus the single solvers."""
    everyone = [p for pts in methods.values() for p in pts] + list(singles.values())
    out = {}
    for name, pts in methods.items():
        out[name] = {
            "gain_at_best_single": gain_at_best_single(pts, singles),
            "gap_at_oracle": gap_at_oracle(pts, oracle),
            "cost_save": cost_save(pts, singles),
            "pareto_dist": pareto_dist(pts, everyone),
            "arena_score": max(arena_score(a, c) for c, a in pts),
        }
    return out
