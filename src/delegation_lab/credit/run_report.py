"""The stage-level blocks of metrics/credit.json (the run's setup, its timing) and the lines the
credit stage prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from delegation_lab.credit.grpo import method_p
from delegation_lab.credit.params import CreditParams
from delegation_lab.credit.report import DATASET
from delegation_lab.credit.study import StudyOutcome

STAGE_PHASES = ("train_and_evaluate", "long_run", "trajectories", "replay", "plots")


def setup_block(params: CreditParams, study: StudyOutcome) -> dict[str, Any]:
    """What the study ran: methods, seeds, sizes, device, estimator, prices."""
    return {
        "dataset": DATASET, "methods": params.method_names(), "seeds": study.seeds, "iterations": params.iterations,
        "rollouts_per_batch": params.tasks_per_batch * params.group_size, "group_size": params.group_size,
        "train_tasks": params.train_tasks, "test_tasks": params.test_tasks, "eval_replicates": params.eval_replicates,
        "device": study.device, "torch_threads": params.torch_threads, "credit_estimator": params.credit_estimator,
        "usd_per_mtok": params.usd_per_mtok, "token_cost": params.token_cost,
        "advantage_normalisation": params.advantage_normalisation, "curve_tasks": params.curve_tasks,
    }


def timing(phases: Mapping[str, float], trajectory_rows: int) -> dict[str, Any]:
    """The metrics file's `timing` block, from the same phases as metrics/timings/credit.json."""
    return {"train_and_eval_seconds": round(phases.get("train_and_evaluate", 0.0), 1), "trajectory_rows": trajectory_rows,
            "long_run_seconds": round(phases.get("long_run", 0.0), 1),
            "trajectories_seconds": round(phases.get("trajectories", 0.0), 1),
            "replay_seconds": round(phases.get("replay", 0.0), 1),
            "total_seconds": round(sum(phases.get(p, 0.0) for p in STAGE_PHASES), 1)}


def report_lines(metrics: dict[str, Any], study: StudyOutcome) -> list[str]:
    """Per method its held-out headline; then the timing."""
    lines = []
    for m in study.methods:
        b = metrics[m.spec.name]
        pv = method_p(m.spec)
        lo, hi = b.get("accuracy_ci", (float("nan"), float("nan")))
        lines.append(f"credit: {m.spec.name}{'' if pv is None else f' (p={pv:g})'}: accuracy {b['accuracy']:.2f} % "
                     f"[{lo:.2f}, {hi:.2f}], {b['tokens_per_task']:.0f} tokens, {b['tool_calls_per_task']:.2f} tool calls / "
                     f"question, useful {b['useful_share']:.2f} %, harmful {b['harmful_share']:.2f} %, "
                     f"batch {1000 * b['train']['batch_seconds']:.0f} ms")
    t = metrics["timing"]
    lines.append(f"credit: trained and evaluated in {t['train_and_eval_seconds']} s; {t['trajectory_rows']} trajectory rows "
                 f"in {t['trajectories_seconds']} s; total {t['total_seconds']} s")
    return lines
