"""The market study (sequential auctions, seed 004) behind the one study contract
(`pipeline.study`): the chain-translation density sweep and the market over the cached solver
answers; a child run per cell x seed, logged as each market's result arrives (with workers, while
the other markets still run)."""

from __future__ import annotations

from typing import Any

import polars as pl

from delegation_lab.market.inputs import load_inputs
from delegation_lab.market.mlflow_log import child_runs
from delegation_lab.market.plots import write_figures
from delegation_lab.market.report import market_metrics, outcome_rows, summary_line, summary_rows
from delegation_lab.market.study import SweepResult, progress_bars, run_study
from delegation_lab.pipeline.study import StudyContext, StudyResult, Written
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA
from delegation_lab.pipeline.stage import StageContext


class MarketStudy:
    name = stage = "market"

    def params(self, ctx: StageContext) -> Any:
        return ctx.params.market

    def background_children(self, ctx: StageContext) -> bool:
        return False

    def run(self, ctx: StudyContext) -> StudyResult:
        params, layout, dataset = ctx.params.market, ctx.layout, ctx.params.data.dataset
        inputs = load_inputs(params, list(ctx.params.solvers), ctx.params.evaluation.verifier, layout)

        def log_part(part: SweepResult) -> None:  # with workers, while the other markets still run
            with ctx.phase("mlflow_children"):
                ctx.children.submit(child_runs(part.worlds))

        chain, answers, seconds = run_study(params, inputs, ctx.phases, log_part, progress_bars(ctx.progress))
        metrics: dict[str, Any] = {}
        parent_metrics: dict[str, Any] = {"run/seconds": seconds}

        def finish(written: Written) -> None:
            metrics.update(market_metrics(chain, answers, params, inputs, ctx.params.evaluation.intervals, seconds,
                                          written.trajectory_rows))
            parent_metrics["run/trajectory_rows"] = written.trajectory_rows

        return StudyResult(
            metrics=metrics, parent_metrics=parent_metrics, finish=finish,
            trajectories=((m, s, f, answers.points.get(m)) for (m, s), f in {**chain.trajectories, **answers.trajectories}.items()),
            summaries=lambda ids: (summary_rows(answers.worlds, ids, dataset, inputs.solvers) if answers.worlds
                                   else pl.DataFrame(schema=SUMMARY_SCHEMA)),
            outcomes=outcome_rows(answers.worlds, dataset),
            figures=lambda: write_figures(chain, answers, layout.plots(self.name), params, inputs.matrices,
                                          inputs.solvers),
            report=lambda m: summary_line(m, seconds),
        )
