"""The frontier's curves: a method's concave hull and the routing papers' numbers read off it
(RouterBench's AIQ, RouteLLM's APGR and CPT). Definitions: `frontier`'s docstring. Each is
O(P log P + grid) for a method of P points."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Upper concave, non-decreasing envelope of (cost, accuracy) points, sorted by cost."""
    pts = sorted(set(points), key=lambda p: (p[0], -p[1]))
    upper: list[tuple[float, float]] = []
    for p in pts:
        if upper and (p[1] <= upper[-1][1] or p[0] == upper[-1][0]):
            continue  # costs as much or more, not better: dominated
        while len(upper) >= 2:
            (x1, y1), (x2, y2) = upper[-2], upper[-1]
            if (y2 - y1) * (p[0] - x1) <= (p[1] - y1) * (x2 - x1):
                upper.pop()  # upper[-1] lies on or below the chord: not on the concave envelope
            else:
                break
        upper.append(p)
    return upper


def hull_value(curve: list[tuple[float, float]], x: np.ndarray) -> np.ndarray:
    """The envelope at costs x: linear between breakpoints, flat after the last, -inf before the first."""
    xs, ys = np.array([p[0] for p in curve]), np.array([p[1] for p in curve])
    out = np.interp(x, xs, ys, right=ys[-1])
    return np.where(x < xs[0], -np.inf, out)


def aiq(points: list[tuple[float, float]], c_lo: float, c_hi: float, grid: int = 2001) -> float:
    if c_hi <= c_lo:
        return float(max(p[1] for p in points))
    curve = hull(points + [(0.0, 0.0)])
    x = np.linspace(c_lo, c_hi, grid)
    return float(np.trapezoid(hull_value(curve, x), x) / (c_hi - c_lo))


@dataclass(frozen=True)
class Anchors:
    weak_cost: float
    weak_acc: float
    strong_cost: float
    strong_acc: float


def pgr_curve(points: list[tuple[float, float]], a: Anchors, grid: int = 2001) -> tuple[np.ndarray, np.ndarray]:
    curve = hull(points + [(a.weak_cost, a.weak_acc), (a.strong_cost, a.strong_acc)])
    c = np.linspace(0.0, 1.0, grid)
    cost = a.weak_cost + c * (a.strong_cost - a.weak_cost)
    acc = np.maximum(hull_value(curve, cost), a.weak_acc)  # all-weak is always available
    gap = a.strong_acc - a.weak_acc
    return c, (acc - a.weak_acc) / gap if gap > 0 else np.zeros_like(c)


def apgr(points: list[tuple[float, float]], a: Anchors) -> float:
    c, pgr = pgr_curve(points, a)
    return float(np.trapezoid(pgr, c))


def cpt(points: list[tuple[float, float]], a: Anchors, level: float) -> float | None:
    c, pgr = pgr_curve(points, a)
    reached = np.nonzero(pgr >= level - 1e-12)[0]
    return float(c[reached[0]]) if len(reached) else None
