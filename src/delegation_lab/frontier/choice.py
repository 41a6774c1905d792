"""A cascade chosen on train, judged on test: can a deployable check match the strongest model for less?

The frontier reports every kept cascade on the test split, and picking the one that looks best
there would be choosing on test. This module makes the choice on the search split instead (the
cascades' `frontier.cascade.search_split`, train in every experiment; for the exhaustive frontier
the same split's answers), once per verifier set, by a rule fixed in advance:

- the strongest single solver is the most accurate one on the search split;
- a kept cascade is eligible when its search-split accuracy is at least that solver's minus one
  standard error (sqrt(a (1 - a) / n'), n' the search split's items);
- the choice is the cheapest eligible cascade on the search split (ties: the more accurate).

Its test figures are then reported against the strongest single's: accuracy with its interval, the
paired bootstrap difference (`ItemValues.paired_accuracy`, with the tie tolerance), and its cost
share. `meets_goal` says whether it is within the strongest single's accuracy interval on test at
no more than `GOAL_COST_SHARE` of its cost (the bar issue 44 sets for MATH level 5), and
`not_worse` whether the paired difference's interval reaches 0. Cost: one run of each kept cascade
on the search split per verifier set, O(K L S n') for K kept cascades (what the search already did
for them, once more).
"""

from __future__ import annotations

import math

import numpy as np

from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.frontier.baselines import BASELINES, SolverMatrix
from delegation_lab.frontier.cascades import run_cascade, verdicts, verifier_seeds
from delegation_lab.params.root import FrontierParams

GOAL_COST_SHARE = 0.5
RULE = ("the cheapest kept cascade whose search-split accuracy is within one standard error of the most accurate "
        "single solver's there")


def train_choice(choose: SolverMatrix, m: SolverMatrix, orders: list[tuple[int, ...]], verifier: Verifier,
                 params: FrontierParams, values, dataset: str) -> dict:
    """The choice under `verifier` among the cascades `orders` (indices into both matrices' solvers),
    made on `choose` (the search split) and reported on `m`'s split from `values` (the frontier's
    `ItemValues`: every baseline point's item-level values)."""
    acc, cost = choose.accuracy(), choose.mean_cost()
    strong = int(np.lexsort((cost, -acc))[0])  # most accurate, then cheapest
    bar = float(acc[strong] - math.sqrt(acc[strong] * (1 - acc[strong]) / len(choose.item_ids)))
    out = {"rule": RULE, "search_split_items": len(choose.item_ids), "against": f"always-{m.solvers[strong]}",
           "goal_cost_share": GOAL_COST_SHARE}
    candidates = []
    if orders:
        table = verdicts(choose, verifier, verifier_seeds(params.cascade, verifier))
        for order in orders:
            run = run_cascade(choose, list(order), table, verifier)
            if run.accuracy() >= bar:
                candidates.append((run.mean_cost(), -run.accuracy(), order))
    if not candidates:
        return {**out, "chosen": None, "note": "no kept cascade within one standard error of the strongest single on the search split"}
    price, neg_acc, order = min(candidates)
    name = "cascade:" + ">".join(m.solvers[s] for s in order)
    mine = (BASELINES, name, "default", dataset, verifier.name)
    single = (BASELINES, out["against"], "default", dataset, verifier.name)
    lo, hi, c_lo, c_hi = values.interval(mine)
    s_lo, s_hi, _, _ = values.interval(single)
    test_acc, test_cost = float(np.mean(values.values[mine][0])), float(np.mean(values.values[mine][1]))
    s_acc, s_cost = float(np.mean(values.values[single][0])), float(np.mean(values.values[single][1]))
    paired = values.paired_accuracy(mine, single)
    share = test_cost / s_cost if s_cost else None
    return {**out, "chosen": name,
            "search_split": {"accuracy": round(-neg_acc, 6), "cost_per_item_usd": price, "bar": round(bar, 6),
                             "strongest_single_accuracy": round(float(acc[strong]), 6)},
            "test": {"accuracy": round(test_acc, 6), "accuracy_ci": [lo, hi], "cost_per_item_usd": test_cost,
                     "cost_ci": [c_lo, c_hi], "strongest_single_accuracy": round(s_acc, 6),
                     "strongest_single_accuracy_ci": [s_lo, s_hi], "strongest_single_cost_per_item_usd": s_cost,
                     "cost_share": share, "vs_strongest_single": paired},
            "not_worse": bool(paired is not None and (paired.get("tie") or paired["ci_high"] >= 0)),
            "meets_goal": bool(share is not None and share <= GOAL_COST_SHARE and test_acc >= s_lo)}
