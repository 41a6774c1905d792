"""The coordinator stage's metrics/coordinator.json (the method blocks of `results.study_metrics`, the
verifier, the run's setup, provenance, timing) and the lines the stage prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from delegation_lab.coordinator.data import CoordinatorData
from delegation_lab.coordinator.params import CoordinatorParams
from delegation_lab.coordinator.results import provenance, study_metrics
from delegation_lab.coordinator.study import EnvLayout, MethodRun
from delegation_lab.evaluation.params import IntervalParams, TieParams
from delegation_lab.evaluation.verifier import Verifier

ENVIRONMENTS = ("management", "delegation")
STAGE_PHASES = ("load", "train_and_evaluate", "trajectories", "mlflow_wait", "summaries_and_plots")


def coordinator_metrics(runs: list[MethodRun], params: CoordinatorParams, data: CoordinatorData, layout: EnvLayout,
                        verifier: Verifier, intervals: IntervalParams, dataset: str, device: str,
                        ties: TieParams = TieParams()) -> dict[str, Any]:
    """Every figure of the study, with what it ran on and why a value differs from the paper's."""
    metrics = study_metrics(runs, params.late_episodes, params.packet_size, intervals, ties)
    metrics["verifier"] = verifier.describe()
    metrics["setup"] = {
        "dataset": dataset, "agents": list(layout.columns),
        "routes": [">".join(r) for r in layout.routes], "train_items": data.train.n_items,
        "test_items": data.test.n_items, "ability_map": data.has_map, "device": device,
        "torch_threads": params.torch_threads, "mgmt_policy_rules": params.mgmt_policy_rules,
        "rejected_last_answer": params.rejected_last_answer,  # how a dropped item is graded (docs/studies/coordinator.md)
        "dqn_learning_starts": params.dqn.learning_starts,  # ours, not the paper's (see provenance)
    }
    metrics["provenance"] = provenance({k: v for k, v in metrics.items() if k in ENVIRONMENTS},
                                       params.dqn.learning_starts)
    return metrics


def timing(phases: Mapping[str, float], trajectory_rows: int) -> dict[str, Any]:
    """The metrics file's `timing` block (`python -m benchmarks coordinator` reads it), from the same
    phases as metrics/timings/coordinator.json."""
    return {
        "train_and_eval_seconds": round(phases.get("train_and_evaluate", 0.0), 1),
        "trajectories_seconds": round(phases.get("trajectories", 0.0), 1),
        "mlflow_wait_seconds": round(phases.get("mlflow_wait", 0.0), 1),
        "trajectory_rows": trajectory_rows,
        # the training loops (delegation's in a second process with `workers: 2`)
        "dqn_batch_seconds": {env: round(phases[f"dqn_batch_{env}"], 1) for env in ENVIRONMENTS
                              if f"dqn_batch_{env}" in phases},
        "total_seconds": round(sum(phases.get(p, 0.0) for p in STAGE_PHASES), 1),
    }


def report_lines(metrics: dict[str, Any]) -> list[str]:
    """Per environment and method: late-train and held-out headlines, the paired comparisons; then the timing."""
    lines = []
    for env_study in ENVIRONMENTS:
        for method, m in (metrics.get(env_study) or {}).items():
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
            lines.append(f"coordinator: {env_study}.{method}: late return {m['late_return_mean']:.2f} ± {m['late_return_std']:.2f}, "
                         f"accuracy {m['late_accuracy_mean']:.3f}, ${m['late_cost_per_episode_mean']:.4f}/episode; "
                         f"test accuracy {m['test_accuracy_mean']:.3f} at ${m['test_cost_per_item_mean']:.6f}/item{extra}")
    t = metrics["timing"]
    lines.append(f"coordinator: trained in {t['train_and_eval_seconds']} s, then waited {t['mlflow_wait_seconds']} s for "
                 f"MLflow, {t['trajectory_rows']} trajectory rows in {t['trajectories_seconds']} s")
    return lines
