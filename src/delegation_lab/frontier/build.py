"""The shared cost-accuracy frontier: solver-only baselines, the oracle, Pareto marks, and the
summary numbers of routing papers (RouterBench's AIQ, RouteLLM's APGR and CPT).

Definitions (all on one split, default `test`):
- always-<S>: every item to solver S. mix:<S>+<T>@p: a random mixture, S with probability p (its
  expected accuracy and cost are the convex combination). cascade:<S1>><S2>>...: ask solvers from
  cheap to expensive and stop at the first answer the shared verifier (`evaluation.verifier`, the
  same common random numbers as every study) accepts; cost is the sum of the solvers asked; mean
  over verifier seeds (`frontier_cascades`). oracle: the cheapest correct solver per item (the
  cheapest solver when none is correct) — the upper bound.
- served:<model> (`data.dataset: served` only): a policy `dlab serve` ran, on the requests it
  answered — the label of the answer each got and the journal's cost (`frontier_served`).
- Which baselines: while the cost-ordered cascades of up to `frontier.cascade.max_length` solvers
  number at most `frontier.exhaustive_limit` (the default DAG's 3 solvers: 4), every cascade,
  mixtures of every pair and an interval on every point, all on the reported split. Above it:
  cascades searched on `frontier.cascade.search_split` and only the kept ones measured on the
  reported split (`frontier_cascades`: what is searched where); mixtures only between consecutive
  vertices of the singles' efficient convex hull on the reported split (a mixture lies on the
  segment between its two solvers, so no other segment can reach the front; which segments those
  are is fixed by the singles alone, so this picks nothing for luck); intervals only where reported.
- Pareto: a point no other point matches-or-beats on both cost and accuracy (oracles excluded: the
  baseline oracle and any study method named `oracle` or `<env>.oracle` are upper bounds), within
  one (dataset, verifier) set: a run whose acceptance decisions saw a perfect verifier (`gold`)
  never sits among the noisy-judge points.
- Verifier sets (frontier/verifiers.py): the baselines are computed under `evaluation.verifier`,
  again under each of `evaluation.compare_verifiers` (e.g. a 2-of-3 agreement vote; cascades
  searched under it as under the main one) and under `gold` where a study ran with it; each is its
  own set. Singles and mixtures take no accept decision and are the same in every set (kept so each
  set's front and field metrics are whole); the oracle appears once; the studies stay under the main
  verifier. Every row records `verifier_deployable`; the metrics' `verifiers` give each set's
  verifier with its FP / FN against gold on the reported split and on train.
- Intervals: item-level bootstrap (`evaluation.statistics.ItemBootstrap`) of accuracy and cost per
  item, seeds resampled too where a method ran several; one set of resamples per dataset, so every
  method is resampled on the same items (paired). Study points take their item-level values from
  `results/outcomes/<study>.parquet`; a point without outcomes has null intervals. Above the
  exhaustive limit only the Pareto set, the oracles and each method's best-accuracy point (what
  `summarize` reports) get one; the other rows have nulls.
- Field metrics (`routing_metrics`, definitions and sources there): LLMRouterBench's Gain@BestSingle,
  Gap@Oracle, CostSave and ParetoDist and RouterArena's Arena score per method, within its verifier set.
- Ties (`evaluation.ties`): a cost difference of at most `cost_usd` per item and an accuracy
  difference of at most `accuracy_items` / n items are no difference.
- dominated_by: for a learned method, the cheapest baseline point (single, mixture, cascade) of its
  set that costs no more (within the cost tolerance) and is at least as accurate (within the accuracy
  tolerance) at the method's best-accuracy point, and beats it beyond the tolerance on one of the
  two. ties_with: the cheapest baseline point equal to it within both tolerances (null when none).
  vs_best_single: a paired bootstrap test (`tie` within the accuracy tolerance) of that point's
  accuracy against the most accurate single solver costing no more than the point plus the cost
  tolerance (so a single that costs 1e-11 more is the comparison).
- train_choice (frontier/choice.py): per verifier set, the cascade a deployment would pick on the
  search split (the cheapest within one standard error of the strongest single there), reported on
  the reported split against that single: accuracy, paired test, cost share, `meets_goal`.
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

Cost. With N solvers, n items on the reported split (n' on the search split), S verifier seeds
(`cascade.seeds`; 1 for a gold or cached verifier), L = `cascade.max_length`, B = `cascade.beam`,
k = `mixture_points`, R bootstrap resamples, and P rows (singles, mixtures, kept cascades, study points):
- exhaustive (at most `exhaustive_limit` cascades, so N is bounded: N <= 6 at the defaults): every cascade
  O(L S n), every pair's mixtures O(N^2 k n), an interval on every row O(R S n) each.
- searched: verdicts O(N S (n + n')); B N (L - 1) cascades tried on the search split, each O(S n')
  (`frontier_cascades`), ranked in O(B^2 N log(B N)) per length; K <= B N (L - 1) kept cascades
  measured, O(L S n) each; singles and the oracle O(N n); mixtures on the <= N - 1 segments of the
  singles' hull O(N k n); so P = O(N (1 + k + B L)) rows plus the studies'. Pareto marks O(P log P);
  intervals on the reported rows (<= P) O(R S n) each; the summary O(grid) per method plus the field
  metrics' distance to the front, O(P log P) per method, O(P^2 log P) in all (`routing_metrics`).
- V verifier sets (1 + the compared verifiers, + 1 for gold where a study ran with it): everything
  above but the studies' own rows is done once per set, so the baselines' time and rows (P) are
  multiplied by V; each verifier's FP / FN add O(V N S (n + n_train)) (`verifier_report`). Building
  an agreement verifier (its matcher over every labelled answer) is the stage's, once per verifier.
So time is linear in items (n, n'), in seeds (S) and in verifier sets (V), linear in N in every part
but the field metrics' O(N^2 log N): about N^2 at fixed L, B and k, never exponential (no subset or
all-pairs enumeration above the limit; `python -m benchmarks frontier_scale` measures it). Item
arrays [S, n] are held for the P rows only, never for a cascade merely tried: memory O(P S n).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from delegation_lab.params.root import FrontierParams
from delegation_lab.evaluation.params import IntervalParams, TieParams
from delegation_lab.evaluation.statistics import ItemBootstrap, paired_bootstrap
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.frontier.estimates import resting_on_estimates, verifier_models
from delegation_lab.frontier.baselines import (  # noqa: F401 - re-exported: the frontier's public names
    BASELINES,
    DEFAULT_VERIFIER,
    SolverMatrix,
    baseline_item_points,
    baseline_points,
    cascade_outcome,
    search_matrix,
)
from delegation_lab.frontier.cascades import exhaustive, pareto_layers
from delegation_lab.frontier.choice import train_choice
from delegation_lab.frontier.curves import Anchors, aiq, apgr, cpt, hull  # noqa: F401 - hull re-exported
from delegation_lab.frontier.served import SERVED_KIND, ServedPoints
from delegation_lab.frontier.metrics import field_metrics
from delegation_lab.frontier.verifiers import mark_methods, verifier_report, verifier_sets, with_deployable
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA

POINT_COLUMNS = ["study", "method", "operating_point", "kind", "seed", "accuracy", "cost_per_item_usd", "calls_per_item",
                 "solver_set", "verifier"]
BASELINE_KINDS = ("single", "mixture", "cascade")


def pareto_mask(cost: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """True where no other point has cost <= and accuracy >= with one strictly better (of equal points the first)."""
    return pareto_layers(np.asarray(cost), np.asarray(acc)) == 0


# ------------------------------------------------------------------------------------------------
# points, intervals and the per-method summary

POINT_KEYS = ["study", "method", "operating_point", "dataset", "verifier"]


def aggregate(points: pl.DataFrame) -> pl.DataFrame:
    """Mean and spread over seeds per (study, method, operating_point, dataset, verifier)."""
    keys = [k for k in POINT_KEYS if k in points.columns]
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
        )
    )


@dataclass
class ItemValues:
    """Item-level values of every point ([n_seeds, n_items] correct and cost) and one bootstrap per
    dataset, so points on the same items are resampled together (paired)."""

    intervals: IntervalParams
    items: dict[str, list[str]] = field(default_factory=dict)  # dataset -> item order
    ties: TieParams = field(default_factory=TieParams)  # what the paired test and dominance call no difference
    values: dict[tuple, tuple[np.ndarray, np.ndarray, list[str]]] = field(default_factory=dict)
    _boots: dict[tuple[str, int], ItemBootstrap] = field(default_factory=dict)

    def add(self, key: tuple, correct: np.ndarray, cost: np.ndarray, item_ids: list[str]) -> None:
        if key in self.values:  # another seed of the same point (cascade judge draws)
            c0, k0, ids = self.values[key]
            self.values[key] = (np.vstack([c0, correct]), np.vstack([k0, cost]), ids)
        else:
            self.values[key] = (np.atleast_2d(correct), np.atleast_2d(cost), item_ids)

    def add_outcomes(self, outcomes: pl.DataFrame) -> None:
        for key, g in outcomes.group_by(POINT_KEYS, maintain_order=True):
            ids = sorted(g["item_id"].unique().to_list())
            seeds = sorted(g["seed"].unique().to_list())
            col = {item: n for n, item in enumerate(ids)}
            row = {seed: n for n, seed in enumerate(seeds)}
            r = np.fromiter((row[s] for s in g["seed"].to_list()), dtype=np.int64, count=g.height)
            c = np.fromiter((col[i] for i in g["item_id"].to_list()), dtype=np.int64, count=g.height)
            correct = np.full((len(seeds), len(ids)), np.nan)
            cost = np.full((len(seeds), len(ids)), np.nan)
            correct[r, c] = g["correct"].to_numpy()
            cost[r, c] = g["cost_usd"].to_numpy()
            if np.isnan(correct).any():
                raise ValueError(f"outcomes of {'/'.join(map(str, key[:3]))}: its seeds cover different items")
            self.values[tuple(key)] = (correct, cost, ids)

    def bootstrap(self, dataset: str, ids: list[str]) -> ItemBootstrap:
        paired = self.items.get(dataset) == ids
        key = (dataset, -1) if paired else (dataset, len(ids))
        if key not in self._boots:
            p = self.intervals
            self._boots[key] = ItemBootstrap(len(ids), p.resamples, p.confidence, p.seed)
        return self._boots[key]

    def interval(self, key: tuple) -> tuple[float | None, float | None, float | None, float | None]:
        if key not in self.values:
            return None, None, None, None
        c, k, ids = self.values[key]
        boot = self.bootstrap(key[3], ids)
        return (*boot.interval(c), *boot.interval(k))

    def paired_accuracy(self, a: tuple, b: tuple) -> dict | None:
        """Paired bootstrap of accuracy(a) - accuracy(b) when both cover the same items; `tie` when
        the difference is within the accuracy tolerance (`evaluation.ties`)."""
        if a not in self.values or b not in self.values or self.values[a][2] != self.values[b][2]:
            return None
        ids = self.values[a][2]
        test = paired_bootstrap(self.bootstrap(a[3], ids), self.values[a][0], self.values[b][0], self.ties.accuracy(len(ids)))
        return {k: v if isinstance(v, bool) else round(v, 6) for k, v in test.items()}


def _key(row: dict) -> tuple:
    return tuple(row[k] for k in POINT_KEYS)


def method_key(study: str, method: str, verifier: str, main_verifier: str) -> str:
    """A (study, method, verifier)'s name in the methods summary: a method under another verifier
    than the main one is `<name> [<verifier>]`."""
    key = method if study == "baselines" else f"{study}/{method}"
    return key if verifier in (main_verifier, "oracle") else f"{key} [{verifier}]"


def _point_name(row: dict) -> str:
    name = row["method"] if row["study"] == "baselines" else f"{row['study']}/{row['method']}"
    return name if row["operating_point"] == "default" else f"{name}@{row['operating_point']}"


def _within(ties: TieParams, n_items: int) -> tuple[float, float]:
    """(cost, accuracy) tolerances, with the relative slack of `statistics.tied`."""
    return ties.cost_usd * (1 + 1e-9), ties.accuracy(n_items) * (1 + 1e-9)


def dominating_baseline(best: dict, contenders: pl.DataFrame, ties: TieParams = TieParams(), n_items: int = 1) -> dict | None:
    """The cheapest baseline point that costs no more than `best` and is at least as accurate, both
    within the tie tolerances (`evaluation.ties`, accuracy over `n_items`), and beats it beyond the
    tolerance on one of the two."""
    c, a = best["cost_per_item_usd"], best["accuracy"]
    tc, ta = _within(ties, n_items)
    cost, acc = pl.col("cost_per_item_usd"), pl.col("accuracy")
    dom = contenders.filter(
        pl.col("kind").is_in(BASELINE_KINDS) & (cost <= c + tc) & (acc >= a - ta) & ((cost < c - tc) | (acc > a + ta))
    ).sort(["cost_per_item_usd", "accuracy"], descending=[False, True])
    return dom.row(0, named=True) if dom.height else None


def tying_baseline(best: dict, contenders: pl.DataFrame, ties: TieParams = TieParams(), n_items: int = 1) -> dict | None:
    """The cheapest baseline point equal to `best` within both tie tolerances (`ties_with`)."""
    tc, ta = _within(ties, n_items)
    same = contenders.filter(
        pl.col("kind").is_in(BASELINE_KINDS) & ((pl.col("cost_per_item_usd") - best["cost_per_item_usd"]).abs() <= tc)
        & ((pl.col("accuracy") - best["accuracy"]).abs() <= ta)
    ).sort(["cost_per_item_usd", "accuracy"], descending=[False, True])
    return same.row(0, named=True) if same.height else None


def summarize(frontier: pl.DataFrame, m: SolverMatrix, levels: list[float], values: ItemValues, main_verifier: str,
              estimated: dict[str, dict] | None = None, check_models: list[str] | None = None) -> dict:
    """Per method: best accuracy and its cost with intervals, its verifier, AIQ, APGR, CPT(levels),
    and for learned methods `dominated_by`, `ties_with` and a paired test against the best single
    solver, under the tie tolerances of `values.ties`. Where the
    best point's cost rests on estimated reasoning tokens (`estimated`: frontier/estimates.py) of one of
    its solvers or of the verifier's `check_models`, `cost_rests_on_estimated_tokens` names them."""
    acc, cost = m.accuracy(), m.mean_cost()
    n_items = len(m.item_ids)  # the accuracy tie tolerance's denominator
    weak = int(np.argmin(cost))
    strong = int(np.argmax(acc))
    anchors = Anchors(float(cost[weak]), float(acc[weak]), float(cost[strong]), float(acc[strong]))
    c_lo, c_hi = float(cost.min()), float(cost.max())
    methods = {}
    curves: dict[str, dict[str, list]] = {}  # verifier -> method key -> points (oracles excluded)
    for (study, method, verifier), g in frontier.group_by(["study", "method", "verifier"], maintain_order=True):
        pts = list(zip(g["cost_per_item_usd"].to_list(), g["accuracy"].to_list(), strict=True))
        best = g.sort(["accuracy", "cost_per_item_usd"], descending=[True, False]).row(0, named=True)
        key = method_key(study, method, verifier, main_verifier)
        entry = {
            "kind": best["kind"],
            "verifier": verifier,
            "best_accuracy": round(best["accuracy"], 6),
            "best_accuracy_cost_per_item_usd": best["cost_per_item_usd"],
            "best_operating_point": best["operating_point"],
            "accuracy_ci": _pair(best["accuracy_ci_low"], best["accuracy_ci_high"]),
            "cost_ci": _pair(best["cost_ci_low"], best["cost_ci_high"]),
            "aiq": round(aiq(pts, c_lo, c_hi), 6),
            "apgr": round(apgr(pts, anchors), 6),
            **{f"cpt{round(level * 100)}": cpt(pts, anchors, level) for level in levels},
            "operating_points": g.height,
        }
        resting = resting_on_estimates(best["solver_set"], estimated or {}, check_models or [])
        if resting and best["kind"] != "oracle":
            entry["cost_rests_on_estimated_tokens"] = resting
        if best["kind"] in ("study", SERVED_KIND):
            same = frontier.filter((pl.col("verifier") == verifier) & (pl.col("study") == "baselines"))
            dom = dominating_baseline(best, same, values.ties, n_items)
            entry["dominated_by"] = _point_name(dom) if dom else None
            tie = tying_baseline(best, same, values.ties, n_items)
            entry["ties_with"] = _point_name(tie) if tie else None
            within = best["cost_per_item_usd"] + _within(values.ties, n_items)[0]
            singles = same.filter((pl.col("kind") == "single") & (pl.col("cost_per_item_usd") <= within))
            if singles.height:
                single = singles.sort(["accuracy", "cost_per_item_usd"], descending=[True, False]).row(0, named=True)
                test = values.paired_accuracy(_key(best), _key(single))
                entry["vs_best_single"] = {"against": single["method"], **test} if test else {"against": single["method"]}
            else:
                entry["vs_best_single"] = None  # every single solver costs more than this point
        methods[key] = entry
        if best["kind"] != "oracle":
            curves.setdefault(verifier, {})[key] = pts
    oracle = frontier.filter((pl.col("kind") == "oracle") & (pl.col("study") == "baselines")).row(0, named=True)
    _add_field_metrics(frontier, methods, curves, (oracle["cost_per_item_usd"], oracle["accuracy"]))
    return {
        "weak_solver": m.solvers[weak],
        "strong_solver": m.solvers[strong],
        "cost_interval_usd": [c_lo, c_hi],
        "ties": {"cost_usd": values.ties.cost_usd, "accuracy_items": values.ties.accuracy_items,
                 "accuracy": values.ties.accuracy(n_items)},  # what dominated_by / ties_with / vs_best_single call equal
        "oracle": {"accuracy": oracle["accuracy"], "cost_per_item_usd": oracle["cost_per_item_usd"],
                   "accuracy_ci": _pair(oracle["accuracy_ci_low"], oracle["accuracy_ci_high"])},
        "methods": methods,
    }


