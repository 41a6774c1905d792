"""Stage `margent_collect`: interventional collection on train items (branch tree to depth D) and
the full evaluation trees of the development and test pools (with the prompted manager's
decisions, and the test tree again with the Verifier's candidate blanked)."""

from __future__ import annotations

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("margent_collect", section="margent")

import polars as pl

from delegation_lab.margent import study
from delegation_lab.margent.schemas import AgentView
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.skip import skip_stage
from delegation_lab.pipeline.tables import read_table, write_json_atomic, write_parquet_atomic


def unsupported(pools: study.Pools, margent, dataset: str) -> str | None:
    """Why the simulated team cannot run on these items (it solves questions from their step structure)."""
    if margent.team != "simulated":
        return None
    views = [AgentView.from_item(i) for name in study.POOLS for i in getattr(pools, name)]
    missing = sum(not v.structure for v in views)
    if not missing:
        return None
    return (f"margent.team is simulated, which needs items with a step structure (arith, gsm8k); data.dataset "
            f"{dataset!r} gives {missing} of {len(views)} item(s) without one (use margent.team: llm to run it)")


def skip(ctx: StageContext, reason: str) -> None:
    """Empty collection tables and a collect.json that tells margent_train and margent_eval to skip too."""
    skip_stage(ctx.layout, "margent_collect", reason, extra={
        "dataset": ctx.params.data.dataset, "team": ctx.params.margent.team, "pool": list(ctx.params.margent.subagents)})


def collect(ctx: StageContext) -> None:
    """Collect every branch and write results/margent/{collection,trees,views}.parquet."""
    margent = ctx.params.margent
    out = ctx.layout.study_results("margent")
    train = read_table(ctx.layout.items("train"), "train items")
    test = read_table(ctx.layout.items("test"), "test items")
    pools = study.sample_pools(train, test, margent.collect)
    reason = unsupported(pools, margent, ctx.params.data.dataset)
    if reason:
        skip(ctx, reason)
        return
    for name in study.POOLS:  # fail on an unsupported dataset before any call is made
        study.agent_views(getattr(pools, name), margent, ctx.params.data.dataset)
    cache_dir = out / "cache"
    cache_dir.mkdir(parents=True, exist_ok=True)  # answers of real models (team llm); empty for the simulator
    team = study.build_team(margent, ctx.params, cache_dir, progress=ctx.progress)
    got = study.collect_all(team, pools, margent, ctx.params.data.dataset, progress=ctx.progress)
    write_parquet_atomic(got.collection, out / "collection.parquet")
    write_parquet_atomic(got.trees, out / "trees.parquet")
    write_parquet_atomic(got.views, out / "views.parquet")

    seconds = sum(s.seconds for s in got.stats.values())
    branches = sum(s.branches for s in got.stats.values())
    c = got.stats["collection"]
    metrics = {
        "team": margent.team,
        "items": {name: len(getattr(pools, name)) for name in study.POOLS},
        "collection": {
            "branches": c.branches, "errors": c.errors, "cost_usd": round(c.cost_usd, 6), "seconds": round(c.seconds, 3),
            "branches_per_s": round(c.branches / c.seconds, 1) if c.seconds else None,
            "consult_calls": c.consult_calls, "revise_calls": c.revise_calls,
            "root_accuracy": float(got.collection.filter(pl.col("depth") == 0)["correct"].mean()),
        },
        "all_trees": {"branches": branches, "seconds": round(seconds, 3), "branches_per_s": round(branches / seconds, 1) if seconds else None,
                      "errors": sum(s.errors for s in got.stats.values())},
        "backend_calls": team.backend_calls,
    }
    write_json_atomic(metrics, ctx.layout.metrics("margent_collect"))
    write_json_atomic({"solver_set": study.solver_set(margent), "dataset": ctx.params.data.dataset, "pool": margent.subagents,
                       "depth": margent.collect.depth, "team": margent.team}, out / "collect.json")
    with ctx.tracker.stage_run("margent", "margent_collect", margent) as run:
        with run.child("collection", margent.collect.seed, params=margent.collect) as child:
            child.log_metrics({"collect": {k: v for k, v in metrics["collection"].items() if not isinstance(v, dict)},
                               "all_trees": metrics["all_trees"], "backend_calls": team.backend_calls})
    print(
        f"margent_collect: {c.branches} branches from {len(pools.collection)} roots ({c.errors} error branches), "
        f"{branches} in all with the dev/test trees; {metrics['all_trees']['branches_per_s']} branches/s; "
        f"{team.backend_calls} backend calls"
    )


if __name__ == "__main__":
    run_stage("margent_collect", collect, section="margent")
