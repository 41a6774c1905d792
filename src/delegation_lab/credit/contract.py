"""The credit study (SHARP, seed 002) behind the one study contract (`pipeline.study`): every method
and the p-sweep, held-out evaluation, the long run, summaries, outcomes, trajectories with per-agent
credit per step, the `dlab credit` replay check of the written trajectories, plots and a child run
per method x seed (logged as each method finishes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polars as pl

from delegation_lab.credit.mlflow_log import child_runs
from delegation_lab.credit.plots import write_figures
from delegation_lab.credit.replay_check import replay_check
from delegation_lab.credit.report import (
    long_run_metrics,
    operating_point,
    outcome_rows,
    study_metrics,
    summary_rows,
    test_frames,
    train_frames,
)
from delegation_lab.credit.run_report import report_lines, setup_block, timing
from delegation_lab.credit.study import StudyOutcome, run_study
from delegation_lab.pipeline.study import StudyContext, StudyResult, Written
from delegation_lab.pipeline.stage import StageContext
from delegation_lab.pipeline.torch_runtime import resolve_device
from delegation_lab.tracking.tracker import metric_names


def trajectories(study: StudyOutcome, params: Any) -> Iterator[tuple[str, int, pl.DataFrame, tuple[str, str]]]:
    for m in study.methods:
        frames = test_frames(m, study) if params.trajectories.test else []
        frames += train_frames(m, study) if params.trajectories.train_every else []
        for seed, frame in frames:
            yield m.spec.name, seed, frame, (m.spec.name, operating_point(m))


class CreditStudy:
    name = stage = "credit"

    def params(self, ctx: StageContext) -> Any:
        return ctx.params.credit

    def background_children(self, ctx: StageContext) -> bool:
        return False

    def run(self, ctx: StudyContext) -> StudyResult:
        params, intervals = ctx.params.credit, ctx.params.evaluation.intervals
        resolve_device(params.device, "credit.device")  # a bad device fails before any work
        with ctx.phase("train_and_evaluate"):
            study = run_study(params, progress=ctx.progress, on_method=lambda m: ctx.children.submit(child_runs(m, params)))
            metrics = study_metrics(study, intervals)
        if params.long_run.iterations_factor:
            with ctx.phase("long_run"):
                metrics["long_run"] = long_run_metrics(params, intervals)
        metrics["setup"] = setup_block(params, study)

        def finish(written: Written) -> None:
            with ctx.phase("replay"):  # the `dlab credit` replay of the held-out rollouts, against the in-place credit
                metrics["replay"] = {}
                if params.trajectories.test and any(m.spec.team for m in study.methods):
                    metrics["replay"], line = replay_check(ctx.layout, self.name, study, ctx.args.params)
                    print(line)
            metrics["timing"] = timing(ctx.phases, written.trajectory_rows)

        return StudyResult(
            metrics=metrics, parent_metrics=metric_names(metrics), log_metrics_file=False,
            trajectories=trajectories(study, params), figures=lambda: write_figures(study, ctx.layout.plots(self.name)),
            summaries=lambda ids: summary_rows(study, ids), outcomes=outcome_rows(study), finish=finish,
            report=lambda m: "\n".join(report_lines(m, study)),
        )
