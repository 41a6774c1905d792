"""Stage `credit`: SHARP (seed 002) on a simulated planner-worker tool-use task — the single agent,
broadcast reward (MATPO-like), SHARP and its ablations (no Shapley, planner-only, worker-only
credit) and the p-sweep, every seed batched; held-out evaluation on common draws; metrics with the
paper's figures beside ours, summaries, trajectories with per-agent credit per step, the credit
table of the held-out rollouts (the `dlab credit` replay), plots, and the MLflow experiment `credit`."""

from __future__ import annotations

import time

import numpy as np
import polars as pl

from delegation_lab.credit.grpo import method_p
from delegation_lab.credit.plots import plot_methods, plot_p_sweep, plot_stability
from delegation_lab.credit.replay import compute_credit, describe
from delegation_lab.credit.report import (
    DATASET,
    curve_tables,
    flat_numbers,
    long_run_metrics,
    outcome_rows,
    study_metrics,
    summary_rows,
    test_frames,
    train_frames,
)
from delegation_lab.credit.study import MethodOutcome, run_study
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.stage import StageContext, run_stage
from delegation_lab.store import TrajectoryWriter, write_summaries
from delegation_lab.tables import write_csv_atomic, write_json_atomic
from delegation_lab.torch_runtime import resolve_device

STUDY = "credit"


def _child_metrics(m: MethodOutcome, s: int) -> dict[str, float]:
    per = m.eval.per_seed
    out = {f"eval/{k}": float(v[s]) for k, v in per.items()}
    c = m.train.curves
    out["cost/per_item_usd"] = float(per["cost_per_task_usd"][s])
    out["credit/coalitions_per_batch"] = float(c["coalitions"][s].mean())
    out["credit/seconds_total"] = float(c["credit_seconds"][s].sum())
    out["train/seconds"] = float(m.seconds)
    return out


def credit(ctx: StageContext) -> None:
    """Train, evaluate and report the credit study."""
    t0 = time.perf_counter()
    params = ctx.params.credit
    resolve_device(params.device, "credit.device")  # a bad device fails before any work
    run_ids: dict[tuple[str, int], str | None] = {}
    with ctx.tracker.stage_run(STUDY, STUDY, params) as parent:

        def log_method(m: MethodOutcome) -> None:
            c = m.train.curves
            for s, seed in enumerate(m.train.seeds):
                child_params = {"method": m.spec.name, "seed": seed, "team": m.spec.team, "reward": m.spec.reward,
                                "p_planner": m.spec.p_planner, "p_worker": m.spec.p_worker,
                                "alpha": params.alpha, "beta": params.beta, "gamma": params.gamma,
                                "token_cost": params.token_cost, "iterations": params.iterations,
                                "group_size": params.group_size, "tasks_per_batch": params.tasks_per_batch,
                                "learning_rate": params.learning_rate, "kl_coef": params.kl_coef}
                with parent.child(m.spec.name, seed, params=child_params, dataset=DATASET) as child:
                    child.log_series({f"train/{k}": c[k][s].tolist() for k in ("accuracy", "tokens", "reward", "coalitions")})
                    for it, acc in zip(m.train.eval_iterations, m.train.eval_accuracy[s], strict=True):
                        child.log_metrics({"eval/accuracy_curve": float(acc)}, step=int(it))
                    child.log_metrics(_child_metrics(m, s))
                    run_ids[(m.spec.name, seed)] = child.run_id

        with ctx.phase("train_and_evaluate"):
            study = run_study(params, progress=ctx.progress, on_method=log_method)
        t_trained = time.perf_counter()
        metrics = study_metrics(study, ctx.params.evaluation.intervals)
        if params.long_run.iterations_factor:
            with ctx.phase("long_run"):
                metrics["long_run"] = long_run_metrics(params, ctx.params.evaluation.intervals)
        t_long = time.perf_counter()
        metrics["setup"] = {
            "dataset": DATASET, "methods": params.method_names(), "seeds": study.seeds, "iterations": params.iterations,
            "rollouts_per_batch": params.tasks_per_batch * params.group_size, "group_size": params.group_size,
            "train_tasks": params.train_tasks, "test_tasks": params.test_tasks, "eval_replicates": params.eval_replicates,
            "device": study.device, "torch_threads": params.torch_threads, "credit_estimator": params.credit_estimator,
            "usd_per_mtok": params.usd_per_mtok, "token_cost": params.token_cost,
            "advantage_normalisation": params.advantage_normalisation, "curve_tasks": params.curve_tasks,
        }
        parent.log_metrics(flat_numbers(metrics))

    t_summaries = time.perf_counter()
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
    t_written = time.perf_counter()

    # Per-agent credit of the held-out rollouts through the `dlab credit` replay (results/credit/credit.parquet),
    # checked against the credit the study computed in place.
    replay: dict = {}
    if params.trajectories.test and any(m.spec.team for m in study.methods):
        run = compute_credit(ctx.layout, STUDY, params_path=ctx.args.params, split="test", estimator="exact")
        stored = _stored_credit(study)
        joined = run.frame.join(stored, on=["method", "seed", "episode", "agent"], how="inner")
        replay = {"trajectories": run.trajectories, "agent_rows": run.frame.height, "coalitions": run.coalitions,
                  "seconds": round(run.seconds, 3), "coalitions_per_second": run.coalitions_per_second,
                  "max_abs_diff_vs_training_code": float((joined["credit"] - joined["stored"]).abs().max()),
                  "matched_rows": joined.height}
        print(f"credit: replay of the held-out rollouts: {describe(run)}; max |replayed - in-place| = "
              f"{replay['max_abs_diff_vs_training_code']:.2e} over {joined.height:,} agent rows")
    metrics["replay"] = replay
    t_credit = time.perf_counter()

    folder = ctx.layout.plots(STUDY)
    tables = curve_tables(study)
    for name, table in tables.items():
        write_csv_atomic(table, folder / f"{name}.csv")
    figures = folder / "figures"
    plot_methods(tables["methods"], figures / "methods.png")
    plot_stability(tables["heldout_accuracy"], params.seeds, figures / "stability.png",
                   [m for m in ("single", "broadcast", "no_shapley", "sharp") if m in params.method_names()])
    plot_p_sweep(tables["p_sweep"], figures / "p_sweep.png")

    metrics["timing"] = {"train_and_eval_seconds": round(t_trained - t0, 1), "trajectory_rows": rows,
                         "long_run_seconds": round(t_long - t_trained, 1),
                         "trajectories_seconds": round(t_written - t_summaries, 1),
                         "replay_seconds": round(t_credit - t_written, 1),
                         "total_seconds": round(time.perf_counter() - t0, 1)}
    ctx.phases.update({"trajectories": round(t_written - t_summaries, 3), "replay": round(t_credit - t_written, 3)})
    write_json_atomic(metrics, ctx.layout.metrics(STUDY))
    _report(metrics, study)


