"""The shared cost-accuracy frontier: solver-only baselines, the oracle, Pareto marks, and the
summary numbers of routing papers (RouterBench's AIQ, RouteLLM's APGR and CPT).

Definitions (all on one split, default `test`):
- always-<S>: every item to solver S. mix:<S>+<T>@p: a random mixture, S with probability p (its
  expected accuracy and cost are the convex combination). cascade:<S1>><S2>>...: ask solvers from
  cheap to expensive and stop at the first answer a noisy judge (FP / FN rates from params) calls
  correct; cost is the sum of the solvers asked; mean over judge seeds. oracle: the cheapest correct
  solver per item (the cheapest solver when none is correct) — the upper bound.
- Pareto: a point no other point matches-or-beats on both cost and accuracy (oracles excluded: the
  baseline oracle and any study method named `oracle` or `<env>.oracle` are upper bounds).
- Hull: a method's points made non-decreasing and concave (random mixtures of operating points
  realise every segment between them).
- AIQ: the mean of a method's hull, anchored at (0 $, 0 %) (abstaining), over the cost interval from
  the cheapest to the most expensive single solver (RouterBench, Hu et al. 2024).
- APGR: with weak = the cheapest and strong = the most accurate single solver, cost normalised to
  c = (cost - cost_weak) / (cost_strong - cost_weak) and PGR = (acc - acc_weak) / (acc_strong -
  acc_weak), the mean PGR of the hull over c in [0, 1]; as in RouteLLM (Ong et al. 2025) every
  curve may fall back to all-weak or all-strong, so a random router scores 0.5.
- CPT(x): the least normalised cost (in % of the strong solver's, RouteLLM's "calls to the strong
  model") at which the hull reaches PGR x; null when never reached.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import polars as pl

from delegation_lab.config import FrontierParams

POINT_COLUMNS = ["study", "method", "operating_point", "kind", "seed", "accuracy", "cost_per_item_usd", "calls_per_item", "solver_set", "run_id"]


@dataclass(frozen=True)
class SolverMatrix:
    """Per-item correctness and cost of every solver on one split (items x solvers)."""

    solvers: list[str]
    correct: np.ndarray  # bool [n_items, n_solvers]
    cost: np.ndarray  # float [n_items, n_solvers]

    @classmethod
    def from_labeled(cls, labeled: pl.DataFrame) -> SolverMatrix:
        solvers = labeled["solver"].unique().sort().to_list()
        wide_c = labeled.pivot(on="solver", index="item_id", values="correct").sort("item_id")
        wide_k = labeled.pivot(on="solver", index="item_id", values="cost_usd").sort("item_id")
        missing = wide_c.select(pl.exclude("item_id")).null_count().sum_horizontal().item()
        if missing:
            raise ValueError(f"{missing} (item, solver) labels are missing on the frontier split")
        return cls(solvers, wide_c.select(solvers).to_numpy().astype(bool), wide_k.select(solvers).to_numpy().astype(float))

    def accuracy(self) -> np.ndarray:
        return self.correct.mean(axis=0)

    def mean_cost(self) -> np.ndarray:
        return self.cost.mean(axis=0)


def _row(method: str, kind: str, acc: float, cost: float, calls: float, solvers: list[str], op: str = "default", seed: int = 0) -> dict:
    return {
        "study": "baselines", "method": method, "operating_point": op, "kind": kind, "seed": seed,
        "accuracy": float(acc), "cost_per_item_usd": float(cost), "calls_per_item": float(calls),
        "solver_set": ",".join(solvers), "run_id": None,
    }


def cascade_outcome(m: SolverMatrix, order: list[int], fp: float, fn: float, rng: np.random.Generator) -> tuple[float, float, float]:
    """(accuracy, cost per item, calls per item) of one cascade under one draw of judge noise."""
    n = m.correct.shape[0]
    done = np.zeros(n, dtype=bool)
    final = np.zeros(n, dtype=bool)
    cost = np.zeros(n)
    calls = np.zeros(n)
    for pos, s in enumerate(order):
        active = ~done
        cost[active] += m.cost[active, s]
        calls[active] += 1
        right = m.correct[:, s]
        says_right = np.where(right, rng.random(n) >= fn, rng.random(n) < fp)
        stop = active & (says_right | (pos == len(order) - 1))
        final[stop] = right[stop]
        done |= stop
    return float(final.mean()), float(cost.mean()), float(calls.mean())


def baseline_points(m: SolverMatrix, params: FrontierParams) -> pl.DataFrame:
    acc, cost = m.accuracy(), m.mean_cost()
    rows = [_row(f"always-{s}", "single", acc[i], cost[i], 1.0, [s]) for i, s in enumerate(m.solvers)]
    for i, j in itertools.combinations(range(len(m.solvers)), 2):
        pair = [m.solvers[i], m.solvers[j]]
        for k in range(1, params.mixture_points + 1):
            p = k / (params.mixture_points + 1)
            rows.append(_row(f"mix:{pair[0]}+{pair[1]}", "mixture", p * acc[i] + (1 - p) * acc[j],
                             p * cost[i] + (1 - p) * cost[j], 1.0, pair, op=f"p={p:.2f}"))
    by_cost = sorted(range(len(m.solvers)), key=lambda s: cost[s])
    noise = params.cascade
    for length in range(2, len(m.solvers) + 1):
        for order in itertools.combinations(by_cost, length):
            names = [m.solvers[s] for s in order]
            for seed in range(noise.seeds):
                a, c, calls = cascade_outcome(m, list(order), noise.false_positive_rate, noise.false_negative_rate,
                                              np.random.default_rng([noise.seed, seed, *order]))
                rows.append(_row("cascade:" + ">".join(names), "cascade", a, c, calls, names, seed=seed))
    any_right = m.correct.any(axis=1)
    cheapest_right = np.where(m.correct, m.cost, np.inf).min(axis=1)
    oracle_cost = np.where(any_right, cheapest_right, m.cost.min(axis=1))
    rows.append(_row("oracle", "oracle", any_right.mean(), oracle_cost.mean(), 1.0, m.solvers))
    return pl.DataFrame(rows, schema_overrides={"run_id": pl.String})


def pareto_mask(cost: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """True where no other point has cost <= and accuracy >= with one strictly better."""
    order = np.lexsort((-acc, cost))  # cheapest first; at equal cost the most accurate first
    mask = np.zeros(len(cost), dtype=bool)
    best = -np.inf
    for i in order:
        if acc[i] > best:
            mask[i] = True
            best = acc[i]
    return mask


def hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Upper concave, non-decreasing envelope of (cost, accuracy) points, sorted by cost."""
    pts = sorted(set(points), key=lambda p: (p[0], -p[1]))
    upper: list[tuple[float, float]] = []
    for p in pts:
        if upper and (p[1] <= upper[-1][1] or p[0] == upper[-1][0]):
            continue  # costs as much or more, not better: dominated
        while len(upper) >= 2:
            (x1, y1), (x2, y2) = upper[-2], upper[-1]
            if (y2 - y1) * (p[0] - x1) <= (p[1] - y1) * (x2 - x1):
                upper.pop()  # upper[-1] lies on or below the chord: not on the concave envelope
            else:
                break
        upper.append(p)
    return upper


