"""Portfolio selection: which k of N models, in which arrangement, to deploy (`dlab portfolio`,
stage `portfolio`, metrics/portfolio.json, plots/portfolio/portfolio.png).

For k = 1 .. `portfolio.max_k` the arrangement of k models is a single solver (k = 1), the
cost-ordered cascade of exactly those k models under the shared verifier (`evaluation.verifier`,
evaluated as the frontier does: `frontier_cascades.run_cascade`), or a router over them at one of its
cost weights (`portfolio.router`, `portfolio_routers`). Candidates, on `portfolio.select_split` only:
k = 1 every single; k >= 2 the best `portfolio.beam` (k-1)-model cascades (by Pareto layer of (cost,
accuracy), as the frontier's cascade beam ranks) each extended by every model not in it, and the
router over each k-set so shortlisted at each cost weight. Per k the chosen portfolio is the most
accurate candidate (the cheapest of equals), `by_arrangement` the most accurate of each arrangement,
and `front` lists the candidates not dominated on the selection split; all are then measured on
`frontier.split` with the frontier's item bootstrap (`ItemBootstrap`, `evaluation.intervals`).
Headlines per k: accuracy / oracle accuracy (the cheapest correct of all models per item) and
cost / the k = 1 choice's cost (the best single chosen on the selection split), both on the report split.
Which k to deploy: chosen by cross-validation on the selection split (`portfolio_crossval`: the
selection rerun per fold, the one standard error rule), reported beside the greedy train-optimal k
(the most accurate chosen portfolio across k, the cheapest of equals) with both on the report split
and their paired difference (the `cross_validation` block).

Cost, with N models, n items, S verifier seeds, B = beam, K = max_k: at most B N cascades per k,
each O(k S n): O(K^2 B N S n) in all; never a subset enumeration. Routers add the same k-sets times
their L cost weights, O(K^2 B N L n) after F + 1 router fits (`portfolio_routers`).
Cross-validation with C = cv_folds reruns the selection C times: each cascade is run once on every
item (its per-fold sums kept, `Evaluator`), so the reruns run only the cascades no earlier fold
tried; routers cost C (F + 1) more fits and C times the routing (`portfolio_crossval`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import polars as pl

from delegation_lab.params.root import Params, PortfolioParams
from delegation_lab.embeddings import read_embeddings
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation.statistics import ItemBootstrap, paired_bootstrap
from delegation_lab.evaluation.verifier import Verifier, build_verifier
from delegation_lab.frontier.baselines import SolverMatrix
from delegation_lab.frontier.cascades import (
    CascadeRun,
    best_by_layer,
    pareto_layers,
    run_cascade,
    verdicts,
    verifier_seeds,
)
from delegation_lab.pipeline.layout import Layout
from delegation_lab.portfolio.crossval import CvPoint, assign_folds, curve_json, one_se_choice
from delegation_lab.portfolio.report import arrangement_label, plot_portfolio
from delegation_lab.portfolio.routers import (
    Predictions,
    held_out_predictions,
    kept,
    router_predictions,
    sweep,
)
from delegation_lab.pipeline.tables import read_labeled_answers, write_json_atomic


@dataclass(frozen=True)
class Scored:
    """One portfolio (columns of the solver matrix, cheap first) with its accuracy and cost on a split;
    a router's carries its cost weight `knob`."""

    order: tuple[int, ...]
    accuracy: float
    cost: float
    knob: float | None = None

    @property
    def arrangement(self) -> str:
        return "router" if self.knob is not None else "single" if len(self.order) == 1 else "cascade"


def split_matrix(labeled: pl.DataFrame, split: str, key: str) -> SolverMatrix:
    """The solver matrix of one split; a split without every label is an error naming `key`."""
    part = labeled.filter(pl.col("split") == split)
    if not part.height:
        raise ConfigError("params.yaml", [f"{key}: split {split!r} has no labeled answers; label it or name another split"])
    try:
        return SolverMatrix.from_labeled(part)
    except ValueError as e:
        raise ConfigError("params.yaml", [f"{key}: split {split!r}: {e}"]) from None


