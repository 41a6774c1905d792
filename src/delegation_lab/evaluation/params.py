"""The `evaluation` params section: the shared verifier and the intervals every study reports."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from delegation_lab.layout import Layout
from delegation_lab.params_model import ParamsModel


class VerifierParams(ParamsModel):
    kind: Literal["judge", "gold", "cached"] = "judge"
    """`judge`: a noisy judge with false-positive / false-negative rates (the default: every method's
    retry / escalate / stop decisions see the same noise); `gold`: a perfect verifier, for labelled
    upper-bound runs only (its points form their own frontier set); `cached`: the verdicts a real
    judge gave (`judge_verdict` in data/labels.parquet; every answer a method may accept needs one)."""
    false_positive_rate: float | None = Field(None, ge=0, le=1)
    """Judge kind: probability a wrong answer is accepted; null = the rate the label stage measured
    (`agreement.all.judge_fp_rate` in `rates_from`)."""
    false_negative_rate: float | None = Field(None, ge=0, le=1)
    """Judge kind: probability a right answer is rejected; null = the measured
    `agreement.all.judge_fn_rate` in `rates_from`."""
    rates_from: str = Layout().metrics("labels").as_posix()
    """Label-stage metrics file (relative to the project root) holding the measured judge rates."""
    seed: int = 0
    """Base of the common random numbers: verdict(solver, item, seed) is the same in every method."""

    @model_validator(mode="after")
    def _useful(self) -> VerifierParams:
        fp, fn = self.false_positive_rate, self.false_negative_rate
        if fp is not None and fn is not None and fp + fn >= 1:
            raise ValueError(f"false_positive_rate + false_negative_rate = {fp + fn:.3f} >= 1: such a judge carries no information")
        return self


class IntervalParams(ParamsModel):
    confidence: float = Field(0.95, gt=0, lt=1)
    """Coverage of every reported interval (bootstrap percentile, Wilson, t)."""
    resamples: int = Field(1000, ge=100, le=100_000)
    """Bootstrap resamples (items, and seeds where there are several, resampled together)."""
    seed: int = 0
    """Seed of the bootstrap's resampling stream (the same resamples for every method: paired)."""


class EvaluationParams(ParamsModel):
    verifier: VerifierParams = VerifierParams()
    """The one verifier every method's acceptance decisions go through; accuracy is always against gold."""
    intervals: IntervalParams = IntervalParams()
    """Item-level bootstrap intervals on every frontier point and study headline."""
