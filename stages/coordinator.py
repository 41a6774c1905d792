"""Stage `coordinator`: the DQN coordinator under management and delegation rules (History Matters
§3.1-3.2) on the cached answers — every seed batched — against always-A, every fixed order, random,
the oracle and the frozen management policy, every accept / retry decision by the shared verifier
(`evaluation.verifier`); held-out evaluation with item-level intervals, a cost-weight sweep, metrics,
plots, trajectories, summaries and item-level outcomes for the frontier, and an MLflow child run per
method x seed."""

import numpy as np

from delegation_lab.coordinator.mlflow_log import BackgroundMlflow
from delegation_lab.coordinator.plots import write_figures
from delegation_lab.coordinator.report import coordinator_metrics, report_lines, timing
from delegation_lab.coordinator.results import (
    outcome_frame,
    summary_rows,
    trajectory_parts,
)
from delegation_lab.coordinator.study import CoordinatorStudy, prepare_inputs
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.evaluation.verifier import build_verifier
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.store import TrajectoryWriter, write_summaries
from delegation_lab.pipeline.tables import write_json_atomic
from delegation_lab.tracking.tracker import metric_names

STUDY = "coordinator"


def coordinator(ctx: StageContext) -> None:
    """Train, evaluate and report the coordinator study."""
    params, dataset = ctx.params.coordinator, ctx.params.data.dataset
    with ctx.phase("load"):
        layout, data = prepare_inputs(params, list(ctx.params.solvers), ctx.params.ability_map.bucket_edges, ctx.layout,
                                      ctx.params.ability_map.bucket_by)
        verifier = build_verifier(ctx.params.evaluation.verifier, ctx.layout.root)
    # MLflow (a child run per method x seed, per cost weight in the sweep, with per-episode curves)
    # is written by a background process while the next method trains; a failure marks its run FAILED.
    with BackgroundMlflow(ctx.params.tracking, ctx.tracker.root, STUDY, params) as mlflow:
        with ctx.phase("train_and_evaluate"):  # its DQN batches are phases dqn_batch_<environment>
            study = CoordinatorStudy(params, data, layout, progress=ctx.progress, on_run=mlflow.submit,
                                     verifier=verifier, phases=ctx.phases)
            runs = study.run()
        # trajectories while the MLflow process logs the last child runs (it lags the training)
        with ctx.phase("trajectories"):
            metrics = coordinator_metrics(runs, params, data, layout, verifier, ctx.params.evaluation.intervals,
                                          dataset, str(study.device))
            mlflow.parent_metrics(metric_names(metrics))
            rows = 0
            if params.trajectories:
                with TrajectoryWriter(ctx.layout, STUDY, flush_rows=50_000) as writer:
                    for method, seed, frame in trajectory_parts(runs, params.episodes):
                        writer.add(method, seed, frame)
                        rows += frame.height
        with ctx.phase("mlflow_wait"):
            run_ids = mlflow.close()

    with ctx.phase("summaries_and_plots"):
        write_summaries(ctx.layout, STUDY, summary_rows(runs, params.late_episodes, params.packet_size, dataset,
                                                        run_ids, verifier.name))
        write_outcomes(ctx.layout, STUDY, outcome_frame(runs, dataset, verifier.name))
        write_figures(runs, ctx.layout.plots(STUDY), params.packet_size)
    metrics["timing"] = timing(ctx.phases, rows)
    write_json_atomic(metrics, ctx.layout.metrics(STUDY))
    print("\n".join(report_lines(metrics)))


if __name__ == "__main__":
    np.seterr(divide="ignore", invalid="ignore")
    run_stage(STUDY, coordinator)
