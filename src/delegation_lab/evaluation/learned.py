"""`learned`: accept an answer when a calibrated model of P(answer right) says so.

The answer scorer (`AnswerScorer`) reads what a deployment has of an answer, never gold: for each of
`evaluation.verifier.models` other than the solver, whether its cached final answer agrees (+1),
differs (-1) or could not be compared (0: the model is the solver, or either has no final answer),
compared exactly as the `agreement` verifier compares (`agreement.pairwise_agreement`); the share of
those models agreeing; the answer's own features (has a final answer, log reply length, log output
tokens where the cache has them); the solver (one-hot); optionally the question embedding's first
principal components (fitted on the train items). A logistic regression (scikit-learn, standardised
features, L2) is fitted on the train split's answers only and calibrated by Platt scaling
(`CalibratedClassifierCV(method="sigmoid", ensemble=False)`: a sigmoid fitted on out-of-fold decision
values of 5 folds grouped by item, so an item's answers never score each other; sigmoid rather than
isotonic because a few thousand answers overfit isotonic steps). The verifier accepts where the
calibrated P >= `threshold`.

Its checks are priced as the agreement verifier's (it reads the same answers: `check_costs`), its
verdicts are a pure function of the params and the data, and `describe()` reports FP / FN on the
train and the test split (test is the honest figure: the scorer never saw those answers), Brier score
and expected calibration error on test. The same scorer ranks answers in the `frugalgpt` router.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation.agreement import (
    AgreementVerifier,
    check_models,
    labelled_answers,
    matcher_of,
    pairwise_agreement,
    reference_answer,
)
from delegation_lab.evaluation.params import VerifierParams
from delegation_lab.evaluation.rates import error_rates
from delegation_lab.labeling import AUTO
from delegation_lab.labeling.matchers import MatchSettings
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.tables import read_table

OWN_FEATURES = ("has_final_answer", "log_reply_chars", "log_output_tokens", "output_tokens_known")
CALIBRATION = "Platt (CalibratedClassifierCV sigmoid, 5 item-grouped folds, ensemble=False)"
FOLDS = 5
ECE_BINS = 10


@dataclass(frozen=True)
class AnswerFeatures:
    """What a deployment knows of each (item, solver) answer without gold, on an items x solvers grid."""

    solvers: tuple[str, ...]
    models: tuple[str, ...]  # the reference models whose final answers are compared
    own: np.ndarray  # float [n, S, len(OWN_FEATURES)]
    agree: np.ndarray  # int8 [n, S, M]: +1 same final answer as model m, -1 different, 0 not compared

    def take(self, rows: np.ndarray) -> AnswerFeatures:
        return replace(self, own=self.own[rows], agree=self.agree[rows])

    @classmethod
    def absent(cls, n: int, solvers: list[str]) -> AnswerFeatures:
        """No answer read (a router given questions only): every answer feature is zero."""
        return cls(tuple(solvers), (), np.zeros((n, len(solvers), len(OWN_FEATURES))), np.zeros((n, len(solvers), 0), np.int8))


def answer_features(answers: pl.DataFrame, item_ids: list[str], solvers: list[str], models: tuple[str, ...],
                    matcher: str = AUTO, settings: MatchSettings | None = None) -> AnswerFeatures:
    """The grid over `item_ids` x `solvers` from a labelled answers table (`agreement.labelled_answers`'
    columns); an (item, solver) without an answer row keeps zeros."""
    row_of = {item: i for i, item in enumerate(item_ids)}
    col_of = {s: j for j, s in enumerate(solvers)}
    answers = answers.filter(pl.col("solver").is_in(solvers) & pl.col("item_id").is_in(item_ids))
    if "tokens_out" not in answers.columns:
        answers = answers.with_columns(pl.lit(None, dtype=pl.Int64).alias("tokens_out"))
    own = np.zeros((len(item_ids), len(solvers), len(OWN_FEATURES)))
    agree = np.zeros((len(item_ids), len(solvers), len(models)), dtype=np.int8)
    same = pairwise_agreement(answers, models, matcher, settings or MatchSettings()) if models else {}
    for row in answers.iter_rows(named=True):
        i, j = row_of[row["item_id"]], col_of[row["solver"]]
        final = row["error"] is None and reference_answer(row, matcher_of(row, matcher)) is not None
        tokens = row["tokens_out"]
        own[i, j] = (float(final), math.log1p(len(row["answer_text"] or "")), math.log1p(tokens or 0), float(tokens is not None))
        found = same.get((row["solver"], row["item_id"]), {})
        for k, m in enumerate(models):
            if m in found:
                agree[i, j, k] = 1 if found[m] else -1
            elif m != row["solver"] and not final:
                agree[i, j, k] = -1  # an answer without a final answer agrees with nothing (as in agreement)
    return AnswerFeatures(tuple(solvers), tuple(models), own, agree)


def project_answer_features(root: Path, item_ids: list[str], solvers: list[str], models: tuple[str, ...]) -> AnswerFeatures:
    """`answer_features` of the project under `root`: its labelled answers, compared as its `label`
    section says; `models` must be solvers with labelled answers on every item."""
    from delegation_lab.params.root import load_params  # config imports this package's params

    layout = Layout(root)
    label = load_params(layout.params_file).label
    answers = labelled_answers(layout, read_table(layout.labels, "labels"))
    if models:
        check_models(answers.filter(pl.col("item_id").is_in(item_ids)), list(models), "learned")
    return answer_features(answers, item_ids, solvers, models, label.matcher,
                           MatchSettings(label.numeric_tolerance, label.math_timeout_s))


# ---------------------------------------------------------------------------------------------
# the scorer


def feature_names(solvers: tuple[str, ...], models: tuple[str, ...], embedding_dims: int) -> list[str]:
    return ([f"agrees_with:{m}" for m in models] + ["share_agreeing"] + list(OWN_FEATURES)
            + [f"solver:{s}" for s in solvers] + [f"question_pc{k + 1}" for k in range(embedding_dims)])


@dataclass
class AnswerScorer:
    """Calibrated P(answer right) per (item, solver) from `AnswerFeatures` (and question embeddings).
    Its fitted state is plain arrays (`arrays`), so a saved router reloads it without pickle, and
    `predict` computes from them alone: the fitted and the reloaded scorer are one code path."""

    embedding_dims: int = 0
    state: dict[str, np.ndarray] = field(default_factory=dict)

    def design(self, answers: AnswerFeatures, embedding: np.ndarray | None) -> np.ndarray:
        """Features [n, S, F]: agreement per model, share agreeing, own features, solver one-hot, question PCs."""
        n, s, m = answers.agree.shape
        others = np.ones((s, m)) - (np.array(answers.solvers)[:, None] == np.array(answers.models)[None, :])
        share = (answers.agree == 1).sum(axis=2) / np.maximum(others.sum(axis=1), 1)[None, :]
        parts = [answers.agree.astype(float), share[..., None], answers.own, np.broadcast_to(np.eye(s), (n, s, s))]
        if self.embedding_dims:
            if embedding is None:
                raise ValueError("the scorer was fitted with question embeddings; none given")
            pcs = (np.asarray(embedding, dtype=float) - self.state["pca_mean"]) @ self.state["pca_components"].T
            parts.append(np.broadcast_to(pcs[:, None, :], (n, s, pcs.shape[1])))
        return np.concatenate(parts, axis=2)

    def fit(self, answers: AnswerFeatures, embedding: np.ndarray | None, correct: np.ndarray, present: np.ndarray) -> AnswerScorer:
        """Fit on the (item, solver) answers where `present` [n, S] holds, labelled `correct` [n, S]."""
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.decomposition import PCA
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import GroupKFold
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        from threadpoolctl import threadpool_limits

        self.state = {}
        if self.embedding_dims:
            used = np.flatnonzero(present.any(axis=1))
            self.embedding_dims = min(self.embedding_dims, used.size, embedding.shape[1])
            pca = PCA(self.embedding_dims, svd_solver="full").fit(np.asarray(embedding, dtype=float)[used])
            self.state.update(pca_mean=pca.mean_, pca_components=pca.components_)
        x = self.design(answers, embedding)[present]
        y = np.asarray(correct, dtype=bool)[present]
        groups = np.broadcast_to(np.arange(present.shape[0])[:, None], present.shape)[present]
        if y.all() or not y.any():
            raise InputError(f"learned answer scorer: all {y.size} training answers are {'right' if y.any() else 'wrong'}: nothing to learn")
        folds = list(GroupKFold(min(FOLDS, np.unique(groups).size)).split(x, y, groups))
        # one BLAS thread: these are small problems, and threads fighting for a shared machine's cores
        # made each fit several times slower
        with threadpool_limits(1):
            model = CalibratedClassifierCV(make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
                                           method="sigmoid", cv=folds, ensemble=False).fit(x, y)
        fitted = model.calibrated_classifiers_[0]
        scaler, logistic = fitted.estimator.named_steps["standardscaler"], fitted.estimator.named_steps["logisticregression"]
        platt = fitted.calibrators[0]
        self.state.update(scale_mean=scaler.mean_, scale_std=scaler.scale_, coef=logistic.coef_[0],
                          intercept=logistic.intercept_, platt=np.array([platt.a_, platt.b_]))
        return self

    def predict(self, answers: AnswerFeatures, embedding: np.ndarray | None) -> np.ndarray:
        """Calibrated P(right) [n, S]: sklearn's sigmoid calibration of the logistic decision value."""
        from threadpoolctl import threadpool_limits

        x = (self.design(answers, embedding) - self.state["scale_mean"]) / self.state["scale_std"]
        with threadpool_limits(1):  # one summation order: verdicts repeat bit for bit
            decision = x @ self.state["coef"] + self.state["intercept"][0]
        a, b = self.state["platt"]
        return 1.0 / (1.0 + np.exp(a * decision + b))

    def arrays(self, prefix: str = "scorer.") -> dict[str, np.ndarray]:
        return {prefix + k: v for k, v in self.state.items()}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str = "scorer.") -> AnswerScorer:
        state = {k[len(prefix):]: np.asarray(v) for k, v in arrays.items() if k.startswith(prefix)}
        return cls(state["pca_components"].shape[0] if "pca_components" in state else 0, state)


