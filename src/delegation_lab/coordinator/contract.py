"""The coordinator study behind the one study contract (`pipeline.study`): the DQN coordinator
under management and delegation rules, its baselines, held-out evaluation, plots, trajectories,
summaries, outcomes and a child run per method x seed, written by a background process while the
next method trains (the lanes' per-episode curves are most of the stage's SQLite work)."""

from __future__ import annotations

from typing import Any

from delegation_lab.coordinator.mlflow_log import child_runs
from delegation_lab.coordinator.plots import write_figures
from delegation_lab.coordinator.report import coordinator_metrics, report_lines, timing
from delegation_lab.coordinator.results import outcome_frame, summary_rows, trajectory_parts
from delegation_lab.coordinator.study import CoordinatorStudy as Trainer
from delegation_lab.coordinator.study import prepare_inputs
from delegation_lab.evaluation.verifier import build_verifier
from delegation_lab.pipeline.study import StudyContext, StudyResult, Written
from delegation_lab.pipeline.stage import StageContext
from delegation_lab.tracking.tracker import metric_names


class CoordinatorStudy:
    name = stage = "coordinator"

    def params(self, ctx: StageContext) -> Any:
        return ctx.params.coordinator

    def background_children(self, ctx: StageContext) -> bool:
        return True

    def run(self, ctx: StudyContext) -> StudyResult:
        params, dataset = ctx.params.coordinator, ctx.params.data.dataset
        with ctx.phase("load"):
            layout, data = prepare_inputs(params, list(ctx.params.solvers), ctx.params.ability_map.bucket_edges,
                                          ctx.layout, ctx.params.ability_map.bucket_by)
            verifier = build_verifier(ctx.params.evaluation.verifier, ctx.layout.root)
        with ctx.phase("train_and_evaluate"):  # its DQN batches are phases dqn_batch_<environment>
            trainer = Trainer(params, data, layout, progress=ctx.progress, verifier=verifier, phases=ctx.phases,
                              on_run=lambda run: ctx.children.submit(child_runs(run, params)))
            runs = trainer.run()
        with ctx.phase("trajectories"):
            metrics = coordinator_metrics(runs, params, data, layout, verifier, ctx.params.evaluation.intervals,
                                          dataset, str(trainer.device), ctx.params.evaluation.ties)

        def finish(written: Written) -> None:
            metrics["timing"] = timing(ctx.phases, written.trajectory_rows)

        return StudyResult(
            metrics=metrics, parent_metrics=metric_names(metrics), log_metrics_file=False,
            trajectories=trajectory_parts(runs, params.episodes) if params.trajectories else (), flush_rows=50_000,
            figures=lambda: write_figures(runs, ctx.layout.plots(self.name), params.packet_size),
            summaries=lambda ids: summary_rows(runs, params.late_episodes, params.packet_size, dataset, ids,
                                               verifier.name),
            outcomes=outcome_frame(runs, dataset, verifier.name), finish=finish,
            report=lambda m: "\n".join(report_lines(m)),
            phase_names={"plots": "summaries_and_plots", "summaries": "summaries_and_plots"},
        )