def _stored_credit(study) -> pl.DataFrame:
    """The exact credit the study computed on each seed's first held-out replicate, per agent."""
    from delegation_lab.credit.report import agent_names

    frames = []
    for m in study.methods:
        if not m.spec.team:
            continue
        e = m.eval
        roll = e.team
        L, H, K = roll.worker_present.shape
        names = np.array(agent_names(H, K))
        present = np.concatenate([np.ones((L, 1), dtype=bool), roll.worker_present.reshape(L, -1)], axis=1)
        t, s = np.nonzero(present)
        N = study.eval_set.n
        frames.append(pl.DataFrame({
            "method": m.spec.name, "seed": np.asarray(m.train.seeds)[t // N].astype(np.int64),
            "episode": roll.task[t].astype(np.int64), "agent": names[s], "stored": e.credit.credit[t, s],
        }))
    return pl.concat(frames)


def _report(metrics: dict, study) -> None:
    for m in study.methods:
        b = metrics[m.spec.name]
        pv = method_p(m.spec)
        lo, hi = b.get("accuracy_ci", (float("nan"), float("nan")))
        print(f"credit: {m.spec.name}{'' if pv is None else f' (p={pv:g})'}: accuracy {b['accuracy']:.2f} % "
              f"[{lo:.2f}, {hi:.2f}], {b['tokens_per_task']:.0f} tokens, {b['tool_calls_per_task']:.2f} tool calls / "
              f"question, useful {b['useful_share']:.2f} %, harmful {b['harmful_share']:.2f} %, "
              f"batch {1000 * b['train']['batch_seconds']:.0f} ms")
    t = metrics["timing"]
    print(f"credit: trained and evaluated in {t['train_and_eval_seconds']} s; {t['trajectory_rows']} trajectory rows in "
          f"{t['trajectories_seconds']} s; total {t['total_seconds']} s")


if __name__ == "__main__":
    np.seterr(divide="ignore", invalid="ignore")
    run_stage(STUDY, credit)
