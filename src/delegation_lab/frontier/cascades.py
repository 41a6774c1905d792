"""The frontier's cost-ordered cascades: how one is evaluated, and which are built.

A cascade asks solvers from cheap to expensive and stops at the first answer the shared verifier
accepts (the last member's answer stands); its cost is the sum of the answers it obtains: the
solvers asked and, for a member that is not the last, the answers its check obtains
(`Verifier.check_costs`: an `agreement` verifier's models; a judge's verdict is not priced), each
answer paid and counted as a call once per item. `ask` is the one place that arithmetic lives; the
verdicts are looked up in a table drawn once per (solver, seed, item) with the verifier's common
random numbers (`verdicts`).

Which cascades (`frontier.exhaustive_limit`, `frontier.cascade.*`):
- exhaustive: while the cost-ordered cascades of 2 .. max_length solvers number at most the limit
  (the default DAG's 3 solvers: 4), every one is built on the reported split, as before.
- searched: above it, a beam search over the solvers sorted by cost on `search_split`: length-1
  prefixes are the solvers; each length keeps the `beam` best prefixes, ranked by Pareto layer of
  (cost, accuracy) of the cascade that stops at its last member (non-dominated first; within the
  layer cut, spread evenly along cost), and extends each by every more expensive solver. The
  cascades not dominated by any single solver or cascade tried are kept and only they are measured
  on the reported split: the best of many chosen on the items it is reported on would be optimistic.

Cost, with n items, S verifier seeds, N solvers, L = max_length, B = beam: verdicts O(N S n); at most
B N (L - 1) cascades tried, each one `ask` O(S n); ranking O(B^2 N log(B N)) per length; every
array alive is [S, n] and at most B + 1 runs are held at once.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np

from delegation_lab.params.root import CascadeNoise, FrontierParams
from delegation_lab.evaluation.verifier import Verifier

if TYPE_CHECKING:
    from delegation_lab.frontier.baselines import SolverMatrix


@dataclass(frozen=True)
class CascadeRun:
    """A cascade after its members so far, per (verifier seed, item) [n_seeds, n_items]: whether the
    answer it gives when it stops at its last member is right, what it paid, how many solvers it
    asked, and which items the last member's answer was rejected on (they go on to the next)."""

    final: np.ndarray
    cost: np.ndarray
    calls: np.ndarray
    open: np.ndarray
    last: int | None = None  # the last member (a column of the solver matrix) ...
    asked: np.ndarray | None = None  # ... and the items it was asked: its answer there is checked if another follows
    have: dict[str, np.ndarray] = field(default_factory=dict)  # model -> items whose answer is already paid for
    # where the dollars went (frontier/gap.py): what the answer it gives cost, and what checks paid for
    # answers no member was asked for (a member's answer a check bought first is the member's)
    answer_cost: np.ndarray | None = None
    check_cost: np.ndarray | None = None
    checked: dict[str, np.ndarray] = field(default_factory=dict)  # model -> dollars a check paid for its answer

    @classmethod
    def start(cls, shape: tuple[int, int]) -> CascadeRun:
        return cls(np.zeros(shape, dtype=bool), np.zeros(shape), np.zeros(shape), np.ones(shape, dtype=bool),
                   answer_cost=np.zeros(shape), check_cost=np.zeros(shape))

    def accuracy(self) -> float:
        return float(self.final.mean())

    def mean_cost(self) -> float:
        return float(self.cost.mean())


def verifier_seeds(params: CascadeNoise, verifier: Verifier) -> list[int]:
    """A judge draws noise per seed; gold and cached verdicts are one draw."""
    return list(range(params.seeds)) if verifier.kind == "judge" else [0]


def verdicts(m: SolverMatrix, verifier: Verifier, seeds: list[int]) -> np.ndarray:
    """Bool [n_solvers, n_seeds, n_items]: does the verifier accept each solver's answer to each item."""
    column = np.asarray(seeds)[:, None]
    return np.stack([verifier.accepts(s, m.item_ids, m.correct[:, j], column) for j, s in enumerate(m.solvers)])


