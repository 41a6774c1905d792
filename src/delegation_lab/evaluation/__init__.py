"""One evaluation protocol for every method on the frontier.

- `verifier`: the one `Verifier` every method's acceptance decisions (retry, escalate, stop) go
  through, with common random numbers per (solver, item, seed);
- `statistics`: the intervals and tests every study reports (item-level bootstrap, Wilson, paired
  tests, per-seed t intervals, one ddof);
- `outcomes`: the item-level outcome table (one row per method x operating point x seed x item)
  from which the frontier computes paired intervals.
"""

from typing import Any

from delegation_lab.evaluation.params import EvaluationParams, IntervalParams, VerifierParams

# The statistics (scipy) and the verifier (polars) load on first use: the params, which every
# stage's config import reaches, must not pay scipy.stats's import (~0.8 s per process).
_LAZY = {
    **dict.fromkeys(("DDOF", "ItemBootstrap", "mean_and_std", "mean_ci", "median_ci", "paired_bootstrap", "ratio_ci",
                     "seed_interval", "unit_bootstrap", "wilson_interval"), "statistics"),
    **dict.fromkeys(("Verifier", "build_verifier", "uniforms"), "verifier"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = [
    "DDOF", "EvaluationParams", "IntervalParams", "ItemBootstrap", "Verifier", "VerifierParams", "build_verifier",
    "mean_and_std", "mean_ci", "median_ci", "paired_bootstrap", "ratio_ci", "seed_interval", "uniforms", "unit_bootstrap",
    "wilson_interval",
]