class Evaluator:
    """Cascades of one matrix under one verifier's verdict table (drawn once). A cascade's outcome on
    an item depends on that item alone, so each is run once on every item and its sums per fold
    (`folds`, one fold by default) kept: a cross-validation fold's selection reruns no cascade."""

    def __init__(self, m: SolverMatrix, verifier: Verifier, seeds: list[int], folds: np.ndarray | None = None):
        self.m, self.verifier = m, verifier
        self.table = verdicts(m, verifier, seeds)
        self.mean_cost = m.mean_cost()
        self.folds = np.zeros(len(m.item_ids), dtype=np.int64) if folds is None else folds
        self.fold_items = np.bincount(self.folds)
        self._scored: dict[tuple[int, ...], tuple[Scored, np.ndarray, np.ndarray]] = {}

    def in_cost_order(self, members: set[int] | tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(members, key=lambda s: (self.mean_cost[s], s)))

    def run(self, order: tuple[int, ...]) -> CascadeRun:
        return run_cascade(self.m, list(order), self.table, self.verifier)

    def score(self, order: tuple[int, ...], on: np.ndarray | None = None) -> Scored:
        """The cascade's accuracy and cost on every item, or on the folds `on` (bool per fold)."""
        if order not in self._scored:
            r, folds = self.run(order), len(self.fold_items)
            self._scored[order] = (Scored(order, r.accuracy(), r.mean_cost()),
                                   np.bincount(self.folds, r.final.mean(axis=0), folds), np.bincount(self.folds, r.cost.mean(axis=0), folds))
        everywhere, right, cost = self._scored[order]
        if on is None:
            return everywhere
        n = self.fold_items[on].sum()
        return Scored(order, float(right[on].sum() / n), float(cost[on].sum() / n))


def candidates(select: Evaluator, max_k: int, beam: int, on: np.ndarray | None = None) -> dict[int, list[Scored]]:
    """Per k, the candidate portfolios scored on the selection split, or its folds `on` (the greedy beam above)."""
    n = len(select.m.solvers)
    out = {1: [select.score((s,), on) for s in range(n)]}
    for k in range(2, min(max_k, n) + 1):
        prev = out[k - 1]
        keep = best_by_layer(np.array([c.cost for c in prev]), np.array([c.accuracy for c in prev]), beam)
        seen: dict[tuple[int, ...], Scored] = {}
        for i in keep:
            for t in set(range(n)) - set(prev[i].order):
                order = select.in_cost_order({*prev[i].order, t})
                if order not in seen:
                    seen[order] = select.score(order, on)
        out[k] = sorted(seen.values(), key=lambda c: c.order)
    return out


def routed(pred: Predictions, m: SolverMatrix, order: tuple[int, ...], knob: float, rows: np.ndarray | None = None) -> Scored:
    """The router over `order` at cost weight `knob`, scored on the items `rows` (bool; None: every item)."""
    right, cost = kept(m, pred.route(order, knob))
    if rows is not None:
        right, cost = right[:, rows], cost[:, rows]
    return Scored(order, float(right.mean()), float(cost.mean()), knob)


def router_candidates(pred: Predictions, m: SolverMatrix, by_k: dict[int, list[Scored]], knobs: list[float],
                      rows: np.ndarray | None = None) -> dict[int, list[Scored]]:
    """Per k >= 2, the router over each shortlisted k-set at each cost weight, scored on the selection split (its items `rows`)."""
    return {k: [routed(pred, m, c.order, knob, rows) for c in cands for knob in knobs] for k, cands in by_k.items() if k >= 2}


def arrangements(select: Evaluator, pp: PortfolioParams, knobs: list[float], pred: Predictions | None,
                 on: np.ndarray | None = None) -> dict[int, dict[str, list[Scored]]]:
    """Per k, the candidates of each arrangement scored on the selection split (or its folds `on`):
    cascades (singles at k = 1) and, given router predictions, routers."""
    by_k = candidates(select, pp.max_k, pp.beam, on)
    rows = None if on is None else on[select.folds]
    routers = router_candidates(pred, select.m, by_k, knobs, rows) if pred is not None else {}
    return {k: {cascades[0].arrangement: cascades, **({"router": routers[k]} if routers.get(k) else {})}
            for k, cascades in by_k.items()}


def best(cands: list[Scored]) -> Scored:
    return min(cands, key=lambda c: (-c.accuracy, c.cost, c.order, c.knob is not None, c.knob or 0.0))


def front(cands: list[Scored]) -> list[Scored]:
    layer = pareto_layers(np.array([c.cost for c in cands]), np.array([c.accuracy for c in cands]))
    return sorted((c for c, lay in zip(cands, layer, strict=True) if lay == 0), key=lambda c: c.cost)


def _pair(lo_hi: tuple[float, float]) -> list[float]:
    return [float(lo_hi[0]), float(lo_hi[1])]


