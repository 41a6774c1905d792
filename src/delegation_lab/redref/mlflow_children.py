"""The stage's MLflow child runs (method x seed) as `ChildRun` records, written by the one child-run
writer (`pipeline.study.ChildRunWriter`; in a worker process when `redref.workers` > 1) beside the
trajectory writing instead of after it: it is most of the stage's SQLite work."""

from __future__ import annotations

from typing import Any

import polars as pl

from delegation_lab.pipeline.study import ChildRun as Child
from delegation_lab.redref.engine import SequenceOutcome
from delegation_lab.redref.params import RedrefParams


def _seed_series(out: SequenceOutcome, s: int) -> dict[str, list[float]]:
    return {"task/success": out.success[s].astype(float).tolist(), "task/calls": out.calls[s].tolist(),
            "task/tokens": out.tokens[s].tolist(), "task/quality": out.quality[s].tolist()}


def rq_children(rq1_out: dict[str, SequenceOutcome], rq2_out: dict[str, SequenceOutcome], rq3_out: dict[str, SequenceOutcome],
                noise: dict[str, Any], params: RedrefParams) -> list[Child]:
    """The child runs of RQ1-RQ3 (REDEREF and random per seed; ablations are parent metrics) and the
    judge-noise sweep."""
    children = []
    logged = {"rq1": ("redref", "random"), "rq2": ("redref", "random"), "rq3": ("redref",)}
    for tag, outcomes in (("rq1", rq1_out), ("rq2", rq2_out), ("rq3", rq3_out)):
        for method in logged[tag]:
            out = outcomes[method]
            for s in range(out.success.shape[0]):
                # per-task curves (step = task) and the seed's means (step 0), in one batch
                children.append(Child(f"{tag}.{method}", s, params={"experiment": tag, "method": method}, series=[{
                    **_seed_series(out, s), "eval/success": [float(out.success[s].mean())],
                    "eval/calls": [float(out.calls[s].mean())], "eval/tokens": [float(out.tokens[s].mean())],
                    "eval/quality": [float(out.quality[s].mean())]}]))
    children.append(Child("judge_noise", None, params=params.judge_noise, metrics=[
        {f"regret/delta_{k}": v["regret"] for k, v in noise["by_delta"].items()}, {"regret/loglog_slope": noise["loglog_slope"]}]))
    return children


def cached_children(summary_rows: list[dict]) -> list[Child]:
    """One child run per cached method x seed, its operating points as metrics (run ids go into the summaries)."""
    children = []
    if not summary_rows:
        return children
    for (method, seed), part in pl.DataFrame(summary_rows).partition_by(["method", "seed"], as_dict=True).items():
        children.append(Child(f"cached.{method}", seed, params={"experiment": "cached", "method": method}, metrics=[{
            f"{r['operating_point'].replace('B=', 'b')}/{key}": r[col]
            for r in part.iter_rows(named=True)
            for key, col in (("eval/accuracy", "accuracy"), ("cost/per_item_usd", "cost_per_item_usd"),
                             ("eval/calls_per_item", "calls_per_item"))
        }], key=(method, seed)))
    return children
