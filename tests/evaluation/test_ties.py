"""Tie tolerances (`evaluation.ties`) in the paired test: a difference within them is a tie, not a
finding with p = 0."""

from __future__ import annotations

import numpy as np
import pytest

from delegation_lab.evaluation.params import EvaluationParams, TieParams
from delegation_lab.evaluation.statistics import ItemBootstrap, paired_bootstrap, tied


def test_a_1e_11_dollar_difference_is_a_tie_with_p_one():
    rng = np.random.default_rng(0)
    cost = rng.uniform(0.01, 0.03, 300)  # o1-mini-like per-item costs
    other = cost - 1e-11  # the same calls summed in another order
    boot = ItemBootstrap(300, resamples=400)
    plain = paired_bootstrap(boot, other, cost)
    assert plain["p_value"] == 0.0 and not plain["tie"]  # what the frontier used to report
    test = paired_bootstrap(boot, other, cost, TieParams().cost_usd)
    assert test["tie"] and test["p_value"] == 1.0
    assert test["difference"] == pytest.approx(-1e-11, abs=1e-13)


def test_an_exact_tie_has_p_one_and_a_real_difference_is_no_tie():
    rng = np.random.default_rng(1)
    a = (rng.random(200) < 0.8).astype(float)
    boot = ItemBootstrap(200, resamples=400)
    same = paired_bootstrap(boot, a, a.copy(), TieParams().accuracy(200))
    assert same["tie"] and same["p_value"] == 1.0 and same["difference"] == 0.0
    b = a.copy()
    b[np.flatnonzero(a == 1)[:30]] = 0.0  # 30 items worse: 0.15
    test = paired_bootstrap(boot, a, b, TieParams().accuracy(200))
    assert not test["tie"] and test["p_value"] < 0.01 and test["difference"] == pytest.approx(0.15)


def test_accuracy_ties_are_counted_in_items():
    ties = TieParams()  # half an item
    assert tied(0.5 / 300, ties.accuracy(300)) and not tied(1 / 300, ties.accuracy(300))
    boot = ItemBootstrap(300, resamples=200)
    a = np.zeros((2, 300))
    b = a.copy()
    b[0, 7] = 1.0  # one item in one of two seeds: half an item on average
    assert paired_bootstrap(boot, a, b, ties.accuracy(300))["tie"]
    b[1, 7] = 1.0  # the same item in both seeds: a whole item
    assert not paired_bootstrap(boot, a, b, ties.accuracy(300))["tie"]


def test_the_tolerances_are_params_with_defaults():
    assert EvaluationParams().ties == TieParams(cost_usd=1e-9, accuracy_items=0.5)
    with pytest.raises(ValueError):
        TieParams(cost_usd=-1.0)