def build_portfolio(labeled: pl.DataFrame, params: Params, verifier: Verifier, embeddings: pl.DataFrame | None = None) -> dict:
    """The stage's metrics/portfolio.json from every split's labeled answers (`read_labeled_answers`); routers
    too when `portfolio.router` names one and the `embed` stage's table is given."""
    pp, report_split = params.portfolio, params.frontier.split
    if pp.select_split == report_split:
        raise ConfigError("params.yaml", [f"portfolio.select_split: {report_split!r} is frontier.split too; name another split"])
    sel_m = split_matrix(labeled, pp.select_split, "portfolio.select_split")
    rep_m = split_matrix(labeled, report_split, "frontier.split")
    if sel_m.solvers != rep_m.solvers:
        problem = (f"portfolio.select_split: split {pp.select_split!r} has the solvers {', '.join(sel_m.solvers)}, "
                   f"not those of frontier.split {report_split!r}")
        raise ConfigError("params.yaml", [problem])
    if pp.cv_folds > len(sel_m.item_ids):
        problem = (f"portfolio.cv_folds: {pp.cv_folds} folds of split {pp.select_split!r}, which has "
                   f"{len(sel_m.item_ids)} items; use at most that many")
        raise ConfigError("params.yaml", [problem])
    seeds = verifier_seeds(params.frontier.cascade, verifier)
    select = Evaluator(sel_m, verifier, seeds, assign_folds(sel_m.item_ids, pp.cv_folds))
    report = Evaluator(rep_m, verifier, seeds)
    iv = params.evaluation.intervals
    boot = ItemBootstrap(len(rep_m.item_ids), iv.resamples, iv.confidence, iv.seed)
    any_right = rep_m.correct.any(axis=1)
    oracle_acc = float(any_right.mean())
    knobs: list[float] = []
    sel_pred, fold_pred, router = None, None, None
    if pp.router is not None and embeddings is not None:
        sel_x, sel_pred, rep_pred = router_predictions(params, embeddings, sel_m, rep_m, pp.select_split, report_split)
        knobs = sweep(params)
        router = {"name": pp.router, "knobs": knobs, "folds": pp.router_folds}
        fold_pred = partial(held_out_predictions, params, sel_x, sel_m)  # a fold's held-out items -> its predictions

    by_k = arrangements(select, pp, knobs, sel_pred)
    single_cost = report.score(best(by_k[1]["single"]).order).cost

    def outcome(c: Scored) -> tuple[np.ndarray, np.ndarray]:
        """Per (seed, item) of the report split: is the answer kept right, and what was paid."""
        if c.knob is None:
            run = report.run(c.order)
            return run.final, run.cost
        return kept(rep_m, rep_pred.route(c.order, c.knob))

    def measured(c: Scored) -> dict:
        right, paid = outcome(c)
        acc, cost = float(right.mean()), float(paid.mean())
        return {
            "models": [rep_m.solvers[s] for s in c.order], "arrangement": c.arrangement,
            **({"router": pp.router, "knob": c.knob} if c.knob is not None else {}),
            "select_accuracy": c.accuracy, "select_cost_per_item_usd": c.cost,
            "accuracy": acc, "accuracy_ci": _pair(boot.interval(right * 1.0)),
            "cost_per_item_usd": cost, "cost_ci": _pair(boot.interval(paid)),
            "of_oracle_accuracy": acc / oracle_acc if oracle_acc else None,
            "of_best_single_cost": cost / single_cost if single_cost else None,
        }

    portfolios, chosen = {}, {}
    for k, arranged in by_k.items():
        every = [c for cands in arranged.values() for c in cands]
        chosen[k] = best(every)
        portfolios[str(k)] = {**measured(chosen[k]), "candidates": len(every), "front": [measured(f) for f in front(every)],
                              "by_arrangement": {a: {**measured(best(c)), "candidates": len(c)} for a, c in arranged.items()}}
    return {
        "select_split": pp.select_split, "split": report_split, "n_items": len(rep_m.item_ids),
        "n_select_items": len(sel_m.item_ids), "solvers": len(rep_m.solvers), "verifier": verifier.describe(),
        "confidence": iv.confidence, "max_k": pp.max_k, "beam": pp.beam, "router": router,
        "oracle": {"accuracy": oracle_acc, "accuracy_ci": _pair(boot.interval(any_right * 1.0))},
        "best_single": {"model": rep_m.solvers[best(by_k[1]["single"]).order[0]], "cost_per_item_usd": single_cost},
        "portfolios": portfolios,
        "cross_validation": cv_choice(select, pp, knobs, fold_pred, chosen, portfolios, outcome, boot),
    }


