"""MARGENT collection: branches per second on the simulated default, batched per depth vs item by item.

Runs the interventional collection of the default params (2000 train roots, depth 3) with every
branch of a depth in one call per sub-agent, then the same collection one item at a time on a
slice, and the full evaluation tree of the test split. Prints branches/s of each and the
batched / item-by-item speed-up, with the number of team calls each needed.
"""

from __future__ import annotations

import time

import polars as pl

from delegation_lab.params.root import load_params
from delegation_lab.data import build_items
from delegation_lab.data.items import items_frame
from delegation_lab.margent import study
from delegation_lab.margent.collect import build_tree
from delegation_lab.margent.schemas import AgentView
from delegation_lab.margent.simulator import SimulatedTeam
from delegation_lab.margent.team import GoldScorer
from delegation_lab.margent.tree import SequenceTree


def main() -> None:
    params = load_params("params.yaml")
    margent = params.margent
    frame = items_frame(build_items(params.data))
    pools = study.sample_pools(frame.filter(pl.col("split") == "train"), frame.filter(pl.col("split") == "test"), margent.collect)
    prices = study.role_prices(margent, params)
    pool = tuple(margent.subagents)
    views = [AgentView.from_item(i) for i in pools.collection]
    scorer = GoldScorer([*pools.collection, *pools.test])
    tree = SequenceTree(pool, margent.collect.depth)

    team = SimulatedTeam(margent.simulator, prices)
    t = time.perf_counter()
    batched, stats = build_tree(team, views, scorer, tree)
    t_batched = time.perf_counter() - t
    batched_calls = 1 + sum(stats.consult_calls.values()) + stats.revise_calls

    sliced = views[:200]
    team = SimulatedTeam(margent.simulator, prices)
    t = time.perf_counter()
    n_single, single_calls = 0, 0
    for view in sliced:
        f, s = build_tree(team, [view], scorer, tree)
        n_single += f.height
        single_calls += 1 + sum(s.consult_calls.values()) + s.revise_calls
    t_single = time.perf_counter() - t

    test_views = [AgentView.from_item(i) for i in pools.test]
    team = SimulatedTeam(margent.simulator, prices)
    t = time.perf_counter()
    full, _ = build_tree(team, test_views, scorer, SequenceTree(pool, len(pool)), mode="full", decisions=True)
    t_full = time.perf_counter() - t

    rate_b, rate_s = batched.height / t_batched, n_single / t_single
    print(f"interventional collection: {len(views)} roots, depth {margent.collect.depth}, {batched.height} branches "
          f"in {batched_calls} team calls")
    print(f"  batched per depth:  {rate_b:,.0f} branches/s")
    print(f"  item by item:       {rate_s:,.0f} branches/s ({n_single} branches of {len(sliced)} roots, {single_calls} team calls)")
    print(f"  speed-up batched / item by item: {rate_b / rate_s:.1f}x; team calls per branch {batched_calls / batched.height:.4f} vs {single_calls / n_single:.2f}")
    print(f"full evaluation tree: {len(test_views)} test items x {full.height // len(test_views)} sequences, "
          f"{full.height / t_full:,.0f} branches/s ({full.height / t_full / rate_b:.2f}x the collection rate)")


if __name__ == "__main__":
    main()