def calibration_figures(p: np.ndarray, y: np.ndarray, bins: int = ECE_BINS) -> dict[str, float | None]:
    """Brier score and expected calibration error (equal-width bins of P, weighted by their answers)."""
    if p.size == 0:
        return {"brier": None, "ece": None, "answers": 0}
    y = y.astype(float)
    which = np.minimum((p * bins).astype(int), bins - 1)
    ece = sum(abs(p[which == b].mean() - y[which == b].mean()) * (which == b).mean() for b in range(bins) if (which == b).any())
    return {"brier": float(np.mean((p - y) ** 2)), "ece": float(ece), "answers": int(p.size)}


# ---------------------------------------------------------------------------------------------
# the verifier


@dataclass(frozen=True)
class LearnedVerifier(AgreementVerifier):
    """Verdicts precomputed per (solver, item): calibrated P(right) >= threshold; checks priced as agreement's."""

    threshold: float = 0.5
    features: tuple[str, ...] = ()
    calibration: dict[str, Any] = field(default_factory=dict, repr=False)  # Brier / ECE on test

    @property
    def name(self) -> str:
        return f"learned({','.join(self.models)};p>={self.threshold:g})"

    @property
    def deployable(self) -> bool:
        return True  # it reads cached answers of real models, never gold

    def describe(self) -> dict:
        test = self.measured.get("test", {}).get("all", {})
        described = {k: v for k, v in super().describe().items() if k != "min_agree"}  # agreement's vote count: not ours
        return {**described, "false_positive_rate": test.get("false_positive_rate"),
                "false_negative_rate": test.get("false_negative_rate"), "rates_split": "test",
                "threshold": self.threshold, "features": list(self.features), "calibration_method": CALIBRATION,
                "calibration": self.calibration}

    def _no_verdict(self, solver: str, item: str) -> str:
        return (f"evaluation.verifier.kind=learned: solver {solver!r} has no labelled answer on item {item!r} "
                "(the verifier was built from data/labels.parquet; rerun the label stage)")


