"""Stage `coordinator`: the DQN coordinator under management and delegation rules (History Matters
§3.1-3.2) on the cached answers — every seed batched — against always-A, every fixed order, random,
the oracle and the frozen management policy, every accept / retry decision by the shared verifier
(`evaluation.verifier`); held-out evaluation with item-level intervals, a cost-weight sweep, metrics,
plots, trajectories, summaries and item-level outcomes for the frontier, and an MLflow child run per
method x seed."""

import re
import time

import numpy as np
import polars as pl

from delegation_lab.coordinator.mlflow_log import BackgroundMlflow
from delegation_lab.coordinator.plots import plot_share, plot_sweep, plot_training
from delegation_lab.coordinator.results import (
    curve_tables,
    outcome_frame,
    provenance,
    study_metrics,
    summary_rows,
    sweep_table,
    test_per_lane,
    trajectory_frame,
    trajectory_lookups,
)
from delegation_lab.coordinator.study import CoordinatorStudy, prepare_inputs
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.evaluation.verifier import build_verifier
from delegation_lab.stage import StageContext, run_stage
from delegation_lab.store import TrajectoryWriter, write_summaries
from delegation_lab.tables import write_csv_atomic, write_json_atomic

STUDY = "coordinator"


def coordinator(ctx: StageContext) -> None:
    """Train, evaluate and report the coordinator study."""
    t_start = time.perf_counter()
    params = ctx.params.coordinator
    layout, data = prepare_inputs(params, list(ctx.params.solvers), ctx.params.ability_map.bucket_edges, ctx.layout,
                                  ctx.params.ability_map.bucket_by)
    verifier = build_verifier(ctx.params.evaluation.verifier, ctx.layout.root)
    # MLflow (a child run per method x seed, per cost weight in the sweep, with per-episode curves)
    # is written by a background process while the next method trains.
    mlflow = BackgroundMlflow(ctx.params.tracking, ctx.tracker.root, STUDY, params)
    try:
        study = CoordinatorStudy(params, data, layout, progress=ctx.progress, on_run=mlflow.submit, verifier=verifier)
        runs = study.run()
        t_trained = time.perf_counter()
        metrics = study_metrics(runs, params.late_episodes, params.packet_size, ctx.params.evaluation.intervals)
        metrics["verifier"] = verifier.describe()
        metrics["setup"] = {
            "dataset": ctx.params.data.dataset, "agents": list(layout.columns),
            "routes": [">".join(r) for r in layout.routes], "train_items": data.train.n_items,
            "test_items": data.test.n_items, "ability_map": data.has_map, "device": str(study.device),
            "torch_threads": params.torch_threads, "mgmt_policy_rules": params.mgmt_policy_rules,
            "dqn_learning_starts": params.dqn.learning_starts,  # ours, not the paper's (see provenance)
        }
        metrics["provenance"] = provenance({k: v for k, v in metrics.items() if k in ("management", "delegation")},
                                           params.dqn.learning_starts)
        mlflow.parent_metrics({k: v for k, v in _flat(metrics).items() if "paper" not in k})
        # Trajectories while the MLflow process logs the last child runs (it lags the training).
        rows = _write_trajectories(ctx, runs) if params.trajectories else 0
        t_written = time.perf_counter()
        run_ids = mlflow.close()
    except BaseException as e:
        mlflow.abort(f"{type(e).__name__}: {e}")
        raise
    t_logged = time.perf_counter()

    # Summaries (test rows for the frontier, late-train rows beside them) and item-level outcomes.
    write_summaries(ctx.layout, STUDY, summary_rows(runs, params.late_episodes, params.packet_size,
                                                    ctx.params.data.dataset, run_ids, verifier.name))
    write_outcomes(ctx.layout, STUDY, outcome_frame(runs, ctx.params.data.dataset, verifier.name))

    # Plots: return and cost CSVs for `dvc plots` (a column per method), the rest beside the PNGs
    # (like the paper's Figures 1-4) in plots/coordinator/figures/, and the sweep.
    folder = ctx.layout.plots(STUDY)
    figures = folder / "figures"
    for env_study in ("management", "delegation"):
        tables = curve_tables(runs, env_study)
        if not tables:  # not run: keep the declared plot files, empty
            for name in ("return", "cost"):
                write_csv_atomic(pl.DataFrame(schema={"episode": pl.Int64, "dqn_map": pl.Float64}),
                                 folder / f"{env_study}_{name}.csv")
            continue
        for name, table in tables.items():
            write_csv_atomic(table, (folder if name in ("return", "cost") else figures) / f"{env_study}_{name}.csv")
        plot_training(tables, env_study, figures / f"{env_study}_training.png")
        if "share" in tables:
            plot_share(tables["share"], env_study, figures / f"{env_study}_solver_share.png")
    sweep = sweep_table(runs, params.packet_size)
    write_csv_atomic(sweep, folder / "lambda_sweep.csv")
    base_points = pl.DataFrame([
        {"study": r.study, "method": r.method, "accuracy": float(test_per_lane(r.test, params.packet_size)["accuracy"].mean()),
         "cost_per_item_usd": float(test_per_lane(r.test, params.packet_size)["cost_per_item"].mean())}
        for r in runs if not r.sweep and r.method in ("always_a", "oracle", "mgmt_policy")
    ], schema={"study": pl.String, "method": pl.String, "accuracy": pl.Float64, "cost_per_item_usd": pl.Float64})
    plot_sweep(sweep, base_points, figures / "lambda_sweep.png")

    metrics["timing"] = {
        "train_and_eval_seconds": round(t_trained - t_start, 1), "mlflow_wait_seconds": round(t_logged - t_written, 1),
        "trajectories_seconds": round(t_written - t_trained, 1), "trajectory_rows": rows,
        "dqn_batch_seconds": study.batch_seconds,  # the training loops (delegation's in a second process)
        "total_seconds": round(time.perf_counter() - t_start, 1),
    }
    # The same split in metrics/timings/coordinator.json, where `dlab report --timings` reads it.
    ctx.phases.update({
        "train_and_evaluate": round(t_trained - t_start, 3), "trajectories": round(t_written - t_trained, 3),
        "mlflow_wait": round(t_logged - t_written, 3), "summaries_and_plots": round(time.perf_counter() - t_logged, 3),
        **{f"dqn_batch_{env}": seconds for env, seconds in study.batch_seconds.items()},
    })
    write_json_atomic(metrics, ctx.layout.metrics(STUDY))
    _report(metrics)


