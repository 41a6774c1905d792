"""The field's metrics (routing_metrics): each definition on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from delegation_lab.frontier.metrics import (
    arena_score,
    cost_save,
    field_metrics,
    gain_at_best_single,
    gap_at_oracle,
    pareto_dist,
    pareto_front,
)

SINGLES = {"strong": (1.0, 0.80), "weak": (0.1, 0.50)}
ORACLE = (0.2, 0.90)


def test_gain_at_best_single_is_relative_to_the_most_accurate_single():
    assert gain_at_best_single([(0.5, 0.84), (0.2, 0.6)], SINGLES) == pytest.approx(0.05)
    assert gain_at_best_single([(0.5, 0.72)], SINGLES) == pytest.approx(-0.10)


def test_gap_at_oracle_uses_the_best_accuracy_point():
    assert gap_at_oracle([(0.5, 0.81), (0.1, 0.5)], ORACLE) == pytest.approx(0.1)


def test_cost_save_is_the_cheapest_point_at_best_single_accuracy():
    assert cost_save([(0.4, 0.81), (0.7, 0.85), (0.2, 0.7)], SINGLES) == pytest.approx(0.6)
    assert cost_save([(0.2, 0.79)], SINGLES) is None
    assert cost_save([(0.2, 0.79)], SINGLES, tolerance=0.02) == pytest.approx(0.8)


def test_pareto_front_and_distance():
    pts = [(0.1, 0.5), (0.5, 0.7), (0.4, 0.6), (1.0, 0.8), (0.6, 0.65)]
    assert pareto_front(pts).tolist() == [[0.1, 0.5], [0.4, 0.6], [0.5, 0.7], [1.0, 0.8]]
    assert pareto_dist([(0.5, 0.7)], pts) == 0.0
    # (0.6, 0.65): nearest front point (0.5, 0.7) at distance hypot(0.1 / 1.0, 0.05)
    assert pareto_dist([(0.6, 0.65)], pts) == pytest.approx(math.hypot(0.1, 0.05))


def test_arena_score_matches_routerarena_formula_and_its_ends():
    # at c_min the normalised cost is 1: S = 1.1 A / (0.1 A + 1)
    assert arena_score(0.8, 0.0044 / 1000) == pytest.approx(1.1 * 0.8 / (0.08 + 1))
    assert arena_score(0.8, 200 / 1000) == 0.0  # at c_max the cost term is 0
    c = 1.0 / 1000  # $1 per 1000 queries
    norm = (math.log2(200) - 0) / (math.log2(200) - math.log2(0.0044))
    assert arena_score(0.6, c) == pytest.approx(1.1 * 0.6 * norm / (0.06 + norm))
    assert arena_score(0.9, 1e-3) > arena_score(0.8, 1e-3) and arena_score(0.8, 1e-4) > arena_score(0.8, 1e-3)


def test_field_metrics_covers_every_method():
    methods = {"knn": [(0.3, 0.82), (0.15, 0.7)], "always": [(1.0, 0.80)]}
    out = field_metrics(methods, SINGLES, ORACLE)
    assert set(out) == {"knn", "always"}
    assert out["knn"]["cost_save"] == pytest.approx(0.7) and out["always"]["gain_at_best_single"] == 0.0
    assert out["knn"]["pareto_dist"] == 0.0 and out["always"]["pareto_dist"] > 0
    assert out["knn"]["arena_score"] == max(arena_score(0.82, 0.3), arena_score(0.7, 0.15))
