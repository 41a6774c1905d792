"""Stage `credit`: SHARP (seed 002) on a simulated planner-worker tool-use task — the single agent,
broadcast reward (MATPO-like), SHARP and its ablations (no Shapley, planner-only, worker-only
credit) and the p-sweep, every seed batched; held-out evaluation on common draws; metrics with the
paper's figures beside ours, summaries, trajectories with per-agent credit per step, the credit
table of the held-out rollouts (the `dlab credit` replay), plots, and the MLflow experiment `credit`."""

from __future__ import annotations

import numpy as np

from delegation_lab.credit.mlflow_log import log_method
from delegation_lab.credit.plots import write_figures
from delegation_lab.credit.replay_check import replay_check
from delegation_lab.credit.report import (
    long_run_metrics,
    outcome_rows,
    study_metrics,
    summary_rows,
    test_frames,
    train_frames,
)
from delegation_lab.credit.run_report import report_lines, setup_block, timing
from delegation_lab.credit.study import MethodOutcome, run_study
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.store import TrajectoryWriter, write_summaries
from delegation_lab.pipeline.tables import write_json_atomic
from delegation_lab.pipeline.torch_runtime import resolve_device
from delegation_lab.tracking.tracker import metric_names

STUDY = "credit"


def credit(ctx: StageContext) -> None:
    """Train, evaluate and report the credit study."""
    params, intervals = ctx.params.credit, ctx.params.evaluation.intervals
    resolve_device(params.device, "credit.device")  # a bad device fails before any work
    run_ids: dict[tuple[str, int], str | None] = {}
    with ctx.tracker.stage_run(STUDY, STUDY, params) as parent:

        def logged(m: MethodOutcome) -> None:  # each method's MLflow children as it arrives
            run_ids.update(log_method(parent, m, params))

        with ctx.phase("train_and_evaluate"):
            study = run_study(params, progress=ctx.progress, on_method=logged)
            metrics = study_metrics(study, intervals)
        if params.long_run.iterations_factor:
            with ctx.phase("long_run"):
                metrics["long_run"] = long_run_metrics(params, intervals)
        metrics["setup"] = setup_block(params, study)
        parent.log_metrics(metric_names(metrics))

    with ctx.phase("trajectories"):
        write_summaries(ctx.layout, STUDY, summary_rows(study, run_ids))
        write_outcomes(ctx.layout, STUDY, outcome_rows(study))
        rows = 0
        with TrajectoryWriter(ctx.layout, STUDY) as writer:
            for m in study.methods:
                frames = test_frames(m, study) if params.trajectories.test else []
                frames += train_frames(m, study) if params.trajectories.train_every else []
                for seed, frame in frames:
                    writer.add(m.spec.name, seed, frame)
                    rows += frame.height
    with ctx.phase("replay"):  # the `dlab credit` replay of the held-out rollouts, against the in-place credit
        metrics["replay"] = {}
        if params.trajectories.test and any(m.spec.team for m in study.methods):
            metrics["replay"], line = replay_check(ctx.layout, STUDY, study, ctx.args.params)
            print(line)
    with ctx.phase("plots"):
        write_figures(study, ctx.layout.plots(STUDY))
    metrics["timing"] = timing(ctx.phases, rows)
    write_json_atomic(metrics, ctx.layout.metrics(STUDY))
    print("\n".join(report_lines(metrics, study)))


if __name__ == "__main__":
    np.seterr(divide="ignore", invalid="ignore")
    run_stage(STUDY, credit)