FIELD_METRICS = ("gain_at_best_single", "gap_at_oracle", "cost_save", "pareto_dist", "arena_score")


def _add_field_metrics(frontier: pl.DataFrame, methods: dict, curves: dict[str, dict[str, list]], oracle: tuple[float, float]) -> None:
    """LLMRouterBench's Gain@BestSingle, Gap@Oracle, CostSave, ParetoDist and RouterArena's Arena
    score (`routing_metrics`) per method, within its verifier set (ParetoDist against that set's front)."""
    for verifier, by_method in curves.items():
        singles = {r["method"]: (r["cost_per_item_usd"], r["accuracy"]) for r in frontier.filter(
            (pl.col("kind") == "single") & (pl.col("verifier") == verifier)).iter_rows(named=True)}
        if not singles:
            continue  # a set without baselines (a verifier the frontier did not recompute them under)
        for key, values in field_metrics(by_method, singles, oracle).items():
            methods[key].update({k: None if v is None or np.isnan(v) else round(float(v), 6) for k, v in values.items()})


def _pair(lo: float | None, hi: float | None) -> list[float] | None:
    # unrounded: a cost of $3e-5 would lose its interval to six decimals
    return None if lo is None or hi is None or np.isnan(lo) else [float(lo), float(hi)]


def build_frontier(labeled_split: pl.DataFrame, summaries: pl.DataFrame, params: FrontierParams, dataset: str, *,
                   verifier: Verifier = DEFAULT_VERIFIER, outcomes: pl.DataFrame | None = None,
                   intervals: IntervalParams | None = None, search_labeled: pl.DataFrame | None = None,
                   ties: TieParams | None = None) -> tuple[pl.DataFrame, dict]:
    """`frontier_with_outcomes` without the baselines' item-level outcomes."""
    table, metrics, _ = frontier_with_outcomes(labeled_split, summaries, params, dataset, verifier=verifier, outcomes=outcomes,
                                               intervals=intervals, search_labeled=search_labeled, ties=ties)
    return table, metrics


