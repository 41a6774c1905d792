"""The portfolio's third arrangement: a router over the k models (`portfolio.router`: the routers
study's kNN router, `routers.knn`, built through `ROUTERS`), at each cost weight λ of its sweep.

A kNN router predicts a model's accuracy (cost) on a question as the mean of that model's labels
(costs) over the question's nearest training questions. The neighbours depend on the embeddings
alone, so the router fitted on a k-set predicts exactly the k columns of the router fitted on all N
models, with λ's unit the k-set's priciest mean cost (tests/test_portfolio_routers.py checks the
choices against a router fitted on the k-set). One fit on all N models thus serves every k-set:

- on `portfolio.select_split` the predictions are out of fold (`portfolio.router_folds` folds by a
  hash of item_id, each routed by the router fitted on the other folds), so a router is chosen on
  the items the cascades are chosen on, never on items it was fitted on;
- on `frontier.split` they come from the router fitted on the whole selection split.
- in a cross-validation fold (`portfolio_crossval`) the same, with the fold's other items as the
  selection split and the fold as the reported one (`held_out_predictions`).

Cost, with F folds, N models, n items, L = len(sweep) and C the k-sets the cascade beam shortlists
(at most beam x N per k): F + 1 kNN fits and predictions over N models, then per k-set and λ one
argmax over its k columns of n items: O((F + 1) fit + C L n k). Only shortlisted k-sets are routed
and no k-set is fitted on its own, so the router search grows with N as the cascade search does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from delegation_lab.params.root import Params
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation.verifier import uniforms
from delegation_lab.frontier.baselines import SolverMatrix
from delegation_lab.routers import build_router
from delegation_lab.routers.base import Inputs, utility_choice
from delegation_lab.pipeline.torch_runtime import torch_threads


@dataclass(frozen=True)
class Predictions:
    """One split's items x all N models: the router's predicted accuracy and cost, and the mean cost
    of each model on the items the router routing that item was fitted on (λ's unit)."""

    accuracy: np.ndarray  # [n, N]
    cost: np.ndarray  # [n, N]
    fit_mean_cost: np.ndarray  # [n, N]

    def route(self, members: tuple[int, ...], lam: float) -> np.ndarray:
        """Per item the model kept (a column of the solver matrix) by the router over `members` at λ:
        argmax of accuracy - λ cost / the members' priciest mean cost, as `Router.evaluate` decides."""
        cols = np.asarray(members)
        ref = self.fit_mean_cost[:, cols].max(axis=1, keepdims=True)
        return cols[utility_choice(self.accuracy[:, cols], self.cost[:, cols], lam, np.where(ref > 0, ref, 1.0))]


def embedding_rows(embeddings: pl.DataFrame, m: SolverMatrix, split: str) -> np.ndarray:
    """The `embed` stage's vectors of `m`'s items in its item order; an item without one is an error."""
    table = pl.DataFrame({"item_id": m.item_ids}).join(embeddings.select("item_id", "vector"), on="item_id", how="left")
    missing = table["vector"].null_count()
    if missing:
        problem = (f"portfolio.router: {missing} item(s) of split {split!r} have no embedding; "
                   "add the split to embed.splits (and rerun `dvc repro embed`) or set portfolio.router: null")
        raise ConfigError("params.yaml", [problem])
    return np.asarray(table["vector"].to_list(), dtype=np.float32)


def fit_predict(params: Params, fit_x: np.ndarray, fit: SolverMatrix, rows: slice | np.ndarray, x: np.ndarray) -> Predictions:
    """The router fitted on the items `rows` of `fit`, predicting the items `x`."""
    no_text = np.zeros((0, 0))  # kNN reads the embedding only (its `features`)
    router = build_router(params.portfolio.router, params.routers, fit.solvers)
    with torch_threads(params.routers.torch_threads):
        router.fit(Inputs(fit_x[rows], no_text), fit.correct[rows], fit.cost[rows], params.routers.seed)
        acc, cost = router.predict(Inputs(x, no_text))
    return Predictions(acc, cost, np.broadcast_to(router.mean_cost, acc.shape))


def out_of_fold(params: Params, x: np.ndarray, m: SolverMatrix) -> Predictions:
    """Predictions on every item of `m`, each from the router fitted on the other folds."""
    folds = params.portfolio.router_folds
    fold = np.floor(uniforms("portfolio-router-folds", np.asarray(m.item_ids, dtype=object), params.routers.seed) * folds)
    n = len(m.item_ids)
    acc, cost, unit = np.zeros((n, len(m.solvers))), np.zeros((n, len(m.solvers))), np.zeros((n, len(m.solvers)))
    for f in range(folds):
        held = fold == f
        if held.any() and (~held).any():
            p = fit_predict(params, x, m, ~held, x[held])
            acc[held], cost[held], unit[held] = p.accuracy, p.cost, p.fit_mean_cost
    return Predictions(acc, cost, unit)


def router_predictions(params: Params, embeddings: pl.DataFrame, select: SolverMatrix, report: SolverMatrix,
                       select_split: str, report_split: str) -> tuple[np.ndarray, Predictions, Predictions]:
    """(the selection split's embeddings, out-of-fold predictions there, predictions on the report split)."""
    sel_x, rep_x = embedding_rows(embeddings, select, select_split), embedding_rows(embeddings, report, report_split)
    return sel_x, out_of_fold(params, sel_x, select), fit_predict(params, sel_x, select, slice(None), rep_x)


def rows_of(m: SolverMatrix, rows: np.ndarray) -> SolverMatrix:
    """The solver matrix of the items `rows` (a bool mask) of `m`."""
    return SolverMatrix(m.solvers, m.correct[rows], m.cost[rows], [i for i, r in zip(m.item_ids, rows, strict=True) if r])


def held_out_predictions(params: Params, x: np.ndarray, m: SolverMatrix, held: np.ndarray) -> Predictions:
    """Predictions on every item of the selection split `m` as a selection that never saw the items `held`
    (one cross-validation fold, `portfolio_crossval`) sees them: on the other items out of fold among
    those items alone (`out_of_fold` on them), on `held` from the router fitted on all the others."""
    train = ~held
    inner = out_of_fold(params, x[train], rows_of(m, train))
    outer = fit_predict(params, x, m, train, x[held])
    shape = (len(m.item_ids), len(m.solvers))
    acc, cost, unit = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for part, p in ((train, inner), (held, outer)):
        acc[part], cost[part], unit[part] = p.accuracy, p.cost, p.fit_mean_cost
    return Predictions(acc, cost, unit)


def sweep(params: Params) -> list[float]:
    """The router's operating points: its cost weights in the routers study (`routers.<router>.sweep`)."""
    return [float(v) for v in getattr(params.routers, params.portfolio.router).sweep]


def kept(m: SolverMatrix, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item (as [1, n], one seed): gold correctness and cost of the model each item was routed to."""
    rows = np.arange(len(chosen))
    return m.correct[rows, chosen][None, :], m.cost[rows, chosen][None, :]