def learned_verifier(params: VerifierParams, root: Path, labels: pl.DataFrame | None) -> LearnedVerifier:
    """`learned`: the labelled answers under `root`, compared as its `label` section says, fitted on its
    train split (question embeddings from data/embeddings when `question_embedding`)."""
    from delegation_lab.params.root import load_params  # config imports this package's params

    layout = Layout(root)
    label = load_params(layout.params_file).label
    answers = labelled_answers(layout, labels if labels is not None else read_table(layout.labels, "labels"))
    embeddings = question_embeddings(root) if params.question_embedding else None
    return from_answers(params, answers, label.matcher, MatchSettings(label.numeric_tolerance, label.math_timeout_s), embeddings)


def question_embeddings(root: Path) -> pl.DataFrame:
    from delegation_lab.embeddings import read_embeddings

    try:
        return read_embeddings(root)
    except InputError as e:
        raise ConfigError("params.yaml", [f"evaluation.verifier.question_embedding: {e} (the embed stage writes it)"]) from None


def from_answers(params: VerifierParams, answers: pl.DataFrame, matcher: str = AUTO, settings: MatchSettings | None = None,
                 embeddings: pl.DataFrame | None = None) -> LearnedVerifier:
    """The verifier over `answers` (`agreement.from_answers`' columns; `tokens_out` optional), its scorer
    fitted on the rows of split `train`; `embeddings` (item_id, vector) when `params.question_embedding`."""
    check_models(answers, params.models, "learned")
    models = tuple(params.models)
    items = answers["item_id"].unique().sort().to_list()
    solvers = answers["solver"].unique().sort().to_list()
    features = answer_features(answers, items, solvers, models, matcher, settings)
    grid = _grid(answers, items, solvers)
    vectors = _vectors(embeddings, items, grid) if params.question_embedding else None
    scorer = AnswerScorer(params.embedding_dims if params.question_embedding else 0)
    scorer.fit(features, vectors, grid["correct"], grid["present"] & grid["train"])
    p = scorer.predict(features, vectors)
    accept = p >= params.threshold
    rows = np.argwhere(grid["present"])
    verdicts = {(solvers[j], items[i]): bool(accept[i, j]) for i, j in rows}
    costs = {m: dict(answers.filter(pl.col("solver") == m).select("item_id", "cost_usd").iter_rows()) for m in models}
    test = grid["present"] & grid["test"]
    verifier = LearnedVerifier(
        "learned", seed=params.seed, verdicts=verdicts, models=models, answer_costs=costs, threshold=params.threshold,
        features=tuple(feature_names(tuple(solvers), models, scorer.embedding_dims)),
        calibration={"test": calibration_figures(p[test], grid["correct"][test])},
        source=f"logistic scorer on the final answers of {', '.join(models)} (data/answers), fitted on train, measured against gold")
    measured = {"all": error_rates(verifier, answers)}
    for (split,), part in answers.group_by(["split"], maintain_order=True):
        measured[str(split)] = error_rates(verifier, part)
    return replace(verifier, measured=measured)