def _write_trajectories(ctx: StageContext, runs: list) -> int:
    """Every environment step of every learned and fixed policy (not the fixed orders) as trajectory
    rows, train episodes first, then the test split's; returns the rows written."""
    params = ctx.params.coordinator
    rows = 0
    with TrajectoryWriter(ctx.layout, STUDY, flush_rows=50_000) as writer:
        for run in runs:
            if run.train.record is None:  # fixed orders: baselines without trajectories
                continue
            for which, offset in (("train", 0), ("test", params.episodes)):  # per lane: train, then test
                lookups = trajectory_lookups(run, which)
                for lane in range(run.lanes):
                    frame = trajectory_frame(run, lane, which, offset, lookups)
                    rows += frame.height
                    writer.add(run.names[lane], int(run.seeds[lane]), frame)
    return rows


def _flat(obj, prefix: str = "") -> dict[str, float]:
    """Numeric leaves as MLflow metric keys (a/b/c; '=' is not allowed there)."""
    if isinstance(obj, dict):
        out: dict[str, float] = {}
        for key, value in obj.items():
            out.update(_flat(value, f"{prefix}{key}/"))
        return out
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        return {re.sub(r"[^A-Za-z0-9_\-. /]", "_", prefix[:-1]): obj}  # MLflow's allowed key characters
    return {}


def _report(metrics: dict) -> None:
    for env_study in ("management", "delegation"):
        block = metrics.get(env_study)
        if not block:
            continue
        for method, m in block.items():
            if method in ("paper", "fixed_orders"):
                continue
            extra = ""
            if "vs_always_a" in m:
                v = m["vs_always_a"]
                lo, hi = v["late_return_difference_ci"]
                extra = (f"; vs always_a: {m['seeds_better_return']}/{m['n_seeds']} seeds better, "
                         f"late return {v['late_return_difference']:+.2f} [{lo:+.2f}, {hi:+.2f}]")
            if "order" in m:
                extra += f" (order {m['order']})"
            if "vs_best_fixed_order" in m:
                v = m["vs_best_fixed_order"]
                lo, hi = v["return_difference_ci"]
                extra += f"; test return vs best fixed order {v['return_difference']:+.2f} [{lo:+.2f}, {hi:+.2f}]"
            print(f"coordinator: {env_study}.{method}: late return {m['late_return_mean']:.2f} ± {m['late_return_std']:.2f}, "
                  f"accuracy {m['late_accuracy_mean']:.3f}, ${m['late_cost_per_episode_mean']:.4f}/episode; "
                  f"test accuracy {m['test_accuracy_mean']:.3f} at ${m['test_cost_per_item_mean']:.6f}/item{extra}")
    t = metrics["timing"]
    print(f"coordinator: trained in {t['train_and_eval_seconds']} s, then waited {t['mlflow_wait_seconds']} s for MLflow, "
          f"{t['trajectory_rows']} trajectory rows in {t['trajectories_seconds']} s")


if __name__ == "__main__":
    np.seterr(divide="ignore", invalid="ignore")
    run_stage(STUDY, coordinator)