def baseline_outcomes(points: list, item_ids: list[str], dataset: str, split: str) -> pl.DataFrame:
    """The baselines' item-level outcomes in the studies' outcome contract (OUTCOME_SCHEMA), one row
    per (method, operating point, seed, item): what lets the dashboard pair a baseline with any
    study point on the same items. A mixture's `correct` (and `held_right`, `answer_cost_usd`) is its
    expected value."""
    n = len(item_ids)

    def column(values: np.ndarray | None) -> np.ndarray | None:
        return None if values is None else np.asarray(values, dtype=np.float64).reshape(-1)

    parts = [pl.DataFrame({
        "study": [p.row["study"]] * n, "method": [p.row["method"]] * n, "operating_point": [p.row["operating_point"]] * n,
        "seed": [int(p.row["seed"])] * n, "split": [split] * n, "dataset": [dataset] * n, "verifier": [p.row["verifier"]] * n,
        "item_id": item_ids, "correct": column(p.correct), "cost_usd": column(p.cost), "held_right": column(p.held_right),
        "answer_cost_usd": column(p.answer_cost), "check_cost_usd": column(p.check_cost),
    }, schema=OUTCOME_SCHEMA) for p in points]
    return pl.concat(parts) if parts else pl.DataFrame(schema=OUTCOME_SCHEMA)


