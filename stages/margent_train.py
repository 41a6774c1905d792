"""Stage `margent_train`: distil the collection into supervision (SFT JSONL per ρ) and train the
manager policies, every (ρ, seed) at once."""

from __future__ import annotations

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("margent_train", section="margent")

import polars as pl

from delegation_lab.margent import study
from delegation_lab.margent.params import rho_label
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.skip import skip_reason, skip_stage
from delegation_lab.pipeline.tables import read_table, write_csv_atomic, write_json_atomic


def train(ctx: StageContext) -> None:
    """Write results/margent/sft/rho=<ρ>.jsonl and results/margent/managers.pt."""
    margent = ctx.params.margent
    out = ctx.layout.study_results("margent")
    reason = skip_reason(out / "collect.json")
    if reason:  # margent_collect skipped: nothing to train on
        skip_stage(ctx.layout, "margent_train", reason)
        return
    collection = read_table(out / "collection.parquet", "MARGENT collection")
    views = read_table(out / "views.parquet", "MARGENT views")
    sft_dir = out / "sft"
    for old in sft_dir.glob("*.jsonl") if sft_dir.exists() else []:
        old.unlink()
    trained = study.train_managers(collection, views, margent, sft_dir)
    study.save_managers(trained, margent, out / "managers.pt")

    curve = trained.result.loss_curve
    every = max(1, curve.shape[1] // 100)
    write_csv_atomic(pl.DataFrame([
        {"epoch": e, "rho": rho_label(r), "seed": s, "loss": float(curve[m, e])}
        for m, (r, s) in enumerate(trained.grid) for e in range(0, curve.shape[1], every)
    ]), ctx.layout.plots("margent") / "train_loss.csv")
    per_rho = {}
    for m, (r, s) in enumerate(trained.grid):
        entry = per_rho.setdefault(rho_label(r), {"examples": trained.per_model[m]["examples"], "commit": trained.per_model[m]["commit"],
                                                 "rescue": trained.per_model[m]["rescue"], "sft_conversations": trained.sft.get(rho_label(r)),
                                                 "train_accuracy": [], "final_loss": []})
        entry["train_accuracy"].append(float(trained.result.train_accuracy[m]))
        entry["final_loss"].append(float(curve[m, -1]))
    for entry in per_rho.values():
        entry["train_accuracy"] = sum(entry["train_accuracy"]) / len(entry["train_accuracy"])
        entry["final_loss"] = sum(entry["final_loss"]) / len(entry["final_loss"])
    write_json_atomic({"examples": trained.counts, "rho": per_rho}, ctx.layout.metrics("margent_train"))
    with ctx.tracker.stage_run("margent", "margent_train", {"distill": margent.distill, "manager": margent.manager}) as run:
        for m, (r, s) in enumerate(trained.grid):
            params = {"rho": rho_label(r), "seed": s, **margent.manager.model_dump(), "distill_seed": margent.distill.seed}
            with run.child("margent", s, params=params, operating_point=f"rho={rho_label(r)}") as child:
                child.log_series({"train/loss": curve[m].tolist()})
                child.log_metrics({"train/imitation_accuracy": float(trained.result.train_accuracy[m]), **{
                    f"data_{k}": v for k, v in trained.per_model[m].items()}})
        run.log_artifacts(sft_dir, "sft")
    print(
        f"margent_train: {trained.counts['commit']} commit, {trained.counts['rescue']} rescue, "
        f"{trained.counts['unlabelled']} unlabelled roots; {len(trained.grid)} managers ("
        + ", ".join(f"ρ={k}: {v['examples']} examples" for k, v in per_rho.items()) + ")"
    )


if __name__ == "__main__":
    run_stage("margent_train", train, section="margent")
