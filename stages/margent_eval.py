"""Stage `margent_eval`: the paper's tables and diagnostics, every ρ operating point, the baselines
and the oracle on collection-disjoint test items; trajectories, summaries, metrics and plots."""

from __future__ import annotations

import json

from delegation_lab.errors import InputError
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.evaluation.verifier import build_verifier
from delegation_lab.margent import report, study
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.skip import skip_reason, skip_stage
from delegation_lab.pipeline.store import TrajectoryWriter, write_summaries
from delegation_lab.pipeline.tables import read_table, write_csv_atomic, write_json_atomic


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


def evaluate(ctx: StageContext) -> None:
    """Write metrics/margent.json, plots/margent/, the margent trajectories and summaries."""
    margent = ctx.params.margent
    layout = ctx.layout
    out = layout.study_results("margent")
    reason = skip_reason(out / "collect.json")
    if reason:  # margent_collect skipped: no trees to evaluate, no summary rows for the frontier
        skip_stage(layout, "margent_eval", reason, extra={"dataset": ctx.params.data.dataset})
        return
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
            metrics.update(replicated(ctx, got.metrics))

    run_ids: dict[tuple[str, str, int], str] = {}
    with ctx.tracker.stage_run("margent", "margent_eval", {"eval": margent.eval}) as run:
        for method in got.methods:
            for seed, row in zip(method.seeds, method.rows, strict=True):
                with run.child(method.name, seed, params={"operating_point": method.operating_point}, operating_point=method.operating_point) as child:
                    child.log_metrics({"eval/accuracy": row["accuracy"], "eval/calls": row["calls"], "eval/call_gap": row["call_gap"],
                                       "eval/candidate_accuracy": row["candidate_accuracy"], "cost/per_item_usd": row["cost_per_item_usd"]})
                    if child.run_id:
                        run_ids[(method.name, method.operating_point, seed)] = child.run_id
        run.log_metrics({"table1": metrics["table1"], "table2": metrics["table2"], "eval": metrics["eval"]})

        with TrajectoryWriter(ctx.layout, "margent") as writer:
            writer.add("collection", margent.collect.seed, report.collection_rows(collection))
            for method in got.methods:
                name = method.name if method.name != "margent" else f"margent-{method.operating_point.replace('=', '')}"
                for k, seed in enumerate(method.seeds):
                    writer.add(name, seed, report.walk_rows(got.test, method, k))
        write_summaries(ctx.layout, "margent", report.summary_rows(got.methods, meta["dataset"], meta["solver_set"], run_ids, verifier.name))
        write_outcomes(ctx.layout, "margent", report.outcome_rows(got.methods, got.test.item_ids, meta["dataset"], verifier.name))
        write_json_atomic(metrics, ctx.layout.metrics("margent"))
        plots = ctx.layout.plots("margent")
        write_csv_atomic(report.operating_points(metrics), plots / "operating_points.csv")
        write_csv_atomic(got.by_rho, plots / "rho_seeds.csv")
        write_csv_atomic(report.table1_frame(metrics), plots / "table1.csv")
        write_csv_atomic(report.table2_frame(metrics), plots / "table2.csv")
        from delegation_lab.margent.analysis import by_difficulty

        write_csv_atomic(by_difficulty(collection, margent.eval.confidence), plots / "rescue_by_difficulty.csv")
        report.plot_overview(metrics, plots / "margent.png")
        run.log_artifact(plots / "margent.png")
        run.log_artifact(ctx.layout.metrics("margent"))

    t1, ev = metrics["table1"], metrics["eval"]
    print(
        f"margent_eval: A0 {t1['A0']:.1f} A1 {t1['A1']:.1f} AD {t1['AD']:.1f} Gain@1 {t1['gain_at_1'] or float('nan'):.1f} %; "
        f"net value " + ", ".join(f"{a} {metrics['table2'][a]:+.1f}" for a in margent.subagents)
        + f"; selected ρ={ev['rho']}: {ev['candidate_accuracy']:.1f} -> {ev['accuracy']:.1f} % at {ev['calls']:.2f} calls"
    )


if __name__ == "__main__":
    run_stage("margent_eval", evaluate, section="margent")
