"""Stage `prepare`: build the configured dataset's items and write data/items/{split}.parquet."""

if __name__ == "__main__":  # before the imports below: the process re-executed under the pins loads them once
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()

from delegation_lab.data import build_items
from delegation_lab.data.items import items_frame
from delegation_lab.pipeline.schemas import SPLITS
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.tables import write_json_atomic, write_parquet_atomic


def prepare(ctx: StageContext) -> None:
    """Build items and their seeded splits."""
    params = ctx.params.data
    items = build_items(params)  # everything is built and checked before anything is written
    frame = items_frame(items)
    stats = {}
    for split in SPLITS:
        part = frame.filter(frame["split"] == split)
        stats[split] = {
            "n_items": part.height,
            "mean_difficulty": round(float(part["difficulty"].mean()), 4),
            "max_difficulty": int(part["difficulty"].max()),
        }
    for split in SPLITS:
        write_parquet_atomic(frame.filter(frame["split"] == split), ctx.layout.items(split))
    write_json_atomic({"dataset": params.dataset, **stats}, ctx.layout.metrics("data"))
    with ctx.tracker.stage_run("data", "prepare", params) as run:
        run.log_metrics({f"{s}.{k}": v for s, d in stats.items() for k, v in d.items()})
    print(f"prepare: {params.dataset}: " + ", ".join(f"{s} {d['n_items']}" for s, d in stats.items()))


if __name__ == "__main__":
    run_stage("prepare", prepare)
