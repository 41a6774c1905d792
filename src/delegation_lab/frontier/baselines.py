"""The frontier's solver-only baselines on one split: singles, random mixtures, cost-ordered
cascades (chosen by `frontier_cascades`) and the oracle, each with its item-level values for the
bootstrap. Definitions and cost: `frontier`'s docstring."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from delegation_lab.params.root import FrontierParams
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.frontier.cascades import (
    all_cascades,
    exhaustive,
    run_cascade,
    search_cascades,
    verdicts,
    verifier_seeds,
)
from delegation_lab.frontier.curves import hull

# the verifier of library calls that name none (the rates the label stage measures are the stage's default)
DEFAULT_VERIFIER = Verifier("judge", 0.02, 0.03, source="configured")
BASELINES = "baselines"  # the study name of the frontier's own points (and of their outcomes file)


@dataclass(frozen=True)
class SolverMatrix:
    """Per-item correctness and cost of every solver on one split (items x solvers)."""

    solvers: list[str]
    correct: np.ndarray  # bool [n_items, n_solvers]
    cost: np.ndarray  # float [n_items, n_solvers]
    item_ids: list[str] = field(default_factory=list)  # sorted; the order of every item-level vector

    def __post_init__(self) -> None:
        if not self.item_ids:
            object.__setattr__(self, "item_ids", [f"item{i}" for i in range(self.correct.shape[0])])

    @classmethod
    def from_labeled(cls, labeled: pl.DataFrame) -> SolverMatrix:
        solvers = labeled["solver"].unique().sort().to_list()
        wide_c = labeled.pivot(on="solver", index="item_id", values="correct").sort("item_id")
        wide_k = labeled.pivot(on="solver", index="item_id", values="cost_usd").sort("item_id")
        missing = wide_c.select(pl.exclude("item_id")).null_count().sum_horizontal().item()
        if missing:
            raise ValueError(f"{missing} (item, solver) labels are missing on the frontier split")
        return cls(solvers, wide_c.select(solvers).to_numpy().astype(bool), wide_k.select(solvers).to_numpy().astype(float),
                   wide_c["item_id"].to_list())

    def accuracy(self) -> np.ndarray:
        return self.correct.mean(axis=0)

    def mean_cost(self) -> np.ndarray:
        return self.cost.mean(axis=0)


@dataclass
class Point:
    """One baseline point with its item-level values ([n_seeds, n_items]) for the bootstrap, and where
    its accuracy and dollars went (the outcome contract's optional columns, frontier/gap.py): whether a
    right answer was within its reach, what the answer it gave cost, what its checks paid."""

    row: dict
    correct: np.ndarray
    cost: np.ndarray
    held_right: np.ndarray | None = None
    answer_cost: np.ndarray | None = None
    check_cost: np.ndarray | None = None


def baseline_row(method: str, kind: str, acc: float, cost: float, calls: float, solvers: list[str], verifier: str,
                 op: str = "default", seed: int = 0) -> dict:
    return {
        "study": BASELINES, "method": method, "operating_point": op, "kind": kind, "seed": seed,
        "accuracy": float(acc), "cost_per_item_usd": float(cost), "calls_per_item": float(calls),
        "solver_set": ",".join(solvers), "verifier": verifier,
    }


def cascade_items(m: SolverMatrix, order: list[int], verifier: Verifier, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item: (correct, cost, calls) of one cascade under verifier seed `seed`."""
    run = run_cascade(m, order, verdicts(m, verifier, [seed]), verifier)
    return run.final[0], run.cost[0], run.calls[0]


def cascade_outcome(m: SolverMatrix, order: list[int], verifier: Verifier, seed: int) -> tuple[float, float, float]:
    """(accuracy, cost per item, calls per item) of one cascade under one verifier seed."""
    final, cost, calls = cascade_items(m, order, verifier, seed)
    return float(final.mean()), float(cost.mean()), float(calls.mean())


def mixture_pairs(m: SolverMatrix, every_pair: bool) -> list[tuple[int, int]]:
    """Pairs of solvers (i < j) to mix: every pair, or only consecutive vertices of the singles'
    efficient (upper-left) convex hull, the only segments whose mixtures can reach the frontier."""
    if every_pair:
        return list(itertools.combinations(range(len(m.solvers)), 2))
    points = list(zip(m.mean_cost().tolist(), m.accuracy().tolist(), strict=True))
    first = {}
    for i, p in enumerate(points):
        first.setdefault(p, i)
    vertices = [first[p] for p in hull(points)]
    return sorted(tuple(sorted(pair)) for pair in itertools.pairwise(vertices))


def search_split_error(m: SolverMatrix, params: FrontierParams, problem: str) -> ConfigError:
    return ConfigError("params.yaml", [(
        f"frontier.cascade.search_split: {len(m.solvers)} solvers give more than frontier.exhaustive_limit="
        f"{params.exhaustive_limit} cascades, so they are searched on split {params.cascade.search_split!r}, which "
        f"{problem}; every solver ({', '.join(m.solvers)}) must be labeled on every item of it: label that split, "
        "name another one or raise the limit")])


def search_matrix(labeled: pl.DataFrame | None, m: SolverMatrix, params: FrontierParams) -> SolverMatrix:
    """The matrix of `cascade.search_split` (its labeled answers `labeled`) the cascade search runs on
    above the exhaustive limit; a split that lacks a solver or a label is an error naming the key."""
    if labeled is None or not labeled.height:
        raise search_split_error(m, params, "has no labeled answers")
    solvers = labeled["solver"].unique().sort().to_list()
    if solvers != m.solvers:
        raise search_split_error(m, params, f"has the solvers {', '.join(solvers)}, not those of frontier.split")
    items = labeled["item_id"].n_unique()
    labels = labeled.filter(pl.col("correct").is_not_null()).select("item_id", "solver").unique().height
    if labels < items * len(solvers):
        raise search_split_error(m, params, f"lacks {items * len(solvers) - labels} of its {items} items x {len(solvers)} solvers' labels")
    return SolverMatrix.from_labeled(labeled)


@dataclass
class Baselines:
    """The baseline points (item-level values kept only for these) and how their cascades were chosen."""

    points: list[Point]
    search: dict


def baseline_item_points(m: SolverMatrix, params: FrontierParams, verifier: Verifier, search: SolverMatrix | None = None) -> Baselines:
    """Singles, mixtures, cascades and the oracle on `m`. Above `params.exhaustive_limit` cascades are
    searched on `search` (the `cascade.search_split` matrix) and mixtures built on hull segments only."""
    acc, cost = m.accuracy(), m.mean_cost()
    name = verifier.name
    full = exhaustive(m, params)
    if full:
        choice = all_cascades(m, params)
    else:
        if search is None or search.solvers != m.solvers:
            raise search_split_error(m, params, "has no labeled answers" if search is None else
                                     f"has the solvers {', '.join(search.solvers)}, not those of frontier.split")
        choice = search_cascades(search, params, verifier)
    no_checks = np.zeros((1, len(m.item_ids)))
    pts = []
    for i, s in enumerate(m.solvers):  # one call, no check: its answer is all it holds and all it pays
        right, paid = m.correct[None, :, i] * 1.0, m.cost[None, :, i]
        pts.append(Point(baseline_row(f"always-{s}", "single", acc[i], cost[i], 1.0, [s], name), right, paid, right, paid, no_checks))
    for i, j in mixture_pairs(m, full):
        pair = [m.solvers[i], m.solvers[j]]
        for k in range(1, params.mixture_points + 1):
            p = k / (params.mixture_points + 1)
            right, paid = (p * m.correct[:, i] + (1 - p) * m.correct[:, j])[None], (p * m.cost[:, i] + (1 - p) * m.cost[:, j])[None]
            pts.append(Point(baseline_row(f"mix:{pair[0]}+{pair[1]}", "mixture", p * acc[i] + (1 - p) * acc[j],
                                          p * cost[i] + (1 - p) * cost[j], 1.0, pair, name, op=f"p={p:.2f}"),
                             right, paid, right, paid, no_checks))  # expected values, as `correct`
    seeds = verifier_seeds(params.cascade, verifier)
    table = verdicts(m, verifier, seeds) if choice.orders else None
    for order in choice.orders:
        names = [m.solvers[s] for s in order]
        run = run_cascade(m, list(order), table, verifier)
        # within reach: a member of the chain is right (what it would return under a perfect verifier)
        reach = m.correct[:, list(order)].any(axis=1)[None] * 1.0
        for k, seed in enumerate(seeds):
            c, cst, calls = run.final[k], run.cost[k], run.calls[k]
            pts.append(Point(baseline_row("cascade:" + ">".join(names), "cascade", c.mean(), cst.mean(), calls.mean(), names, name, seed=seed),
                             c[None] * 1.0, cst[None], reach, run.answer_cost[k][None], run.check_cost[k][None]))
    any_right, oracle_cost = oracle_items(m.correct, m.cost)
    pts.append(Point(baseline_row("oracle", "oracle", any_right.mean(), oracle_cost.mean(), 1.0, m.solvers, "oracle"),
                     any_right[None] * 1.0, oracle_cost[None], any_right[None] * 1.0, oracle_cost[None], no_checks))
    return Baselines(pts, choice.report)


def oracle_items(correct: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The oracle per item over (items x solvers) tables: correct when any solver is, at the cheapest
    correct solver's cost (the cheapest cost when none is). The stage and the dashboard's solver
    subsets both call it."""
    any_right = correct.any(axis=1)
    cheapest_right = np.where(correct, cost, np.inf).min(axis=1)
    return any_right, np.where(any_right, cheapest_right, cost.min(axis=1))


def baseline_points(m: SolverMatrix, params: FrontierParams, verifier: Verifier = DEFAULT_VERIFIER,
                    search: SolverMatrix | None = None) -> pl.DataFrame:
    return pl.DataFrame([p.row for p in baseline_item_points(m, params, verifier, search).points])
