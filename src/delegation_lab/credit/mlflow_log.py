"""The credit study's MLflow children: one per method x seed, with its training curves, its held-out
accuracy at each checkpoint and its final figures."""

from __future__ import annotations

from delegation_lab.credit.params import CreditParams
from delegation_lab.credit.report import DATASET
from delegation_lab.credit.study import MethodOutcome
from delegation_lab.pipeline.study import ChildRun


def child_metrics(m: MethodOutcome, s: int) -> dict[str, float]:
    """The final figures of seed index `s` of method `m`."""
    per = m.eval.per_seed
    out = {f"eval/{k}": float(v[s]) for k, v in per.items()}
    c = m.train.curves
    out["cost/per_item_usd"] = float(per["cost_per_task_usd"][s])
    out["credit/coalitions_per_batch"] = float(c["coalitions"][s].mean())
    out["credit/seconds_total"] = float(c["credit_seconds"][s].sum())
    out["train/seconds"] = float(m.seconds)
    return out


def child_runs(m: MethodOutcome, params: CreditParams) -> list[ChildRun]:
    """One child run per seed of method `m`, keyed (method, seed)."""
    children = []
    c = m.train.curves
    for s, seed in enumerate(m.train.seeds):
        child_params = {"method": m.spec.name, "seed": seed, "team": m.spec.team, "reward": m.spec.reward,
                        "p_planner": m.spec.p_planner, "p_worker": m.spec.p_worker,
                        "alpha": params.alpha, "beta": params.beta, "gamma": params.gamma,
                        "token_cost": params.token_cost, "iterations": params.iterations,
                        "group_size": params.group_size, "tasks_per_batch": params.tasks_per_batch,
                        "learning_rate": params.learning_rate, "kl_coef": params.kl_coef}
        children.append(ChildRun(
            m.spec.name, seed, params=child_params, tags={"dataset": DATASET},
            series=[{f"train/{k}": c[k][s].tolist() for k in ("accuracy", "tokens", "reward", "coalitions")}],
            stepped=[(int(it), {"eval/accuracy_curve": float(acc)})
                     for it, acc in zip(m.train.eval_iterations, m.train.eval_accuracy[s], strict=True)],
            metrics=[child_metrics(m, s)], key=(m.spec.name, seed)))
    return children
