"""The statistics every study reports: one ddof, one Wilson interval, one bootstrap, one paired test.

- Item-level bootstrap (`ItemBootstrap`): resample the items (and, where a method ran several seeds,
  the seeds too) with replacement; a statistic's percentile interval over the resamples. One
  instance draws its item resamples once, so every method scored on the same items is resampled
  identically: differences between methods are paired.
- Paired test (`paired_bootstrap`): the interval of mean(a) - mean(b) over the same resamples and a
  two-sided bootstrap p-value (twice the smaller tail share at zero). With a `tolerance`
  (`evaluation.ties`, `tied`), an observed difference within it is a tie (`"tie": true`) and the
  p-value tests for a difference beyond it (twice the smaller share of resampled differences on the
  far side of the band [-tolerance, tolerance]): an exact tie has p = 1, and tolerance 0 is the plain test.
- Per-seed summaries (`seed_interval`): with a handful of seeds a bootstrap over seeds is far too
  narrow, so a Student-t interval of the mean over seeds.
- `wilson_interval`: binomial proportions (ability maps, success rates).
- Unit bootstrap (`unit_bootstrap`, `mean_ci`, `ratio_ci`, `median_ci`): a percentile interval with
  the units on axis 0 (seeds of a simulation with many of them, e.g. REDEREF's RQ experiments)
  resampled jointly, so paired arrays stay paired.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

DDOF = 1  # every sample standard deviation in the project


def mean_and_std(x: np.ndarray | list[float]) -> tuple[float, float]:
    """Mean and sample std (ddof 1; 0 for a single value)."""
    a = np.asarray(x, dtype=float)
    return float(a.mean()), float(a.std(ddof=DDOF)) if a.size > 1 else 0.0


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # clamp: at p = 0 or 1 the bound equals p up to rounding, and must never exclude p
    return max(0.0, min(centre - half, p)), min(1.0, max(centre + half, p))


def seed_interval(x: np.ndarray | list[float], confidence: float = 0.95) -> dict[str, float]:
    """Mean over seeds with a Student-t interval (a point interval for one seed)."""
    a = np.asarray(x, dtype=float)
    mean, std = mean_and_std(a)
    if a.size < 2:
        return {"mean": mean, "low": mean, "high": mean, "std": std, "n": int(a.size)}
    half = float(stats.t.ppf(0.5 + confidence / 2, a.size - 1)) * std / math.sqrt(a.size)
    return {"mean": mean, "low": mean - half, "high": mean + half, "std": std, "n": int(a.size)}


@dataclass
class ItemBootstrap:
    """Bootstrap resamples of `n_items` items, drawn once and shared by every method scored on them."""

    n_items: int
    resamples: int = 1000
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_items < 1:
            raise ValueError("ItemBootstrap needs at least one item")
        rng = np.random.default_rng([self.seed, self.n_items])
        idx = rng.integers(0, self.n_items, size=(self.resamples, self.n_items))
        # counts[r, i]: how often item i is in resample r (a [R, n] weight matrix, not R x n gathers)
        self._item_weights = np.zeros((self.resamples, self.n_items))
        np.add.at(self._item_weights, (np.repeat(np.arange(self.resamples), self.n_items), idx.ravel()), 1.0)
        self._item_weights /= self.n_items

    def _seed_weights(self, n_seeds: int) -> np.ndarray:
        if n_seeds == 1:
            return np.ones((self.resamples, 1))
        rng = np.random.default_rng([self.seed, self.n_items, n_seeds])
        idx = rng.integers(0, n_seeds, size=(self.resamples, n_seeds))
        w = np.zeros((self.resamples, n_seeds))
        np.add.at(w, (np.repeat(np.arange(self.resamples), n_seeds), idx.ravel()), 1.0)
        return w / n_seeds

    def draws(self, values: np.ndarray) -> np.ndarray:
        """The mean of `values` ([n_items] or [n_seeds, n_items]) in every resample: shape [R]."""
        v = np.atleast_2d(np.asarray(values, dtype=float))
        if v.shape[1] != self.n_items:
            raise ValueError(f"values cover {v.shape[1]} items, the bootstrap {self.n_items}")
        per_item = self._seed_weights(v.shape[0]) @ v  # [R, n]: seed-resampled mean per item
        return np.einsum("rn,rn->r", per_item, self._item_weights)

    def interval(self, values: np.ndarray) -> tuple[float, float]:
        return self._percentiles(self.draws(values))

    def _percentiles(self, draws: np.ndarray) -> tuple[float, float]:
        lo, hi = np.percentile(draws, [100 * (1 - self.confidence) / 2, 100 * (1 + self.confidence) / 2])
        return float(lo), float(hi)


def tied(difference: float, tolerance: float) -> bool:
    """Is a difference within the tie tolerance (`evaluation.ties`)? Relative slack of 1e-9 so a
    difference of exactly the tolerance, computed in floating point, still ties."""
    return abs(difference) <= tolerance * (1 + 1e-9)


def paired_bootstrap(boot: ItemBootstrap, a: np.ndarray, b: np.ndarray, tolerance: float = 0.0) -> dict[str, float | bool]:
    """mean(a) - mean(b) on the same items (each [n_items] or [n_seeds, n_items]): the difference,
    its interval over the shared resamples, a two-sided bootstrap p-value of a difference beyond
    `tolerance`, and whether the observed difference is a tie (within `tolerance`; module docstring)."""
    da, db = boot.draws(a), boot.draws(b)
    diff = da - db
    lo, hi = boot._percentiles(diff)
    observed = float(np.mean(a) - np.mean(b))
    band = tolerance * (1 + 1e-9)
    tail = min(float(np.mean(diff <= band)), float(np.mean(diff >= -band)))
    return {"difference": observed, "ci_low": lo, "ci_high": hi, "p_value": min(1.0, 2 * tail),
            "tie": tied(observed, tolerance)}


def unit_bootstrap(statistic: Callable[..., np.ndarray], arrays: list[np.ndarray], resamples: int, rng: np.random.Generator,
                   level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of statistic(*resampled arrays) with the units (axis 0) resampled jointly,
    so paired arrays stay paired. `statistic` receives arrays of shape [R, n, ...] and returns [R]."""
    n = arrays[0].shape[0]
    idx = rng.integers(0, n, size=(resamples, n))
    values = statistic(*[a[idx] for a in arrays])
    lo, hi = np.nanpercentile(values, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(lo), float(hi)


def mean_ci(x: np.ndarray, resamples: int, rng: np.random.Generator, level: float = 0.95) -> dict[str, float]:
    """Mean over units and its unit-bootstrap interval."""
    lo, hi = unit_bootstrap(lambda a: np.nanmean(a, axis=1), [np.asarray(x, float)], resamples, rng, level)
    return {"value": float(np.nanmean(x)), "low": lo, "high": hi}


def ratio_ci(a: np.ndarray, b: np.ndarray, resamples: int, rng: np.random.Generator, level: float = 0.95) -> dict[str, float]:
    """mean(a) / mean(b) over units (paired: the same units resampled in both)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    lo, hi = unit_bootstrap(lambda x, y: np.nanmean(x, axis=1) / np.nanmean(y, axis=1), [a, b], resamples, rng, level)
    return {"value": float(np.nanmean(a) / np.nanmean(b)), "low": lo, "high": hi}


def median_ci(x: np.ndarray, resamples: int, rng: np.random.Generator, level: float = 0.95) -> dict[str, float]:
    lo, hi = unit_bootstrap(lambda a: np.nanmedian(a, axis=1), [np.asarray(x, float)], resamples, rng, level)
    return {"value": float(np.nanmedian(x)), "low": lo, "high": hi}