def ask(run: CascadeRun, m: SolverMatrix, s: int, accepted: np.ndarray, verifier: Verifier) -> CascadeRun:
    """`run` with solver `s` (a column of `m`) asked next on its open items; `accepted` [n_seeds,
    n_items] are the verifier's verdicts on s's answers. The previous member's answers are checked
    first (they did not stand), so the answers that check obtains are paid here, once per item."""
    cost, calls, have = run.cost, run.calls, dict(run.have)
    check_cost, checked = run.check_cost, dict(run.checked)

    def obtain(model: str, wanted: np.ndarray, price: np.ndarray) -> np.ndarray:
        nonlocal cost, calls
        held = have.get(model)
        new = wanted if held is None else wanted & ~held
        paid = np.where(new, price, 0.0)  # + 0 where not obtained: the same sums as before
        cost = cost + paid
        calls = calls + new
        have[model] = new if held is None else held | new
        return paid

    if run.last is not None:
        for model, price in verifier.check_costs(m.solvers[run.last], m.item_ids).items():
            paid = obtain(model, run.asked, price)
            check_cost = check_cost + paid
            checked[model] = checked[model] + paid if model in checked else paid
    asked = run.open
    name = m.solvers[s]
    paid = obtain(name, asked, m.cost[:, s])
    if name in checked:  # a check bought this member's answer: from here on it is the member's, not the check's
        moved = np.where(asked, checked[name], 0.0)
        paid, check_cost = paid + moved, check_cost - moved
        checked[name] = checked[name] - moved
    return CascadeRun(final=np.where(asked, m.correct[:, s], run.final), cost=cost, calls=calls,
                      open=asked & ~accepted, last=s, asked=asked, have=have,
                      answer_cost=np.where(asked, paid, run.answer_cost), check_cost=check_cost, checked=checked)


def run_cascade(m: SolverMatrix, order: list[int], table: np.ndarray, verifier: Verifier) -> CascadeRun:
    """The cascade `order` (columns of `m`, cheap first) under the verdict table of `verdicts`."""
    run = CascadeRun.start(table.shape[1:])
    for s in order:
        run = ask(run, m, s, table[s], verifier)
    return run


def cascade_count(n_solvers: int, max_length: int) -> int:
    """Cost-ordered cascades of 2 .. max_length distinct solvers."""
    return sum(math.comb(n_solvers, k) for k in range(2, min(max_length, n_solvers) + 1))


