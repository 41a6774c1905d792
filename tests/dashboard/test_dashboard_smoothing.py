"""The Studies page's curve smoothing is TensorBoard's debiased exponential moving average."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from dashboards.smoothing import debiased_ema, smooth_curves


def test_weight_zero_and_constant_curves_are_unchanged():
    values = np.array([0.2, 0.9, 0.4, 0.7])
    assert np.allclose(debiased_ema(values, 0.0), values)
    assert np.allclose(debiased_ema(np.full(6, 0.8), 0.9), 0.8)  # debiased: no pull towards 0


def test_it_matches_tensorboards_formula_and_skips_missing_points():
    w, values = 0.6, np.array([1.0, np.nan, 0.0, 0.5])
    last, seen, expected = 0.0, 0, []
    for v in values:
        if np.isnan(v):
            expected.append(np.nan)
            continue
        last, seen = w * last + (1 - w) * v, seen + 1
        expected.append(last / (1 - w**seen))
    assert np.allclose(debiased_ema(values, w), expected, equal_nan=True)
    assert debiased_ema(values, w)[2] == pytest.approx((0.4 * 0.6 * 1.0 + 0.4 * 0.0) / (1 - 0.36))


def test_curves_are_smoothed_per_method_in_episode_order():
    curves = pl.DataFrame({"method": ["a", "a", "a", "b", "b"], "episode": [20, 0, 10, 0, 10],
                           "return_mean": [3.0, 1.0, 2.0, 10.0, 10.0], "return_std": [0.0, 0.0, 0.0, 1.0, 1.0],
                           "n_seeds": [2] * 5})
    out = smooth_curves(curves, 0.5)
    a = out.filter(pl.col("method") == "a")
    assert a["episode"].to_list() == [0, 10, 20]
    assert a["return_mean"].to_list() == pytest.approx(list(debiased_ema(np.array([1.0, 2.0, 3.0]), 0.5)))
    assert out.filter(pl.col("method") == "b")["return_mean"].to_list() == pytest.approx([10.0, 10.0])
    assert out["n_seeds"].to_list() == [2] * 5 and smooth_curves(curves, 0.0) is curves


def test_a_weight_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="smoothing weight"):
        debiased_ema(np.array([1.0]), 1.0)