def frontier_with_outcomes(labeled_split: pl.DataFrame, summaries: pl.DataFrame, params: FrontierParams, dataset: str, *,
                           verifier: Verifier = DEFAULT_VERIFIER, outcomes: pl.DataFrame | None = None,
                           intervals: IntervalParams | None = None,
                           search_labeled: pl.DataFrame | None = None,
                           served: ServedPoints | None = None,
                           estimated: dict[str, dict] | None = None,
                           compared: Mapping[str, Verifier] | None = None,
                           rates_labeled: Mapping[str, pl.DataFrame] | None = None,
                           ties: TieParams | None = None) -> tuple[pl.DataFrame, dict, pl.DataFrame]:
    """(frontier, metrics, the baselines' item-level outcomes). The frontier of `dataset` (the cached answers' task) and, apart, of any other task a study's
    summary rows name in their `dataset` column (e.g. a simulated environment with its own costs):
    each (task, verifier) gets its own Pareto set, and the methods summary covers `dataset` only.
    Baselines are computed under `verifier` (and under `gold` too when a study ran with it); above
    `params.exhaustive_limit` their cascades are searched on `search_labeled` (the labeled answers of
    `params.cascade.search_split`). The metrics' `search` says how the cascades were chosen. `served`:
    the deployed policies' own rows and item-level outcomes (`frontier_served`, the `served` dataset only).
    `estimated`: the solvers whose costs rest on estimated reasoning tokens (frontier/estimates.py): the
    metrics list them and flag each method whose best point uses one. `compared`: more verifiers
    (`evaluation.compare_verifiers` name -> Verifier) the baselines are recomputed under, each its own
    Pareto set (frontier/verifiers.py); the studies stay under `verifier`. The metrics' `verifiers`
    describe each set's verifier with its FP / FN on this split and on each split of `rates_labeled`
    (split -> labelled answers, e.g. train); every row gets `verifier_deployable`. `ties`: `evaluation.ties`, the
    tolerances of dominance, `ties_with` and `vs_best_single`."""
    m = SolverMatrix.from_labeled(labeled_split)
    search = None if exhaustive(m, params) else search_matrix(search_labeled, m, params)
    values = ItemValues(intervals or IntervalParams(), items={dataset: m.item_ids}, ties=ties or TieParams())
    study_points = pl.DataFrame()
    if summaries.height:
        # a study's own oracle (method `oracle` or `<env>.oracle`) is an upper bound, not a contender
        is_oracle = pl.col("method").str.split(".").list.last() == "oracle"
        study_points = summaries.filter(pl.col("split") == params.split).with_columns(
            pl.when(is_oracle).then(pl.lit("oracle")).otherwise(pl.lit("study")).alias("kind"),
            pl.col("dataset").fill_null(dataset),
            pl.col("verifier").fill_null("unrecorded"),
        )
    ran_with = study_points.filter(pl.col("dataset") == dataset)["verifier"].to_list() if study_points.height else []
    sets = verifier_sets(verifier, compared or {}, ran_with)
    verifiers = [s.verifier for s in sets]
    rows = []
    searches = []
    kept = []  # the baseline points, with their item values: their outcome rows
    orders: dict[str, list[tuple[int, ...]]] = {}  # verifier -> its kept cascades (frontier/choice.py)
    for v in verifiers:
        baselines = baseline_item_points(m, params, v, search)
        searches.append(baselines.search)
        orders[v.name] = list(dict.fromkeys(tuple(m.solvers.index(s) for s in p.row["solver_set"].split(","))
                                            for p in baselines.points if p.row["kind"] == "cascade"))
        for p in baselines.points:
            if p.row["kind"] == "oracle" and v is not verifiers[0]:
                continue  # one oracle
            rows.append(p.row)
            if v is verifiers[0]:  # outcome rows are keyed without the verifier: the main one's only
                kept.append(p)
            values.add((*(p.row[k] for k in POINT_KEYS[:3]), dataset, p.row["verifier"]), p.correct, p.cost, m.item_ids)
    points = pl.DataFrame(rows).with_columns(pl.lit(dataset).alias("dataset"))
    if study_points.height:
        points = pl.concat([points, study_points.select([*POINT_COLUMNS, "dataset"])], how="vertical_relaxed")
    if served is not None and served.points.height:
        points = pl.concat([points, served.points.select([*POINT_COLUMNS, "dataset"])], how="vertical_relaxed")
        values.add_outcomes(served.outcomes)
    if outcomes is not None and outcomes.height:
        mine = outcomes.filter(pl.col("split") == params.split)
        for task in mine["dataset"].unique().to_list():
            if task != dataset:
                values.items[task] = sorted(mine.filter(pl.col("dataset") == task)["item_id"].unique().to_list())
        values.add_outcomes(mine)
    frontier = aggregate(points)
    mask = np.zeros(frontier.height, dtype=bool)
    for task, verdicts_of in frontier.select("dataset", "verifier").unique().iter_rows():
        contender = ((frontier["kind"] != "oracle") & (frontier["dataset"] == task) & (frontier["verifier"] == verdicts_of)).to_numpy()
        mask[contender] = pareto_mask(frontier["cost_per_item_usd"].to_numpy()[contender], frontier["accuracy"].to_numpy()[contender])
    frontier = frontier.with_columns(pl.Series("on_pareto", mask))
    wanted = np.ones(frontier.height, dtype=bool) if searches[0]["exhaustive"] else reported_points(frontier)
    cis = [values.interval(_key(r)) if want else (None,) * 4
           for r, want in zip(frontier.select(POINT_KEYS).iter_rows(named=True), wanted, strict=True)]
    frontier = frontier.with_columns(
        pl.Series(name, [ci[i] for ci in cis], dtype=pl.Float64)
        for i, name in enumerate(["accuracy_ci_low", "accuracy_ci_high", "cost_ci_low", "cost_ci_high"])
    )
    order = [c for c in frontier.columns if c not in ("on_pareto", "dataset", "verifier")] + ["on_pareto", "dataset", "verifier"]
    frontier = with_deployable(frontier.select(order), sets)
    summary = summarize(frontier.filter(pl.col("dataset") == dataset), m, params.cpt_levels, values, verifier.name,
                        estimated, verifier_models(verifier.describe()))
    mark_methods(summary["methods"], sets)
    if estimated:
        summary["estimated_reasoning_tokens"] = estimated
    summary["verifiers"] = verifier_report(sets, {params.split: labeled_split, **(rates_labeled or {})}, params.cascade)
    choose = search if search is not None else choice_matrix(search_labeled, m)
    if choose is not None:
        summary["train_choice"] = {v.name: train_choice(choose, m, orders[v.name], v, params, values, dataset) for v in verifiers}
    search_report = dict(searches[0])
    for v, extra in zip(verifiers[1:], searches[1:], strict=True):
        search_report[v.name] = {k: extra[k] for k in ("cascades_considered", "cascades_kept", "seconds")}
    own = baseline_outcomes(kept, m.item_ids, dataset, params.split)
    if served is not None and served.outcomes.height:
        own = pl.concat([own, served.outcomes])
    return frontier, {**summary, "search": search_report}, own


def choice_matrix(labeled: pl.DataFrame | None, m: SolverMatrix) -> SolverMatrix | None:
    """The search split's matrix for the exhaustive frontier's train choice (none when that split has
    no answers, or not those of the reported split's solvers)."""
    if labeled is None or not labeled.height:
        return None
    choose = SolverMatrix.from_labeled(labeled)
    return choose if choose.solvers == m.solvers else None


def reported_points(frontier: pl.DataFrame) -> np.ndarray:
    """The rows whose intervals are reported: the Pareto set, the oracles and each method's
    best-accuracy point (the cheapest among the most accurate, ties all)."""
    keys = [k for k in POINT_KEYS if k not in ("operating_point",)]
    top = pl.col("accuracy").max().over(keys)
    cheapest_top = pl.when(pl.col("accuracy") == top).then(pl.col("cost_per_item_usd")).min().over(keys)
    best = (pl.col("accuracy") == top) & (pl.col("cost_per_item_usd") == cheapest_top)
    return frontier.select(pl.col("on_pareto") | (pl.col("kind") == "oracle") | best).to_series().to_numpy()
