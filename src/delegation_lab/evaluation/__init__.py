"""One evaluation protocol for every method on the frontier.

- `verifier`: the one `Verifier` every method's acceptance decisions (retry, escalate, stop) go
  through, with common random numbers per (solver, item, seed);
- `statistics`: the intervals and tests every study reports (item-level bootstrap, Wilson, paired
  tests, per-seed t intervals, one ddof);
- `outcomes`: the item-level outcome table (one row per method x operating point x seed x item)
  from which the frontier computes paired intervals.
"""

from delegation_lab.evaluation.params import EvaluationParams, IntervalParams, VerifierParams
from delegation_lab.evaluation.statistics import (
    DDOF,
    ItemBootstrap,
    mean_and_std,
    mean_ci,
    median_ci,
    paired_bootstrap,
    ratio_ci,
    seed_interval,
    unit_bootstrap,
    wilson_interval,
)
from delegation_lab.evaluation.verifier import Verifier, build_verifier, uniforms

__all__ = [
    "DDOF", "EvaluationParams", "IntervalParams", "ItemBootstrap", "Verifier", "VerifierParams", "build_verifier",
    "mean_and_std", "mean_ci", "median_ci", "paired_bootstrap", "ratio_ci", "seed_interval", "uniforms", "unit_bootstrap",
    "wilson_interval",
]
