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

Cost, with N models, n items, S verifier seeds, B = beam, K = max_k: at most B N cascades per k,
each O(k S n): O(K^2 B N S n) in all; never a subset enumeration. Routers add the same k-sets times
their L cost weights, O(K^2 B N L n) after F + 1 router fits (`portfolio_routers`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from delegation_lab.params.root import Params
from delegation_lab.embeddings import read_embeddings
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation.statistics import ItemBootstrap
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
from delegation_lab.portfolio.report import plot_portfolio
from delegation_lab.portfolio.routers import (
    Predictions,
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
    """Cascades of one matrix under one verifier's verdict table (drawn once)."""

    def __init__(self, m: SolverMatrix, verifier: Verifier, seeds: list[int]):
        self.m, self.verifier = m, verifier
        self.table = verdicts(m, verifier, seeds)
        self.mean_cost = m.mean_cost()

    def in_cost_order(self, members: set[int] | tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(members, key=lambda s: (self.mean_cost[s], s)))

    def run(self, order: tuple[int, ...]) -> CascadeRun:
        return run_cascade(self.m, list(order), self.table, self.verifier)

    def score(self, order: tuple[int, ...]) -> Scored:
        r = self.run(order)
        return Scored(order, r.accuracy(), r.mean_cost())


def candidates(select: Evaluator, max_k: int, beam: int) -> dict[int, list[Scored]]:
    """Per k, the candidate portfolios scored on the selection split (the greedy beam above)."""
    n = len(select.m.solvers)
    out = {1: [select.score((s,)) for s in range(n)]}
    for k in range(2, min(max_k, n) + 1):
        prev = out[k - 1]
        keep = best_by_layer(np.array([c.cost for c in prev]), np.array([c.accuracy for c in prev]), beam)
        seen: dict[tuple[int, ...], Scored] = {}
        for i in keep:
            for t in set(range(n)) - set(prev[i].order):
                order = select.in_cost_order({*prev[i].order, t})
                if order not in seen:
                    seen[order] = select.score(order)
        out[k] = sorted(seen.values(), key=lambda c: c.order)
    return out


def router_candidates(pred: Predictions, m: SolverMatrix, by_k: dict[int, list[Scored]], knobs: list[float]) -> dict[int, list[Scored]]:
    """Per k >= 2, the router over each shortlisted k-set at each cost weight, scored on the selection split."""
    out: dict[int, list[Scored]] = {}
    for k, cands in by_k.items():
        if k >= 2:
            out[k] = []
            for c in cands:
                for knob in knobs:
                    right, cost = kept(m, pred.route(c.order, knob))
                    out[k].append(Scored(c.order, float(right.mean()), float(cost.mean()), knob))
    return out


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
    seeds = verifier_seeds(params.frontier.cascade, verifier)
    select, report = Evaluator(sel_m, verifier, seeds), Evaluator(rep_m, verifier, seeds)
    iv = params.evaluation.intervals
    boot = ItemBootstrap(len(rep_m.item_ids), iv.resamples, iv.confidence, iv.seed)
    any_right = rep_m.correct.any(axis=1)
    oracle_acc = float(any_right.mean())
    by_k = candidates(select, pp.max_k, pp.beam)
    single_cost = report.score(best(by_k[1]).order).cost
    routed: dict[int, list[Scored]] = {}
    router = None
    if pp.router is not None and embeddings is not None:
        sel_pred, rep_pred = router_predictions(params, embeddings, sel_m, rep_m, pp.select_split, report_split)
        routed = router_candidates(sel_pred, sel_m, by_k, sweep(params))
        router = {"name": pp.router, "knobs": sweep(params), "folds": pp.router_folds}

    def measured(c: Scored) -> dict:
        if c.knob is None:
            run = report.run(c.order)
            right, paid = run.final, run.cost
        else:
            right, paid = kept(rep_m, rep_pred.route(c.order, c.knob))
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

    portfolios = {}
    for k, cascades in by_k.items():
        arrangements = {cascades[0].arrangement: cascades, **({"router": routed[k]} if routed.get(k) else {})}
        every = [c for cands in arrangements.values() for c in cands]
        portfolios[str(k)] = {**measured(best(every)), "candidates": len(every), "front": [measured(f) for f in front(every)],
                              "by_arrangement": {a: {**measured(best(c)), "candidates": len(c)} for a, c in arrangements.items()}}
    return {
        "select_split": pp.select_split, "split": report_split, "n_items": len(rep_m.item_ids),
        "n_select_items": len(sel_m.item_ids), "solvers": len(rep_m.solvers), "verifier": verifier.describe(),
        "confidence": iv.confidence, "max_k": pp.max_k, "beam": pp.beam, "router": router,
        "oracle": {"accuracy": oracle_acc, "accuracy_ci": _pair(boot.interval(any_right * 1.0))},
        "best_single": {"model": rep_m.solvers[best(by_k[1]).order[0]], "cost_per_item_usd": single_cost},
        "portfolios": portfolios,
    }


def write_portfolio(layout: Layout, params: Params) -> dict:
    """Compute a project's portfolios from its labeled answers and write the metrics and the plot."""
    verifier = build_verifier(params.evaluation.verifier, layout.root)
    embeddings = read_embeddings(layout.root) if params.portfolio.router is not None else None
    metrics = build_portfolio(read_labeled_answers(layout), params, verifier, embeddings)
    write_json_atomic(metrics, layout.metrics("portfolio"))
    plot_portfolio(metrics, layout.plots("portfolio") / "portfolio.png")
    return metrics
