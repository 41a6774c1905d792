"""The coordinator study's MLflow child runs: one per method x seed (not per fixed order: those are
baselines, in the metrics and summaries), per cost weight in the sweep, with per-episode curves.

Each per-episode curve is logged at most `mlflow_points` points, and at most
`tracking.series_points` (the tracker downsamples: means over equal runs of episodes, at the step of
each run's last episode; the full curves are each child's `curves.parquet` artifact), so ~240 child
runs stay ~40k metric points. The study submits them as each method finishes; the one child-run
writer (`pipeline.study.ChildRunWriter`, in a background process) writes them while the next
method trains, on the other core.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from delegation_lab.coordinator.params import CoordinatorParams
from delegation_lab.coordinator.results import (
    episode_curves,
    late_per_lane,
    test_per_lane,
)
from delegation_lab.coordinator.study import MethodRun
from delegation_lab.pipeline.study import ChildRun


def child_payloads(run: MethodRun, params: CoordinatorParams) -> list[dict[str, Any]]:
    """What each lane's child run logs: params, tags, per-episode series and final metrics."""
    curves = episode_curves(run.train)
    lt = late_per_lane(run.train, params.late_episodes)
    te = test_per_lane(run.test, params.packet_size)
    out = []
    for lane in range(run.lanes):
        seed = int(run.seeds[lane])
        child_params: dict[str, Any] = {
            "study": run.study, "method": run.method, "seed": seed, "cost_weight": float(run.cost_weights[lane]),
            "use_map": run.use_map, "episodes": params.episodes, "packet_size": params.packet_size,
            "solver_set": ",".join(run.solver_set),
        }
        if run.policy is not None:
            child_params["dqn"] = params.dqn.model_dump()
        series = {f"train/{k}": np.asarray(curves[k][lane], dtype=np.float64) for k in params.mlflow_series if k in curves}
        if "epsilon" in params.mlflow_series and run.epsilon is not None:
            series["train/epsilon"] = np.asarray(run.epsilon[lane], dtype=np.float64)
        finals = {
            "late/return": lt["return"][lane], "late/accuracy": lt["accuracy"][lane],
            "late/cost_per_episode_usd": lt["cost_per_episode"][lane], "cost/cumulative_usd": lt["cum_cost"][lane],
            "eval/accuracy": te["accuracy"][lane], "eval/return": te["return"][lane],
            "cost/per_item_usd": te["cost_per_item"][lane], "eval/calls_per_item": te["calls_per_item"][lane],
        }
        out.append({"name": run.names[lane], "seed": seed, "params": child_params,
                    "tags": {"study": run.study, "operating_point": run.operating_point(lane)},
                    "series": series, "finals": {k: float(v) for k, v in finals.items()}})
    return out


def child_runs(run: MethodRun, params: CoordinatorParams) -> list[ChildRun]:
    """The child runs of a finished method (none for the fixed orders), keyed (name, seed)."""
    if run.method == "fixed_order":
        return []
    return [ChildRun(p["name"], p["seed"], params=p["params"], tags=p["tags"], series=[p["series"]],
                     series_points=params.mlflow_points, metrics=[p["finals"]], key=(p["name"], p["seed"]))
            for p in child_payloads(run, params)]
