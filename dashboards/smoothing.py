"""TensorBoard's curve smoothing: an exponential moving average, debiased at the start so the first
points are not pulled towards 0 (tensorboard/plugins/scalar: `resetDebias`), applied per method
along the episodes. The smoothed curve is a reading aid: tables and downloads keep the raw values."""

from __future__ import annotations

import numpy as np
import polars as pl


def debiased_ema(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing of one curve: last = w * last + (1 - w) * v, divided by 1 - w^n
    (n = points seen), so a constant curve stays constant and weight 0 returns the values. NaN
    points (a bucket without the metric) are kept as NaN and skipped by the average."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), not {weight}")
    out, last, seen = np.full(values.shape, np.nan), 0.0, 0
    for i, v in enumerate(values):
        if np.isnan(v):
            continue
        last, seen = weight * last + (1.0 - weight) * v, seen + 1
        out[i] = last / (1.0 - weight**seen)
    return out


def smooth_curves(curves: pl.DataFrame, weight: float) -> pl.DataFrame:
    """`curves` (method, episode, <metric>_mean, <metric>_std, ...) with every mean and std column
    smoothed per method in episode order; weight 0 returns `curves` unchanged."""
    if weight == 0.0 or curves.is_empty():
        return curves
    columns = [c for c in curves.columns if c.endswith(("_mean", "_std"))]
    parts = []
    for _, group in curves.sort("method", "episode", maintain_order=True).group_by("method", maintain_order=True):
        smoothed = {c: debiased_ema(group[c].cast(pl.Float64).fill_null(np.nan).to_numpy(), weight) for c in columns}
        parts.append(group.with_columns(pl.Series(c, v).fill_nan(None) for c, v in smoothed.items()))
    return pl.concat(parts)
