"""Stage `frontier`: every study's summary rows plus solver-only baselines and the oracle on one
cost-accuracy frontier (results/frontier.parquet, metrics/frontier.json, plots/frontier/), and the
baselines' item-level outcomes (results/outcomes/baselines.parquet, the studies' outcome contract).
The baselines are computed under `evaluation.verifier` and each of `evaluation.compare_verifiers`."""
if __name__ == "__main__":  # before the imports below: the process re-executed under the pins loads them once
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()

import polars as pl

from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.evaluation.verifier import build_verifier
from delegation_lab.frontier.build import BASELINES, frontier_with_outcomes
from delegation_lab.frontier.estimates import estimated_reasoning
from delegation_lab.frontier.gap import oracle_gap
from delegation_lab.frontier.plot import plot_frontier, plot_oracle_gap
from delegation_lab.frontier.served import ServedPoints, served_points
from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.journal import read_decisions
from delegation_lab.tracking.tracker import metric_names
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.skip import skip_reason
from delegation_lab.pipeline.tables import (
    read_labeled_answers,
    read_outcomes,
    read_summaries,
    write_csv_atomic,
    write_json_atomic,
    write_parquet_atomic,
)

RATES_SPLIT = "train"  # besides frontier.split, where each verifier's FP / FN against gold are measured


def studies_run(ctx: StageContext) -> dict[str, dict]:
    """Which studies put points on the frontier, and why the others did not (their metrics say `skipped`)."""
    out = {}
    for f in sorted(ctx.layout.summaries_dir.glob("*.parquet")):
        reason = skip_reason(ctx.layout.metrics(f.stem))
        out[f.stem] = {"skipped": reason} if reason else {"ran": True, "summary_rows": pl.read_parquet(f).height}
    return out


def served_rows(ctx: StageContext, labeled: pl.DataFrame, verifier: str) -> ServedPoints:
    """The deployed policies' live rows (`data.dataset: served`): the journal of `data.served.project`
    (like `prepare`, read outside DVC: after new traffic `dvc repro -f prepare` reruns everything after it)."""
    layout = Layout(ctx.layout.root / ctx.params.data.served.project)
    return served_points(read_decisions(layout), labeled, ctx.params.data.dataset, ctx.params.frontier.split, verifier)


def frontier(ctx: StageContext) -> None:
    """Build the frontier on the held-out split."""
    params = ctx.params.frontier
    every_split = read_labeled_answers(ctx.layout)
    labeled = every_split.filter(pl.col("split") == params.split)
    summaries = read_summaries(ctx.layout)
    outcomes = read_outcomes(ctx.layout).filter(pl.col("study") != BASELINES)  # the studies', not this stage's own
    evaluation = ctx.params.evaluation
    verifier = build_verifier(evaluation.verifier, ctx.layout.root)
    compared = {v.name: build_verifier(v, ctx.layout.root) for v in evaluation.compare_verifiers}
    train = every_split.filter(pl.col("split") == RATES_SPLIT)
    served = served_rows(ctx, labeled, verifier.name) if ctx.params.data.dataset == "served" else None
    table, metrics, baselines = frontier_with_outcomes(
        labeled, summaries, params, ctx.params.data.dataset, verifier=verifier, outcomes=outcomes,
        intervals=evaluation.intervals, search_labeled=every_split.filter(pl.col("split") == params.cascade.search_split),
        served=served, estimated=estimated_reasoning(ctx.layout, sorted(every_split["solver"].unique().to_list())),
        compared=compared, rates_labeled={RATES_SPLIT: train} if train.height and params.split != RATES_SPLIT else None,
        ties=evaluation.ties)
    write_parquet_atomic(table, ctx.layout.frontier)
    write_outcomes(ctx.layout, BASELINES, baselines)  # so the dashboard can pair a baseline with any study point
    gap = oracle_gap(table, metrics["methods"], pl.concat([outcomes, baselines], how="vertical_relaxed"),
                     ctx.params.data.dataset, params.split, verifier.name, evaluation.intervals)
    metrics = {"dataset": ctx.params.data.dataset, "split": params.split, "n_items": labeled["item_id"].n_unique(),
               "verifier": verifier.describe(), "confidence": evaluation.intervals.confidence,
               "studies": studies_run(ctx), **metrics, **({"served": served.report} if served else {}), "oracle_gap": gap}
    write_json_atomic(metrics, ctx.layout.metrics("frontier"))
    plots = ctx.layout.plots("frontier")
    # other tasks' points, and runs under another verifier (a perfect one), stay out of this picture
    same_task = table.filter(pl.col("dataset") == ctx.params.data.dataset)
    main = same_task.filter(pl.col("verifier").is_in([verifier.name, "oracle"]))
    write_csv_atomic(
        main.select("method", "operating_point", "study", "kind", "cost_per_item_usd", "accuracy", "accuracy_ci_low",
                    "accuracy_ci_high", "cost_ci_low", "cost_ci_high", "on_pareto", "verifier"),
        plots / "frontier.csv",
    )
    plot_frontier(main, plots / "frontier.png", title=f"{ctx.params.data.dataset}: cost vs accuracy on {params.split}, "
                  f"verifier {verifier.name}")
    plot_oracle_gap(gap, plots / "oracle_gap.png", title=f"{ctx.params.data.dataset}: where the oracle gap goes on "
                    f"{params.split} (the methods closest to it), verifier {verifier.name}")
    gold = same_task.filter(pl.col("verifier").is_in(["gold", "oracle"]))
    if verifier.kind != "gold" and gold.filter(pl.col("study") != "baselines").height:
        plot_frontier(gold, plots / "frontier_gold.png", title=f"{ctx.params.data.dataset}: perfect-verifier runs on {params.split}")
    with ctx.tracker.stage_run("frontier", "frontier", params) as run:
        # metric_names: a compared verifier's key (`cascade:a>b [agreement(a,b;min_agree=2)]`) holds characters MLflow refuses
        run.log_metrics(metric_names({"oracle": metrics["oracle"], **{
            k.replace(":", "_").replace(">", "-").replace("+", "_"): {m: v for m, v in d.items() if isinstance(v, float)}
            for k, d in metrics["methods"].items()
        }}))
        run.log_artifact(plots / "frontier.png")
        run.log_artifact(plots / "oracle_gap.png")
        run.log_artifact(ctx.layout.frontier)
    best = max(metrics["methods"].items(), key=lambda kv: kv[1]["aiq"] if kv[1]["kind"] != "oracle" else -1)
    search = metrics["search"]
    print(
        f"frontier: {table.height} points, {int(table['on_pareto'].sum())} on the Pareto front; "
        f"{search['cascades_kept']} of {search['cascades_considered']} cascades kept "
        f"({'every one' if search['exhaustive'] else 'searched on ' + search['search_split']}); "
        f"oracle {metrics['oracle']['accuracy']:.3f} at ${metrics['oracle']['cost_per_item_usd']:.5f}/item; "
        f"best AIQ {best[0]} ({best[1]['aiq']:.3f})"
    )


if __name__ == "__main__":
    run_stage("frontier", frontier)
