"""The `evaluation` params section: the shared verifier and the intervals every study reports."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from delegation_lab.pipeline.layout import Layout
from delegation_lab.params.model import ParamsModel


class VerifierParams(ParamsModel):
    kind: Literal["judge", "gold", "cached", "agreement", "learned"] = "judge"
    """`judge`: a noisy judge with false-positive / false-negative rates (the default: every method's
    retry / escalate / stop decisions see the same noise); `gold`: a perfect verifier, for labelled
    upper-bound runs only (its points form their own frontier set); `cached`: the verdicts a real
    judge gave (`judge_verdict` in data/labels.parquet; every answer a method may accept needs one);
    `agreement`: accept an answer when the cached final answers of `models` agree with it (a real,
    priced check: the frontier's cascades pay those answers and count them as calls; the studies take
    its decisions but do not add its cost yet, docs/evaluation.md); `learned`: accept an answer when a
    logistic scorer of P(right) from the agreement of `models`, the answer's own features and the solver
    (fitted on the train split's answers, Platt-calibrated) gives at least `threshold` (priced as
    agreement; docs/evaluation.md)."""
    models: list[str] = []
    """Agreement and learned kinds: the solvers (names under `solvers`) whose cached final answers check an answer;
    every check asks each of them except the solver being checked (its answer's cost is paid and counted
    as a call, once per item however often it is used). Their answers must have text: a cache without
    replies is refused, naming the missing field."""
    min_agree: int = Field(1, ge=1)
    """Agreement kind: how many of `models` must give the same final answer (compared as the label stage
    compares an answer with gold: `label.matcher`, an item's `answer_format`) for the answer to be
    accepted; capped at the number of models other than the solver being checked."""
    false_positive_rate: float | None = Field(None, ge=0, le=1)
    """Judge kind: probability a wrong answer is accepted; null = the rate the label stage measured
    (`agreement.all.judge_fp_rate` in `rates_from`)."""
    false_negative_rate: float | None = Field(None, ge=0, le=1)
    """Judge kind: probability a right answer is rejected; null = the measured
    `agreement.all.judge_fn_rate` in `rates_from`."""
    threshold: float = Field(0.5, ge=0, le=1)
    """Learned kind: accept an answer when its calibrated probability of being right is >= this."""
    question_embedding: bool = False
    """Learned kind: the scorer also reads the question embedding (data/embeddings, the `embed` stage's
    table), reduced to `embedding_dims` principal components fitted on the train items."""
    embedding_dims: int = Field(8, ge=1)
    """Learned kind with `question_embedding`: principal components of the question embedding it reads."""
    rates_from: str = Layout().metrics("labels").as_posix()
    """Label-stage metrics file (relative to the project root) holding the measured judge rates."""
    seed: int = 0
    """Base of the common random numbers: verdict(solver, item, seed) is the same in every method."""

    @model_validator(mode="after")
    def _useful(self) -> VerifierParams:
        fp, fn = self.false_positive_rate, self.false_negative_rate
        if fp is not None and fn is not None and fp + fn >= 1:
            raise ValueError(f"false_positive_rate + false_negative_rate = {fp + fn:.3f} >= 1: such a judge carries no information")
        if self.kind not in ("agreement", "learned") and self.models:
            raise ValueError(f"models are for kinds agreement and learned (kind is {self.kind})")
        if self.kind != "agreement" and self.min_agree != 1:
            raise ValueError(f"min_agree is for kind agreement (kind is {self.kind})")
        defaults = {"threshold": 0.5, "question_embedding": False, "embedding_dims": 8}
        learned_only = [k for k, default in defaults.items() if getattr(self, k) != default]
        if self.kind != "learned" and learned_only:
            raise ValueError(f"{', '.join(learned_only)}: for kind learned (kind is {self.kind})")
        if self.kind in ("agreement", "learned"):
            if not self.models or len(set(self.models)) != len(self.models):
                raise ValueError(f"kind {self.kind} needs `models`: one or more distinct solver names (got {self.models})")
            if self.min_agree > len(self.models):
                raise ValueError(f"min_agree {self.min_agree} is more than the {len(self.models)} models")
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
