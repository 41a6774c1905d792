"""Stage `redref`: REDEREF (seed 003) — RQ1 efficiency, RQ2 specialization, RQ3 impairment, the
judge-noise sweep (Theorem 3.1), and Thompson-sampling delegation on the cached solver answers
(summary rows for the frontier; the shared `evaluation.verifier` judges every cached answer). Writes
metrics/redref.json, plots/redref/, trajectories, results/summaries/redref.parquet and the item-level
results/outcomes/redref.parquet; logs MLflow experiment `redref`. The study is `redref.study`."""

from __future__ import annotations

from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.redref import plots
from delegation_lab.redref.study import STUDY, run_study
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.store import TrajectoryWriter, write_summaries
from delegation_lab.pipeline.tables import write_json_atomic


def redref(ctx: StageContext) -> None:
    """Run every REDEREF experiment and write the study's outputs."""
    layout = ctx.layout
    with run_study(ctx.params, layout, ctx.tracker, ctx.phase) as study:
        # the MLflow child runs are written by a worker meanwhile; the summaries wait for their ids
        with ctx.phase("write trajectories"), TrajectoryWriter(layout, STUDY) as writer:
            for method, seed, steps in study.trajectories:
                writer.add(method, seed, steps)
        with ctx.phase("plots"):
            plots.write_figures(layout.plots(STUDY), study.frames, study.singles, ctx.params.redref)
        with ctx.phase("MLflow runs and summaries"):
            write_summaries(layout, STUDY, study.summaries())
            write_outcomes(layout, STUDY, study.outcomes)
            write_json_atomic(study.metrics, layout.metrics(STUDY))
            study.log_artifacts(layout)
    print(f"redref: done ({study.embedder} embeddings; seconds per phase in {layout.timings(STUDY)})")


if __name__ == "__main__":
    run_stage(STUDY, redref)