def hull_value(curve: list[tuple[float, float]], x: np.ndarray) -> np.ndarray:
    """The envelope at costs x: linear between breakpoints, flat after the last, -inf before the first."""
    xs, ys = np.array([p[0] for p in curve]), np.array([p[1] for p in curve])
    out = np.interp(x, xs, ys, right=ys[-1])
    return np.where(x < xs[0], -np.inf, out)


def aiq(points: list[tuple[float, float]], c_lo: float, c_hi: float, grid: int = 2001) -> float:
    if c_hi <= c_lo:
        return float(max(p[1] for p in points))
    curve = hull(points + [(0.0, 0.0)])
    x = np.linspace(c_lo, c_hi, grid)
    return float(np.trapezoid(hull_value(curve, x), x) / (c_hi - c_lo))


@dataclass(frozen=True)
class Anchors:
    weak_cost: float
    weak_acc: float
    strong_cost: float
    strong_acc: float


def pgr_curve(points: list[tuple[float, float]], a: Anchors, grid: int = 2001) -> tuple[np.ndarray, np.ndarray]:
    curve = hull(points + [(a.weak_cost, a.weak_acc), (a.strong_cost, a.strong_acc)])
    c = np.linspace(0.0, 1.0, grid)
    cost = a.weak_cost + c * (a.strong_cost - a.weak_cost)
    acc = np.maximum(hull_value(curve, cost), a.weak_acc)  # all-weak is always available
    gap = a.strong_acc - a.weak_acc
    return c, (acc - a.weak_acc) / gap if gap > 0 else np.zeros_like(c)


def apgr(points: list[tuple[float, float]], a: Anchors) -> float:
    c, pgr = pgr_curve(points, a)
    return float(np.trapezoid(pgr, c))


def cpt(points: list[tuple[float, float]], a: Anchors, level: float) -> float | None:
    c, pgr = pgr_curve(points, a)
    reached = np.nonzero(pgr >= level - 1e-12)[0]
    return float(c[reached[0]]) if len(reached) else None


