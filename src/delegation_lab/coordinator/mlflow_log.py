"""MLflow logging of the coordinator study in a background process.

Each per-episode curve is logged at most `mlflow_points` points, and at most
`tracking.series_points` (the tracker downsamples: means over equal runs of episodes, at the step of
each run's last episode; the full curves are each child's `curves.parquet` artifact), so ~240 child
runs stay ~40k metric points. A separate process writes them while the main process
trains the next method, on the other core. It is the only MLflow writer of the stage (no two
processes write the sqlite store), creates the parent run and a child run per method x seed (not
per fixed order: those are baselines, in the metrics and summaries), and returns the child run ids.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import numpy as np

from delegation_lab.params.root import TrackingParams
from delegation_lab.coordinator.params import CoordinatorParams
from delegation_lab.coordinator.results import (
    episode_curves,
    late_per_lane,
    test_per_lane,
)
from delegation_lab.coordinator.study import MethodRun

ChildKey = tuple[str, int]


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


def _worker(tracking: dict, root: str, experiment: str, section: dict, inbox: Any, outbox: Any) -> None:
    from delegation_lab.tracking.tracker import Tracker

    tracker = Tracker(TrackingParams(**tracking), Path(root))
    points = section["mlflow_points"]
    ids: dict[ChildKey, str | None] = {}
    try:
        with tracker.stage_run(experiment, experiment, section) as parent:
            while (item := inbox.get()) is not None:
                kind, payload = item
                if kind == "fail":  # the main process failed: mark the parent run FAILED
                    raise RuntimeError(payload)
                if kind == "parent":
                    parent.log_metrics(payload)
                    continue
                with parent.child(payload["name"], payload["seed"], params=payload["params"], **payload["tags"]) as child:
                    child.log_series(payload["series"], points=points)  # downsampled there, full curves as Parquet
                    child.log_metrics(payload["finals"])
                    ids[(payload["name"], payload["seed"])] = child.run_id
        outbox.put(("ok", ids))
    except BaseException as e:  # report, never hang the stage
        outbox.put(("error", f"{type(e).__name__}: {e}"))


class BackgroundMlflow:
    """Submit finished runs while training goes on; `close()` waits and returns the child run ids.
    Used as a context manager, an exception inside the block (before or in `close`) aborts the
    worker: the parent run is marked FAILED."""

    def __init__(self, tracking: TrackingParams, root: Path, experiment: str, params: CoordinatorParams):
        self.params = params
        self.enabled = tracking.enabled
        if not self.enabled:
            return
        ctx = mp.get_context("spawn")
        self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
        self.proc = ctx.Process(
            target=_worker, args=(tracking.model_dump(), str(root), experiment, params.model_dump(), self.inbox, self.outbox),
            daemon=True,
        )
        self.proc.start()

    def submit(self, run: MethodRun) -> None:
        if self.enabled and run.method != "fixed_order":
            for payload in child_payloads(run, self.params):
                self.inbox.put(("child", payload))

    def parent_metrics(self, metrics: dict[str, float]) -> None:
        if self.enabled:
            self.inbox.put(("parent", metrics))

    def close(self) -> dict[ChildKey, str | None]:
        if not self.enabled:
            return {}
        self.inbox.put(None)
        status, value = self.outbox.get()
        self.proc.join(timeout=60)
        if status != "ok":
            raise RuntimeError(f"MLflow logging failed: {value}")
        return value

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if error is not None:
            self.abort(f"{kind.__name__}: {error}")

    def abort(self, reason: str = "the stage failed") -> None:
        """Mark the parent run FAILED and stop the worker (after what it has queued)."""
        if not self.enabled:
            return
        self.inbox.put(("fail", reason))
        self.proc.join(timeout=120)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=10)
