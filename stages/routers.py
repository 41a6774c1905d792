"""Stage `routers`: the field's standard routers (kNN, MLP, MF, cluster, threshold, learned cascade,
best single, random) fitted on the train split's labels and costs, calibrated on a dev split
carved from train, evaluated once on test. Writes metrics/routers.json, plots/routers/points.csv,
trajectories, results/summaries/routers.parquet, results/outcomes/routers.parquet and one saved
model per router in models/routers/ (`dlab route`); logs MLflow experiment `routers`."""

from __future__ import annotations

import json
import time

import polars as pl

from delegation_lab.evaluation import build_verifier
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.routers.artifact import save_router
from delegation_lab.routers.report import study_metrics
from delegation_lab.routers.study import (
    STUDY,
    load_routing_data,
    method_slug,
    outcome_frame,
    run_study,
    summary_rows,
    trajectory_frame,
)
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.store import TrajectoryWriter, write_summaries
from delegation_lab.pipeline.tables import write_csv_atomic, write_json_atomic


def routers(ctx: StageContext) -> None:
    """Fit, calibrate and evaluate every router; write the study's outputs."""
    start = time.perf_counter()
    params = ctx.params.routers
    layout = ctx.layout
    verifier = build_verifier(ctx.params.evaluation.verifier, layout.root)
    with ctx.phase("load"):
        data = load_routing_data(layout, list(ctx.params.solvers), params)
    with ctx.phase("fit and evaluate"):
        run = run_study(data, params, verifier, progress=True)
    dataset = ctx.params.data.dataset
    embed_path = layout.metrics("embed")
    embed_metrics = json.loads(embed_path.read_text()) if embed_path.exists() else {}
    embedder = {"name": data.embedder, "fallback": data.embedder != "all-MiniLM-L6-v2",
                "requested": embed_metrics.get("requested")}
    metrics = study_metrics(run, ctx.params.evaluation.intervals, verifier.describe(), embedder)

    with ctx.phase("trajectories"), TrajectoryWriter(layout, STUDY) as writer:
        for p in run.points:
            if p.split == "test":
                writer.add(method_slug(p.router, p.operating_point), p.seed, trajectory_frame(run, p))

    run_ids: dict[tuple[str, int], str | None] = {}
    with ctx.phase("tracking and outputs"), ctx.tracker.stage_run(STUDY, STUDY, params) as parent:
        parent.set_tags({"embedding": data.embedder, "verifier": verifier.name})
        rows = pl.DataFrame(summary_rows(run, dataset, verifier.name))
        for (method, seed), part in rows.partition_by(["method", "seed"], as_dict=True).items():
            with parent.child(method, seed, params=getattr(params, method, None) or {"router": method}) as child:
                child.log_metrics({
                    f"{r['operating_point'].replace('=', '_')}/{key}": r[col] for r in part.iter_rows(named=True)
                    for key, col in (("eval/accuracy", "accuracy"), ("cost/per_item_usd", "cost_per_item_usd"),
                                     ("eval/calls_per_item", "calls_per_item"))
                })
                child.log_metrics({"train/fit_seconds": run.fit_seconds[method]})
                run_ids[(method, seed)] = child.run_id
        write_summaries(layout, STUDY, summary_rows(run, dataset, verifier.name, run_ids))
        write_outcomes(layout, STUDY, outcome_frame(run, dataset, verifier.name))
        for name, router in run.fitted.items():
            path = save_router(router, layout.router(name), data.embedder, params)
            parent.log_artifact(path, "models")
        points = pl.DataFrame([{"router": n, **{k: v for k, v in o.items() if not isinstance(v, list)}}
                               for n, r in metrics["routers"].items() for o in r["operating_points"]])
        write_csv_atomic(points, layout.plots(STUDY) / "points.csv")
        metrics["runtime_s"] = round(time.perf_counter() - start, 1)
        write_json_atomic(metrics, layout.metrics(STUDY))
        parent.log_artifact(layout.metrics(STUDY))
    best = ", ".join(f"{n} {r['best_accuracy']:.3f}" for n, r in metrics["routers"].items())
    print(f"routers: done in {metrics['runtime_s']} s ({data.embedder}); best accuracy: {best}")


if __name__ == "__main__":
    run_stage(STUDY, routers)
