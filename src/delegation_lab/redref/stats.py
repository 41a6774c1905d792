"""Bootstrap 95 % intervals over seeds (numpy, percentile method), paired where two methods share seeds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def bootstrap(statistic: Callable[..., np.ndarray], arrays: list[np.ndarray], resamples: int, rng: np.random.Generator,
              level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of statistic(*resampled arrays) with seeds (axis 0) resampled jointly, so
    paired arrays stay paired. `statistic` receives arrays of shape [R, S, ...] and returns [R]."""
    n = arrays[0].shape[0]
    idx = rng.integers(0, n, size=(resamples, n))
    values = statistic(*[a[idx] for a in arrays])
    lo, hi = np.nanpercentile(values, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(lo), float(hi)


def mean_ci(x: np.ndarray, resamples: int, rng: np.random.Generator) -> dict[str, float]:
    """Mean over seeds and its interval."""
    lo, hi = bootstrap(lambda a: np.nanmean(a, axis=1), [np.asarray(x, float)], resamples, rng)
    return {"value": float(np.nanmean(x)), "low": lo, "high": hi}


def ratio_ci(a: np.ndarray, b: np.ndarray, resamples: int, rng: np.random.Generator) -> dict[str, float]:
    """mean(a) / mean(b) over seeds (per-seed means), paired bootstrap."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    lo, hi = bootstrap(lambda x, y: np.nanmean(x, axis=1) / np.nanmean(y, axis=1), [a, b], resamples, rng)
    return {"value": float(np.nanmean(a) / np.nanmean(b)), "low": lo, "high": hi}


def median_ci(x: np.ndarray, resamples: int, rng: np.random.Generator) -> dict[str, float]:
    lo, hi = bootstrap(lambda a: np.nanmedian(a, axis=1), [np.asarray(x, float)], resamples, rng)
    return {"value": float(np.nanmedian(x)), "low": lo, "high": hi}
