"""The stage's MLflow child runs (method x seed), written from a list of `Child` records, so the
logging can run in a worker process (`redref.workers` > 1) beside the simulations and the
trajectory writing instead of after them: it is most of the stage's SQLite work."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from delegation_lab.tracking import StageRun


@dataclass
class Child:
    name: str
    seed: int | None
    params: Any = None
    series: list[dict[str, list[float]]] = field(default_factory=list)  # one log_series call each
    metrics: list[dict[str, float]] = field(default_factory=list)  # one log_metrics call each
    key: tuple[str, int] | None = None  # when set, the child's run id is returned under this key


def write_children(run: StageRun, children: list[Child]) -> dict[tuple[str, int], str | None]:
    """Each child run under `run`, in order; the run ids of the keyed ones."""
    ids: dict[tuple[str, int], str | None] = {}
    for c in children:
        with run.child(c.name, c.seed, params=c.params) as child:
            for series in c.series:
                child.log_series(series)
            for metrics in c.metrics:
                child.log_metrics(metrics)
            if c.key is not None:
                ids[c.key] = child.run_id
    return ids


def write_children_to(uri: str, run_id: str, experiment_id: str, stage: str, series_points: int,
                      children: list[Child]) -> dict[tuple[str, int], str | None]:
    """`write_children` under the parent run `run_id` of the store at `uri` (in a worker process)."""
    from mlflow.tracking import MlflowClient

    return write_children(StageRun(MlflowClient(tracking_uri=uri), run_id, experiment_id, stage, series_points), children)