def cross_validate(select: Evaluator, pp: PortfolioParams, knobs: list[float],
                   fold_pred: Callable[[np.ndarray], Predictions] | None) -> list[CvPoint]:
    """Per k, on each item of the selection split, the correctness and cost of the portfolio the selection picks on the other folds."""
    n, folds = len(select.m.item_ids), len(select.fold_items)
    right, paid = np.zeros((pp.max_k, n)), np.zeros((pp.max_k, n))
    picks: list[list[str]] = [[] for _ in range(pp.max_k)]
    for f in range(folds):
        held = select.folds == f
        pred = fold_pred(held) if fold_pred is not None else None
        for k, arranged in arrangements(select, pp, knobs, pred, np.arange(folds) != f).items():
            c = best([c for cands in arranged.values() for c in cands])
            if c.knob is None:
                run = select.run(c.order)
                item_right, item_paid = run.final.mean(axis=0), run.cost.mean(axis=0)
            else:
                item_right, item_paid = (v[0] for v in kept(select.m, pred.route(c.order, c.knob)))
            right[k - 1, held], paid[k - 1, held] = item_right[held], item_paid[held]
            picks[k - 1].append(arrangement_label({"arrangement": c.arrangement, "models": [select.m.solvers[s] for s in c.order],
                                                   "router": pp.router, "knob": c.knob}))
    return [CvPoint(k, right[k - 1], paid[k - 1], select.folds, picks[k - 1]) for k in range(1, pp.max_k + 1) if picks[k - 1]]


def cv_choice(select: Evaluator, pp: PortfolioParams, knobs: list[float], fold_pred: Callable[[np.ndarray], Predictions] | None,
              chosen: dict[int, Scored], portfolios: dict[str, dict], outcome: Callable[[Scored], tuple[np.ndarray, np.ndarray]],
              boot: ItemBootstrap) -> dict:
    """The `cross_validation` block: the CV curve, the k it chooses (`crossval.one_se_choice`) and, beside it,
    the greedy train-optimal k (the most accurate chosen portfolio on the whole selection split, the
    cheapest of equals), each with its report-split figures, and their paired difference there."""
    curve = cross_validate(select, pp, knobs, fold_pred)
    cv_k, threshold = one_se_choice(curve, pp.model_penalty)
    greedy_k = len(best(list(chosen.values())).order)
    headline = ("models", "arrangement", "router", "knob", "select_accuracy", "select_cost_per_item_usd",
                "accuracy", "accuracy_ci", "cost_per_item_usd", "cost_ci")

    def figures(k: int) -> dict:
        return {"k": k, **{key: portfolios[str(k)][key] for key in headline if key in portfolios[str(k)]}}

    (cv_right, cv_paid), (gr_right, gr_paid) = outcome(chosen[cv_k]), outcome(chosen[greedy_k])
    same = chosen[cv_k] == chosen[greedy_k]
    accuracy, cost = paired_bootstrap(boot, cv_right * 1.0, gr_right * 1.0), paired_bootstrap(boot, cv_paid, gr_paid)
    return {
        "folds": pp.cv_folds, "rule": "fewest models within one standard error of the best CV score", "model_penalty": pp.model_penalty,
        "threshold": threshold, "curve": curve_json(curve, pp.model_penalty, threshold),
        "cv_choice": figures(cv_k), "greedy_choice": figures(greedy_k),
        "cv_minus_greedy": {"accuracy": accuracy, "cost_per_item_usd": cost},
        "better_on_test": "same portfolio" if same else better_on_test(accuracy, cost),
    }


def better_on_test(accuracy: dict[str, float], cost: dict[str, float]) -> str:
    """Which choice is better on the report split by the selection's objective (accuracy, then cost),
    counting a difference only where its paired interval excludes zero."""
    if accuracy["ci_low"] > 0 or accuracy["ci_high"] < 0:
        return "cv: more accurate" if accuracy["difference"] > 0 else "greedy: more accurate"
    if cost["ci_low"] > 0 or cost["ci_high"] < 0:
        return "cv: as accurate, cheaper" if cost["difference"] < 0 else "greedy: as accurate, cheaper"
    return "neither: no difference in accuracy or cost"


def write_portfolio(layout: Layout, params: Params) -> dict:
    """Compute a project's portfolios from its labeled answers and write the metrics and the plot."""
    verifier = build_verifier(params.evaluation.verifier, layout.root)
    embeddings = read_embeddings(layout.root) if params.portfolio.router is not None else None
    metrics = build_portfolio(read_labeled_answers(layout), params, verifier, embeddings)
    write_json_atomic(metrics, layout.metrics("portfolio"))
    plot_portfolio(metrics, layout.plots("portfolio") / "portfolio.png")
    return metrics
