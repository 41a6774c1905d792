"""The routers study behind the one study contract (`pipeline.study`): the field's standard routers
fitted on the train split, calibrated on a dev split carved from it, evaluated once on test; one
saved model per router (`dlab route`) and a child run per router x seed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.evaluation import build_verifier
from delegation_lab.pipeline.study import ChildRun, StudyContext, StudyResult, Written
from delegation_lab.routers.artifact import save_router
from delegation_lab.routers.report import study_metrics
from delegation_lab.routers.study import (
    STUDY,
    StudyRun,
    load_routing_data,
    method_slug,
    outcome_frame,
    run_study,
    summary_rows,
    trajectory_frame,
)
from delegation_lab.pipeline.stage import StageContext
from delegation_lab.pipeline.tables import write_csv_atomic


def child_runs(run: StudyRun, params: Any, dataset: str, verifier: str) -> list[ChildRun]:
    """One child per router x seed: every operating point's figures and the fit time, keyed (router, seed)."""
    rows = pl.DataFrame(summary_rows(run, dataset, verifier))
    return [ChildRun(method, seed, params=getattr(params, method, None) or {"router": method}, key=(method, seed), metrics=[
        {f"{r['operating_point'].replace('=', '_')}/{key}": r[col] for r in part.iter_rows(named=True)
         for key, col in (("eval/accuracy", "accuracy"), ("cost/per_item_usd", "cost_per_item_usd"),
                          ("eval/calls_per_item", "calls_per_item"))},
        {"train/fit_seconds": run.fit_seconds[method]}])
        for (method, seed), part in rows.partition_by(["method", "seed"], as_dict=True).items()]


class RoutersStudy:
    name = stage = STUDY

    def params(self, ctx: StageContext) -> Any:
        return ctx.params.routers

    def background_children(self, ctx: StageContext) -> bool:
        return False

    def run(self, ctx: StudyContext) -> StudyResult:
        start = time.perf_counter()
        params, layout, dataset = ctx.params.routers, ctx.layout, ctx.params.data.dataset
        verifier = build_verifier(ctx.params.evaluation.verifier, layout.root)
        with ctx.phase("load"):
            data = load_routing_data(layout, list(ctx.params.solvers), params, ctx.params.evaluation.verifier.models)
        with ctx.phase("fit and evaluate"):
            run = run_study(data, params, verifier, progress=True)
        embed_path = layout.metrics("embed")
        embed_metrics = json.loads(embed_path.read_text()) if embed_path.exists() else {}
        embedder = {"name": data.embedder, "fallback": data.embedder != "all-MiniLM-L6-v2",
                    "requested": embed_metrics.get("requested")}
        metrics = study_metrics(run, ctx.params.evaluation.intervals, verifier.describe(), embedder)

        def files() -> list[tuple[Path, str]]:
            models = [(save_router(router, layout.router(name), data.embedder, params), "models")
                      for name, router in run.fitted.items()]
            points = pl.DataFrame([{"router": n, **{k: v for k, v in o.items() if not isinstance(v, list)}}
                                   for n, r in metrics["routers"].items() for o in r["operating_points"]])
            write_csv_atomic(points, layout.plots(STUDY) / "points.csv")
            return models

        def finish(written: Written) -> None:
            metrics["runtime_s"] = round(time.perf_counter() - start, 1)

        def report(m: dict) -> str:
            best = ", ".join(f"{n} {r['best_accuracy']:.3f}" for n, r in m["routers"].items())
            return f"routers: done in {m['runtime_s']} s ({data.embedder}); best accuracy: {best}"

        return StudyResult(
            metrics=metrics, parent_tags={"embedding": data.embedder, "verifier": verifier.name},
            children=child_runs(run, params, dataset, verifier.name),
            trajectories=((method_slug(p.router, p.operating_point), p.seed, trajectory_frame(run, p), (p.router, p.operating_point))
                          for p in run.points if p.split == "test"),
            figures=files, summaries=lambda ids: summary_rows(run, dataset, verifier.name, ids),
            outcomes=outcome_frame(run, dataset, verifier.name), finish=finish, report=report,
        )
