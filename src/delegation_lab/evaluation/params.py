"""The `evaluation` params section: the shared verifier, the verifiers the frontier's baselines are
compared under, and the intervals every study reports."""

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


class ComparedVerifierParams(VerifierParams):
    """A verifier the frontier recomputes its baselines under, beside `evaluation.verifier`."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
    """Short name of this verifier (letters, digits, `_.-`, up to 40), unique in the list: what
    `metrics/frontier.json` `verifiers` and `dlab frontier-table` call it (frontier rows carry the
    verifier's full name, e.g. `agreement(a,b,c;min_agree=2)`)."""


class IntervalParams(ParamsModel):
    confidence: float = Field(0.95, gt=0, lt=1)
    """Coverage of every reported interval (bootstrap percentile, Wilson, t)."""
    resamples: int = Field(1000, ge=100, le=100_000)
    """Bootstrap resamples (items, and seeds where there are several, resampled together)."""
    seed: int = 0
    """Seed of the bootstrap's resampling stream (the same resamples for every method: paired)."""


class TieParams(ParamsModel):
    """How far apart two methods may be and still be reported as equal: paired tests (`"tie": true`),
    `dominated_by` / `ties_with` and `vs_best_single` in the frontier (docs/frontier.md)."""

    cost_usd: float = Field(1.0e-9, ge=0)
    """Cost differences of at most this many dollars per item are ties (floating-point sums of the
    same calls in another order differ by ~1e-11)."""
    accuracy_items: float = Field(0.5, ge=0)
    """Accuracy differences of at most this many items (accuracy_items / n_items over the items
    compared) are ties; 0.5: on one seed only an exact tie, averaged over seeds up to half an item."""

    def accuracy(self, n_items: int) -> float:
        """The accuracy tolerance on `n_items` items."""
        return self.accuracy_items / max(int(n_items), 1)


class EvaluationParams(ParamsModel):
    verifier: VerifierParams = VerifierParams()
    """The one verifier every method's acceptance decisions go through; accuracy is always against gold."""
    compare_verifiers: list[ComparedVerifierParams] = []
    """More verifiers the frontier recomputes its baselines under (singles, mixtures, and cascades
    searched under each as under the main one), each with a `name` and the keys of
    `evaluation.verifier`, e.g. a 2-of-3 vote `{name: vote, kind: agreement, models: [a, b, c],
    min_agree: 2}`; each forms its own Pareto set, and `metrics/frontier.json` `verifiers` gives its FP /
    FN against gold on the reported split and on train. The studies stay under `verifier`. Each one
    adds the baselines' cost again (docs/evaluation.md)."""
    intervals: IntervalParams = IntervalParams()
    """Item-level bootstrap intervals on every frontier point and study headline."""
    ties: TieParams = TieParams()
    """Tolerances under which a cost or accuracy difference is a tie (paired tests, dominance, vs_best_single)."""

    @model_validator(mode="after")
    def _distinct(self) -> EvaluationParams:
        names = [v.name for v in self.compare_verifiers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"compare_verifiers: name {twice[0]!r} is used twice; each verifier needs its own name")
        main = self.verifier.model_dump()
        for v in self.compare_verifiers:
            if v.model_dump(exclude={"name"}) == main:
                raise ValueError(f"compare_verifiers: {v.name!r} is evaluation.verifier itself; compare another verifier")
        return self