def aggregate(points: pl.DataFrame) -> pl.DataFrame:
    """Mean and spread over seeds per (study, method, operating_point) and, when points name one, dataset."""
    keys = ["study", "method", "operating_point"] + (["dataset"] if "dataset" in points.columns else [])
    return (
        points.group_by(keys, maintain_order=True)
        .agg(
            pl.col("kind").first(),
            pl.col("accuracy").mean(),
            pl.col("accuracy").std().fill_null(0.0).alias("accuracy_std"),
            pl.col("cost_per_item_usd").mean(),
            pl.col("cost_per_item_usd").std().fill_null(0.0).alias("cost_std"),
            pl.col("calls_per_item").mean(),
            pl.col("seed").n_unique().cast(pl.Int64).alias("n_seeds"),
            pl.col("solver_set").first(),
            pl.col("run_id").drop_nulls().unique().sort().str.join(",").alias("run_ids"),
        )
    )


def summarize(frontier: pl.DataFrame, m: SolverMatrix, levels: list[float]) -> dict:
    """Per method: best accuracy and its cost, AIQ, APGR, CPT(levels); plus the anchors and oracle."""
    acc, cost = m.accuracy(), m.mean_cost()
    weak = int(np.argmin(cost))
    strong = int(np.argmax(acc))
    anchors = Anchors(float(cost[weak]), float(acc[weak]), float(cost[strong]), float(acc[strong]))
    c_lo, c_hi = float(cost.min()), float(cost.max())
    methods = {}
    for (study, method), g in frontier.group_by(["study", "method"], maintain_order=True):
        pts = list(zip(g["cost_per_item_usd"].to_list(), g["accuracy"].to_list(), strict=True))
        best = g.sort(["accuracy", "cost_per_item_usd"], descending=[True, False]).row(0, named=True)
        key = method if study == "baselines" else f"{study}/{method}"
        methods[key] = {
            "kind": best["kind"],
            "best_accuracy": round(best["accuracy"], 6),
            "best_accuracy_cost_per_item_usd": best["cost_per_item_usd"],
            "aiq": round(aiq(pts, c_lo, c_hi), 6),
            "apgr": round(apgr(pts, anchors), 6),
            **{f"cpt{round(level * 100)}": cpt(pts, anchors, level) for level in levels},
            "operating_points": g.height,
        }
    oracle = frontier.filter((pl.col("kind") == "oracle") & (pl.col("study") == "baselines")).row(0, named=True)
    return {
        "weak_solver": m.solvers[weak],
        "strong_solver": m.solvers[strong],
        "cost_interval_usd": [c_lo, c_hi],
        "oracle": {"accuracy": oracle["accuracy"], "cost_per_item_usd": oracle["cost_per_item_usd"]},
        "methods": methods,
    }


def build_frontier(labeled_split: pl.DataFrame, summaries: pl.DataFrame, params: FrontierParams, dataset: str) -> tuple[pl.DataFrame, dict]:
    """The frontier of `dataset` (the cached answers' task) and, apart, of any other task a study's
    summary rows name in their `dataset` column (e.g. a simulated environment with its own costs):
    each task gets its own Pareto set, and the methods summary covers `dataset` only."""
    m = SolverMatrix.from_labeled(labeled_split)
    points = baseline_points(m, params).with_columns(pl.lit(dataset).alias("dataset"))
    if summaries.height:
        # a study's own oracle (method `oracle` or `<env>.oracle`) is an upper bound, not a contender
        is_oracle = pl.col("method").str.split(".").list.last() == "oracle"
        study_points = summaries.filter(pl.col("split") == params.split).with_columns(
            pl.when(is_oracle).then(pl.lit("oracle")).otherwise(pl.lit("study")).alias("kind"),
            pl.col("dataset").fill_null(dataset),
        )
        points = pl.concat([points, study_points.select([*POINT_COLUMNS, "dataset"])], how="vertical_relaxed")
    frontier = aggregate(points)
    frontier = frontier.select([c for c in frontier.columns if c != "dataset"] + ["dataset"])
    mask = np.zeros(frontier.height, dtype=bool)
    for task in frontier["dataset"].unique().to_list():
        contender = ((frontier["kind"] != "oracle") & (frontier["dataset"] == task)).to_numpy()
        mask[contender] = pareto_mask(frontier["cost_per_item_usd"].to_numpy()[contender], frontier["accuracy"].to_numpy()[contender])
    frontier = frontier.with_columns(pl.Series("on_pareto", mask))
    return frontier, summarize(frontier.filter(pl.col("dataset") == dataset), m, params.cpt_levels)