def _grid(answers: pl.DataFrame, items: list[str], solvers: list[str]) -> dict[str, np.ndarray]:
    """Items x solvers masks: an answer is there, it is right, its item is in train / test."""
    i = answers["item_id"].replace_strict({v: k for k, v in enumerate(items)}, return_dtype=pl.Int64).to_numpy()
    j = answers["solver"].replace_strict({v: k for k, v in enumerate(solvers)}, return_dtype=pl.Int64).to_numpy()
    out = {k: np.zeros((len(items), len(solvers)), dtype=bool) for k in ("present", "correct", "train", "test")}
    out["present"][i, j] = True
    out["correct"][i, j] = answers["correct"].cast(pl.Boolean).fill_null(False).to_numpy()
    for split in ("train", "test"):
        out[split][i, j] = (answers["split"] == split).to_numpy()
    return out


def _vectors(embeddings: pl.DataFrame, items: list[str], grid: dict[str, np.ndarray]) -> np.ndarray:
    """Each item's question embedding. The embed stage embeds the train and test questions only: an
    item of another split (the ability bank) gets the train items' mean, whose components are 0."""
    table = pl.DataFrame({"item_id": items}).join(embeddings.select("item_id", "vector"), on="item_id", how="left")
    missing = table["vector"].is_null().to_numpy()
    scored = grid["train"].any(axis=1) | grid["test"].any(axis=1)
    if (missing & scored).any():
        first = items[int(np.flatnonzero(missing & scored)[0])]
        raise ConfigError("params.yaml", [f"evaluation.verifier.question_embedding: {int((missing & scored).sum())} train / test "
                                          f"items have no embedding in data/embeddings (e.g. {first!r}): rerun the embed stage"])
    present = np.asarray(table["vector"].drop_nulls().to_list(), dtype=float)
    vectors = np.zeros((len(items), present.shape[1]))
    vectors[~missing] = present
    vectors[missing] = vectors[grid["train"].any(axis=1) & ~missing].mean(axis=0)
    return vectors
