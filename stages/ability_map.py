"""Stage `ability_map`: success rate (Wilson interval) and mean cost per solver x difficulty bucket,
from the ability split only."""

if __name__ == "__main__":  # before the imports below: the process re-executed under the pins loads them once
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()

import polars as pl

from delegation_lab.ability.maps import build_ability_map
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.tables import (
    read_items,
    read_labeled_answers,
    write_csv_atomic,
    write_json_atomic,
    write_parquet_atomic,
)


def ability_map(ctx: StageContext) -> None:
    """Build data/ability_map.parquet, its metrics and its plot data."""
    labeled = read_labeled_answers(ctx.layout).filter(pl.col("split") == "ability")
    domains = read_items(ctx.layout)["domain"].unique().to_list()  # domain buckets numbered over every split
    table = build_ability_map(labeled, ctx.params.ability_map, domains)
    write_parquet_atomic(table, ctx.layout.ability_map)
    metrics = {
        solver: {
            "n": int(g["n"].sum()),
            "success_rate": round(float(g["successes"].sum() / g["n"].sum()), 6),
            "by_bucket": {
                r["bucket_label"]: {
                    "n": r["n"], "success_rate": round(r["success_rate"], 4), "ci_low": round(r["ci_low"], 4),
                    "ci_high": round(r["ci_high"], 4), "mean_cost_usd": r["mean_cost_usd"],
                }
                for r in g.iter_rows(named=True)
            },
        }
        for (solver,), g in table.group_by("solver", maintain_order=True)
    }
    write_json_atomic(metrics, ctx.layout.metrics("ability_map"))
    write_csv_atomic(
        table.select(pl.col("solver").alias("series"), "solver", "bucket", "bucket_label", "success_rate", "ci_low",
                     "ci_high", "mean_cost_usd", "n"),
        ctx.layout.plots("ability_map") / "success_rate.csv",
    )
    with ctx.tracker.stage_run("data", "ability_map", ctx.params.ability_map) as run:
        run.log_metrics({s: {"success_rate": m["success_rate"]} for s, m in metrics.items()})
        run.log_artifact(ctx.layout.ability_map)
    print("ability_map: " + ", ".join(f"{s} {m['success_rate']:.3f}" for s, m in metrics.items()))


if __name__ == "__main__":
    run_stage("ability_map", ability_map)
