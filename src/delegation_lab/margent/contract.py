"""The MARGENT evaluation (stage `margent_eval`) behind the one study contract (`pipeline.study`):
the paper's tables and diagnostics, every ρ operating point, the baselines and the oracle on
collection-disjoint test items, from what `margent_collect` and `margent_train` wrote; a child run
per method x operating point x seed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.evaluation.verifier import build_verifier
from delegation_lab.margent import report, study
from delegation_lab.pipeline.study import ChildRun, StudyContext, StudyResult
from delegation_lab.pipeline.stage import StageContext
from delegation_lab.pipeline.tables import read_table, write_csv_atomic


def replicated(ctx: StageContext, metrics: dict) -> dict:
    """Tables 1-3 over further simulator seeds (with intervals) and under the sensitivity settings."""
    from delegation_lab.margent import replicates
    from delegation_lab.margent.sensitivity import variants

    margent = ctx.params.margent
    pools = study.sample_pools(read_table(ctx.layout.items("train"), "train items"),
                               read_table(ctx.layout.items("test"), "test items"), margent.collect)
    own = replicates.figures(metrics, tuple(margent.subagents))
    out = {}
    if margent.eval.simulator_seeds:
        out["simulator_seeds"] = replicates.over_seeds(ctx.params, pools, own, margent.eval.simulator_seeds)
    if margent.eval.sensitivity:
        out["sensitivity"] = replicates.under_settings(ctx.params, pools, own, variants(margent.simulator))
    return out


def child_runs(methods: list) -> list[ChildRun]:
    """One child per method x seed at its operating point, keyed (method, operating point, seed)."""
    return [ChildRun(m.name, seed, params={"operating_point": m.operating_point}, tags={"operating_point": m.operating_point},
                     metrics=[{"eval/accuracy": row["accuracy"], "eval/calls": row["calls"], "eval/call_gap": row["call_gap"],
                               "eval/candidate_accuracy": row["candidate_accuracy"], "cost/per_item_usd": row["cost_per_item_usd"]}],
                     key=(m.name, m.operating_point, seed))
            for m in methods for seed, row in zip(m.seeds, m.rows, strict=True)]


def report_line(metrics: dict, subagents: list[str]) -> str:
    t1, ev = metrics["table1"], metrics["eval"]
    return (f"margent_eval: A0 {t1['A0']:.1f} A1 {t1['A1']:.1f} AD {t1['AD']:.1f} Gain@1 {t1['gain_at_1'] or float('nan'):.1f} %; "
            f"net value " + ", ".join(f"{a} {metrics['table2'][a]:+.1f}" for a in subagents)
            + f"; selected ρ={ev['rho']}: {ev['candidate_accuracy']:.1f} -> {ev['accuracy']:.1f} % at {ev['calls']:.2f} calls")


class MargentStudy:
    name, stage = "margent", "margent_eval"

    def params(self, ctx: StageContext) -> Any:
        return {"eval": ctx.params.margent.eval}

    def background_children(self, ctx: StageContext) -> bool:
        return False

    def run(self, ctx: StudyContext) -> StudyResult:
        margent, layout = ctx.params.margent, ctx.layout
        out = layout.study_results("margent")
        collection = read_table(out / "collection.parquet", "MARGENT collection")
        trees = read_table(out / "trees.parquet", "MARGENT evaluation trees")
        meta = json.loads((out / "collect.json").read_text())
        net, grid, _ = study.load_managers(out / "managers.pt")
        if meta["pool"] != list(margent.subagents):
            raise InputError(f"{out}/collect.json: collected with pool {meta['pool']}, params say {margent.subagents}; rerun margent_collect")
        # no MARGENT method consults a verifier; its rows carry the shared one's name (see report.summary_rows)
        verifier = build_verifier(ctx.params.evaluation.verifier, layout.root)
        got = study.evaluate_all(collection, trees, net, grid, margent, ctx.params.evaluation.intervals)
        metrics = {**got.metrics, "dataset": meta["dataset"], "team": meta["team"],
                   "verifier": verifier.describe() | {"used_for_acceptance": False}}
        if margent.team == "simulated" and (margent.eval.simulator_seeds or margent.eval.sensitivity):
            with ctx.phase("replicates"):
                metrics.update(replicated(ctx.stage, got.metrics))

        def trajectories() -> Iterator[tuple[str, int, pl.DataFrame, tuple[str, str] | None]]:
            yield "collection", margent.collect.seed, report.collection_rows(collection)
            for method in got.methods:
                name = method.name if method.name != "margent" else f"margent-{method.operating_point.replace('=', '')}"
                point = None if method.name == report.ORACLE else (method.name, method.operating_point)  # no summary row
                for k, seed in enumerate(method.seeds):
                    yield name, seed, report.walk_rows(got.test, method, k), point

        def figures() -> list[Path]:
            from delegation_lab.margent.analysis import by_difficulty

            plots = layout.plots(self.name)
            write_csv_atomic(report.operating_points(metrics), plots / "operating_points.csv")
            write_csv_atomic(got.by_rho, plots / "rho_seeds.csv")
            write_csv_atomic(report.table1_frame(metrics), plots / "table1.csv")
            write_csv_atomic(report.table2_frame(metrics), plots / "table2.csv")
            write_csv_atomic(by_difficulty(collection, margent.eval.confidence), plots / "rescue_by_difficulty.csv")
            return [report.plot_overview(metrics, plots / "margent.png")]

        return StudyResult(
            metrics=metrics, children=child_runs(got.methods), trajectories=trajectories(), figures=figures,
            parent_metrics={"table1": metrics["table1"], "table2": metrics["table2"], "eval": metrics["eval"]},
            summaries=lambda ids: report.summary_rows(got.methods, meta["dataset"], meta["solver_set"], ids, verifier.name),
            outcomes=report.outcome_rows(got.methods, got.test.item_ids, meta["dataset"], verifier.name),
            report=lambda m: report_line(m, margent.subagents),
        )
