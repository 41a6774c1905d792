"""Stage `market`: decentralized delegation through sequential auctions (seed 004).

Domain 1, the chain-translation density sweep (N x protocol x bidder, seeds batched), and domain 2,
a market over the cached solver answers (train split to learn, test split for the frontier).
Writes metrics/market.json (ours beside the paper's claims), plots/market/, the trajectories (every
auction a row), results/summaries/market.parquet, and an MLflow experiment `market` with one child
run per cell x seed.
"""

from __future__ import annotations

import polars as pl

from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.market.inputs import load_inputs
from delegation_lab.market.mlflow_log import log_children
from delegation_lab.market.plots import write_figures
from delegation_lab.market.report import (
    market_metrics,
    outcome_rows,
    summary_line,
    summary_rows,
)
from delegation_lab.market.study import SweepResult, progress_bars, run_study
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.store import TrajectoryWriter, write_summaries
from delegation_lab.pipeline.tables import write_json_atomic

STUDY = "market"


def market(ctx: StageContext) -> None:
    """Run both sweeps and write every output."""
    params, layout, dataset = ctx.params.market, ctx.layout, ctx.params.data.dataset
    inputs = load_inputs(params, list(ctx.params.solvers), ctx.params.evaluation.verifier, layout)
    with ctx.tracker.stage_run(STUDY, STUDY, params) as run:
        run_ids: dict[tuple[str, int], str | None] = {}

        def log_part(part: SweepResult) -> None:  # with workers, while the other markets still run
            with ctx.phase("mlflow_children"):
                run_ids.update(log_children(run, part.worlds))

        chain, answers, seconds = run_study(params, inputs, ctx.phases, log_part, progress_bars(ctx.progress))
        with ctx.phase("trajectories"), TrajectoryWriter(layout, STUDY) as writer:
            for (method, seed), frame in {**chain.trajectories, **answers.trajectories}.items():
                writer.add(method, seed, frame)
        summaries = (summary_rows(answers.worlds, run_ids, dataset, inputs.solvers) if answers.worlds
                     else pl.DataFrame(schema=SUMMARY_SCHEMA))
        write_summaries(layout, STUDY, summaries)
        write_outcomes(layout, STUDY, outcome_rows(answers.worlds, dataset))
        metrics = market_metrics(chain, answers, params, inputs, ctx.params.evaluation.intervals, seconds,
                                 writer.rows_written)
        write_json_atomic(metrics, layout.metrics(STUDY))
        for picture in write_figures(chain, answers, layout.plots(STUDY), params, inputs.matrices, inputs.solvers):
            run.log_artifact(picture)
        run.log_artifact(layout.metrics(STUDY))
        run.log_metrics({"run/seconds": seconds, "run/trajectory_rows": writer.rows_written})
    print(summary_line(metrics, seconds))


if __name__ == "__main__":
    run_stage(STUDY, market)