def pareto_layers(cost: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """Non-dominated sorting in (cost, accuracy): layer 0 is the Pareto set (of equal points the
    first), layer 1 the Pareto set of the rest, and so on. O(n log n)."""
    order = np.lexsort((-acc, cost))  # cheapest first; at equal cost the most accurate first
    layer = np.empty(len(cost), dtype=np.int64)
    tops: list[float] = []  # -(best accuracy so far) per layer: non-decreasing, so bisectable
    for i in order:
        k = bisect_right(tops, -acc[i])  # the first layer whose best so far is below acc[i]
        if k == len(tops):
            tops.append(-acc[i])
        else:
            tops[k] = -acc[i]
        layer[i] = k
    return layer


def best_by_layer(cost: np.ndarray, acc: np.ndarray, size: int) -> list[int]:
    """Indices of the `size` best points by Pareto layer; within the last layer taken, points
    spread evenly along cost (its cheapest and its most accurate included)."""
    layers = pareto_layers(cost, acc)
    chosen: list[int] = []
    for k in range(int(layers.max(initial=-1)) + 1):
        members = sorted(np.nonzero(layers == k)[0].tolist(), key=lambda i: (cost[i], -acc[i]))
        room = size - len(chosen)
        if len(members) <= room:
            chosen += members
        else:
            chosen += [members[j] for j in np.unique(np.round(np.linspace(0, len(members) - 1, room)).astype(int))]
        if len(chosen) >= size:
            break
    return chosen


@dataclass
class CascadeChoice:
    """The cascades to measure on the reported split (columns of the solver matrix, cheap first) and
    the search's account for metrics/frontier.json (`search`)."""

    orders: list[tuple[int, ...]]
    report: dict


def exhaustive(m: SolverMatrix, params: FrontierParams) -> bool:
    return cascade_count(len(m.solvers), params.cascade.max_length) <= params.exhaustive_limit


def all_cascades(m: SolverMatrix, params: FrontierParams) -> CascadeChoice:
    """Every cost-ordered cascade up to max_length, cheapest solver first by mean cost on `m`."""
    start = time.perf_counter()
    cost = m.mean_cost()
    by_cost = sorted(range(len(m.solvers)), key=lambda s: cost[s])
    orders = [order for length in range(2, min(params.cascade.max_length, len(m.solvers)) + 1)
              for order in combinations(by_cost, length)]
    return CascadeChoice(orders, _report(m, params, len(orders), len(orders), None, time.perf_counter() - start))


def search_cascades(m: SolverMatrix, params: FrontierParams, verifier: Verifier) -> CascadeChoice:
    """The beam search of the module docstring on `m` (the search split's matrix)."""
    start = time.perf_counter()
    cp = params.cascade
    table = verdicts(m, verifier, verifier_seeds(cp, verifier))
    mean_cost = m.mean_cost()
    by_cost = sorted(range(len(m.solvers)), key=lambda s: mean_cost[s])
    later = {s: by_cost[r + 1:] for r, s in enumerate(by_cost)}
    runs = {(s,): ask(CascadeRun.start(table.shape[1:]), m, s, table[s], verifier) for s in by_cost}
    tried = [(order, run.mean_cost(), run.accuracy()) for order, run in runs.items()]
    beam = _beam(tried, later, cp.beam)
    considered = 0
    for length in range(2, min(cp.max_length, len(m.solvers)) + 1):
        level = []
        for prefix in beam:
            for t in later[prefix[-1]]:
                run = ask(runs[prefix], m, t, table[t], verifier)
                level.append((prefix + (t,), run.mean_cost(), run.accuracy()))
        considered += len(level)
        tried += level
        if length == cp.max_length:
            break
        beam = _beam(level, later, cp.beam)
        runs = {o: ask(runs[o[:-1]], m, o[-1], table[o[-1]], verifier) for o in beam}
    front = pareto_layers(np.array([c for _, c, _ in tried]), np.array([a for _, _, a in tried])) == 0
    kept = sorted((o for (o, _, _), on in zip(tried, front, strict=True) if on and len(o) > 1), key=lambda o: (len(o), o))
    return CascadeChoice(kept, _report(m, params, considered, len(kept), cp.search_split, time.perf_counter() - start))


def _beam(candidates: list[tuple[tuple[int, ...], float, float]], later: dict[int, list[int]], size: int) -> list[tuple[int, ...]]:
    """The prefixes worth extending: those with a more expensive solver left, best `size` by layer."""
    open_ = [c for c in candidates if later[c[0][-1]]]
    if not open_:
        return []
    picks = best_by_layer(np.array([c for _, c, _ in open_]), np.array([a for _, _, a in open_]), size)
    return [open_[i][0] for i in picks]


def _report(m: SolverMatrix, params: FrontierParams, considered: int, kept: int, split: str | None, seconds: float) -> dict:
    """The `search` block of metrics/frontier.json: how many cost-ordered cascades exist up to max_length
    (`cascades_possible`), how many were evaluated (`cascades_considered`: every one when exhaustive,
    else those the beam tried, on `search_split`) and how many were measured on the reported split
    (`cascades_kept`); `beam` and `search_split` are null when nothing was searched."""
    searched = split is not None
    return {"solvers": len(m.solvers), "exhaustive": not searched, "exhaustive_limit": params.exhaustive_limit,
            "cascades_possible": cascade_count(len(m.solvers), params.cascade.max_length),
            "cascades_considered": considered, "cascades_kept": kept, "max_length": params.cascade.max_length,
            "beam": params.cascade.beam if searched else None, "search_split": split, "seconds": round(seconds, 3)}
