"""One evaluation protocol for every method on the frontier.

- `verifier`: the one `Verifier` every method's acceptance decisions (retry, escalate, stop) go
  through, with common random numbers per (solver, item, seed); `agreement` the kind made of other
  models' cached final answers; `learned` a calibrated scorer of P(answer right) on those answers'
  agreement and features (its `AnswerScorer` also ranks answers in the `frugalgpt` router); `rates` its
  (any verifier's) false-positive / false-negative rates;
- `statistics`: the intervals and tests every study reports (item-level bootstrap, Wilson, paired
  tests, per-seed t intervals, one ddof);
- `outcomes`: the item-level outcome table (one row per method x operating point x seed x item)
  from which the frontier computes paired intervals.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from delegation_lab.evaluation.params import EvaluationParams, IntervalParams, VerifierParams
from delegation_lab.registry import Registry

if TYPE_CHECKING:
    import polars as pl

    from delegation_lab.evaluation.verifier import Verifier

VERIFIERS: Registry[Callable[[VerifierParams, Path, pl.DataFrame | None], Verifier]] = Registry(
    "verifier", "evaluation.verifier.kind")
"""Each verifier kind's builder, `(params, root, labels) -> Verifier` (docs/registries.md: adding one)."""
VERIFIERS.register("judge", "delegation_lab.evaluation.verifier:judge_verifier")
VERIFIERS.register("gold", "delegation_lab.evaluation.verifier:gold_verifier")
VERIFIERS.register("cached", "delegation_lab.evaluation.verifier:cached_verifier")
VERIFIERS.register("agreement", "delegation_lab.evaluation.agreement:agreement_verifier")
VERIFIERS.register("learned", "delegation_lab.evaluation.learned:learned_verifier")

# Lazy re-exports, not a dispatch: the statistics (scipy) and the verifier (polars) load on first use:
# the params, which every stage's config import reaches, must not pay scipy.stats's import (~0.8 s per process).
_LAZY = {
    **dict.fromkeys(("DDOF", "ItemBootstrap", "mean_and_std", "mean_ci", "median_ci", "paired_bootstrap", "ratio_ci",
                     "seed_interval", "unit_bootstrap", "wilson_interval"), "statistics"),
    **dict.fromkeys(("Verifier", "build_verifier", "uniforms"), "verifier"),
    "error_rates": "rates",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


__all__ = [
    "DDOF", "VERIFIERS", "EvaluationParams", "IntervalParams", "ItemBootstrap", "Verifier", "VerifierParams", "build_verifier",
    "error_rates", "mean_and_std", "mean_ci", "median_ci", "paired_bootstrap", "ratio_ci", "seed_interval", "uniforms", "unit_bootstrap",
    "wilson_interval",
]
