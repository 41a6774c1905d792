"""How many models to deploy: k chosen by cross-validation on `portfolio.select_split`, not by the
selection split's own figures (the `cross_validation` block of metrics/portfolio.json).

Per k the selection (`portfolio_selection`) keeps the most accurate of thousands of candidates on the
selection split, so its figure there is the best of many draws: a larger k has more candidates and
more members to be lucky with, and the train-optimal k (the "greedy" choice below) adds models whose
gain is that luck (MATH level 5: o1-preview behind o1-mini at k = 2, +0.020 accuracy on train, +0.016
on test with a paired interval spanning zero, at 2.6x the cost per item).

Cross-validation: the selection split's items, ranked by a hash of item_id (`uniforms`, its own salt)
and dealt round robin, make `portfolio.cv_folds` disjoint folds (sizes within one item of each other;
the same items give the same folds in any order). For each fold the whole selection — the cascade
beam, the router over each shortlisted k-set with its own out-of-fold predictions — is rerun on the
other folds, and each k's pick is scored on the fold it never saw. The curve: per k the held-out accuracy
over all items (each held out once), its standard error over the items (their standard deviation /
sqrt(items); over 5 folds it would have 4 degrees of freedom, and the rule's threshold would be as
noisy as what it guards against), and the held-out cost.

The rule (the one standard error rule, Hastie, Tibshirani & Friedman, ESL 2nd ed. sec. 7.10; glmnet's
lambda.1se): k's score is its CV accuracy less `portfolio.model_penalty` per model beyond the first;
the chosen k is the smallest whose score is within one standard error (the best k's) of the best
score. Why the smallest: a CV curve is noisy too, and picking its maximum (or, among its near-equal
points, its cheapest) is again a choice among noisy figures; the fewest models is the choice that
noise cannot inflate, and each k's pick is already the selection's cheapest of equals. What it
gives up: it prefers k models to k + 1 cheaper ones of equal CV accuracy (a dearer single to a
cascade), so the CV curve's cost column is reported beside it. `model_penalty` (accuracy per added
model, default 0) is the explicit price for a deployer who counts each model's upkeep. The chosen
k's arrangement is the selection's on the whole split; the greedy choice beside it is the most
accurate chosen portfolio across k on the whole split (the cheapest of equals), as the selection
alone would deploy. Both are measured on `frontier.split` with the item bootstrap, and their paired
difference (`paired_bootstrap`) says which is better there.

Cost, with F = cv_folds: the selection is rerun F times, on (F-1)/F of the items. A cascade's
outcome on an item depends on that item alone, so each cascade is run once on every item and its
sums per fold are kept (`selection.Evaluator`): the reruns only run cascades no earlier fold tried
(at most F times the selection's O(K^2 B N S n), in practice far fewer); the routers are refitted per
fold (F (router_folds + 1) kNN fits) and their candidates routed again, O(F K^2 B N L n). Measured
with 5 folds (K = 5, B = 16, 7 cost weights): 4.8 CPU s for the whole selection on MATH level 5 (40
models, 250 items; 1.4 without cross-validation), 6.4 on GSM8K (42 models, 400 items; 1.5 without).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from delegation_lab.evaluation.verifier import uniforms


def assign_folds(item_ids: list[str], folds: int) -> np.ndarray:
    """Fold (0 .. folds-1) of each item: ranked by a hash of its item_id, dealt round robin."""
    u = uniforms("portfolio-cv-folds", np.asarray(item_ids, dtype=object), 0)
    rank = np.empty(len(item_ids), dtype=np.int64)
    rank[sorted(range(len(item_ids)), key=lambda i: (u[i], item_ids[i]))] = np.arange(len(item_ids))
    return rank % folds


@dataclass(frozen=True)
class CvPoint:
    """One k on the cross-validation curve: per item of the selection split, the correctness (mean over
    verifier seeds) and cost of the portfolio the selection picked without the item's fold, scored
    there; the items' folds; and each fold's pick (arrangement labels)."""

    k: int
    right: np.ndarray
    paid: np.ndarray
    folds: np.ndarray
    fold_picks: list[str]

    @property
    def accuracy(self) -> float:
        return float(self.right.mean())

    @property
    def se(self) -> float:
        """Standard error of the CV accuracy over the items (not the folds: F - 1 degrees of freedom
        would make the rule's threshold as noisy as what it guards against)."""
        return float(self.right.std(ddof=1) / math.sqrt(len(self.right)))

    @property
    def cost(self) -> float:
        return float(self.paid.mean())

    def by_fold(self, values: np.ndarray) -> list[float]:
        return (np.bincount(self.folds, values) / np.bincount(self.folds)).tolist()

    def score(self, model_penalty: float) -> float:
        return self.accuracy - model_penalty * (self.k - 1)


def one_se_choice(curve: list[CvPoint], model_penalty: float) -> tuple[int, float]:
    """(the chosen k, the score threshold): the smallest k scoring within one standard error of the
    best score (of equal bests the smaller k)."""
    top = max(curve, key=lambda p: (p.score(model_penalty), -p.k))
    threshold = top.score(model_penalty) - top.se
    return min(p.k for p in curve if p.score(model_penalty) >= threshold), threshold


def curve_json(curve: list[CvPoint], model_penalty: float, threshold: float) -> dict[str, dict]:
    """The curve as metrics/portfolio.json writes it, keyed by k like `portfolios`."""
    return {str(p.k): {"accuracy": p.accuracy, "se": p.se, "cost_per_item_usd": p.cost,
                       "score": p.score(model_penalty), "within_one_se": p.score(model_penalty) >= threshold,
                       "fold_accuracy": p.by_fold(p.right), "fold_cost_per_item_usd": p.by_fold(p.paid),
                       "fold_picks": p.fold_picks} for p in curve}
