"""The one study contract: a `Study` runs (`run(ctx) -> StudyResult`) and `write_study` writes what
it returns, the same way for every study stage:

    trajectories (TrajectoryWriter) -> figures and other files -> MLflow child run ids ->
    summaries (write_summaries) -> outcomes (write_outcomes) -> `finish` (late metrics) ->
    metrics/<study>.json (write_json_atomic) -> the parent run's tags, metrics and artifacts -> report

MLflow child runs are `ChildRun` records written by one `ChildRunWriter` under the stage's parent
run: in this process as they are submitted, or (`Study.background_children`) by one spawned worker
process, so a study that submits its children while it trains (`ctx.children.submit`) overlaps
the SQLite writes with its computation. With a worker the main process writes nothing to the store
until the worker has drained (the parent's own metrics and artifacts are logged after it).

`run_study_stage(ctx, study)` opens the parent run and the writer, runs the study and writes it;
a stage script is `run_stage(name, lambda ctx: run_study_stage(ctx, SomeStudy()))`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.pipeline.stage import StageContext
from delegation_lab.pipeline.store import TrajectoryWriter, write_summaries
from delegation_lab.pipeline.tables import write_json_atomic
from delegation_lab.tracking.tracker import StageRun

RunIds = dict[tuple, "str | None"]  # ChildRun.key -> its MLflow run id (None with tracking off)
Frame = pl.DataFrame | list[dict[str, Any]]


@dataclass
class ChildRun:
    """One MLflow child run (method x seed) as data: written in order by `log_child`."""

    name: str
    seed: int | None = None
    params: Any = None
    tags: Mapping[str, Any] = field(default_factory=dict)
    series: list[Mapping[str, Sequence[float]]] = field(default_factory=list)  # one log_series call each
    series_points: int | None = None  # log_series(points=...): at most this many points per curve
    stepped: list[tuple[int, Mapping[str, float]]] = field(default_factory=list)  # log_metrics(m, step=s), after series
    metrics: list[Mapping[str, float]] = field(default_factory=list)  # one log_metrics call each, last
    key: tuple | None = None  # when set, the run id is returned under this key (the summaries' run_id)


def log_child(parent: StageRun, c: ChildRun) -> str | None:
    """Write one child run under `parent`; its run id."""
    with parent.child(c.name, c.seed, params=c.params, **c.tags) as child:
        for series in c.series:
            child.log_series(series, points=c.series_points)
        for step, metrics in c.stepped:
            child.log_metrics(metrics, step=step)
        for metrics in c.metrics:
            child.log_metrics(metrics)
        return child.run_id


def log_children(parent: StageRun, children: Iterable[ChildRun]) -> RunIds:
    """Each child run, in order; the run ids of the keyed ones."""
    ids: RunIds = {}
    for c in children:
        run_id = log_child(parent, c)
        if c.key is not None:
            ids[c.key] = run_id
    return ids


def _log_children_to(uri: str, run_id: str, experiment_id: str, stage: str, series_points: int,
                     children: list[ChildRun]) -> RunIds:
    """`log_children` under the parent run `run_id` of the store at `uri` (in the worker process)."""
    from mlflow.tracking import MlflowClient

    return log_children(StageRun(MlflowClient(tracking_uri=uri), run_id, experiment_id, stage, series_points), children)


class ChildRunWriter:
    """The one way a study's child runs are written: `submit` them (any number of times, as they are
    ready), `run_ids()` waits for every submitted one. `background=True`: one spawned worker
    process writes them in submission order while this process goes on."""

    def __init__(self, parent: StageRun, uri: str, background: bool = False):
        self.parent, self.uri = parent, uri
        self.background = background and parent.active
        self._pool = None
        self._done: list[Future] = []
        self._ids: RunIds = {}

    def submit(self, children: Iterable[ChildRun]) -> None:
        children = list(children)
        if not self.parent.active or not children:
            return
        if not self.background:
            self._ids.update(log_children(self.parent, children))
            return
        if self._pool is None:
            from delegation_lab.pipeline.parallel import spawn_pool

            self._pool = spawn_pool(1, deterministic=False)
        p = self.parent
        self._done.append(self._pool.submit(_log_children_to, self.uri, p.run_id, p.experiment_id, p.stage,
                                            p.series_points, children))

    def run_ids(self) -> RunIds:
        """Every submitted child's run id by key, once written (a worker's failure is raised here)."""
        for done in self._done:
            self._ids.update(done.result())
        self._done = []
        return dict(self._ids)

    def close(self, failed: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=failed)
            self._pool = None

    def __enter__(self) -> ChildRunWriter:
        return self

    def __exit__(self, kind: type | None, *rest: object) -> None:
        self.close(failed=kind is not None)


@dataclass
class StudyContext:
    """The stage's context, the open parent run and the child-run writer, for `Study.run`."""

    stage: StageContext
    parent: StageRun
    children: ChildRunWriter

    def __getattr__(self, name: str) -> Any:  # params, layout, phase, phases, progress, args, tracker
        return getattr(self.stage, name)


@dataclass
class Written:
    """What `write_study` has written when it calls `StudyResult.finish`."""

    trajectory_rows: int
    run_ids: RunIds


@dataclass
class StudyResult:
    """Everything a study stage writes. `summaries` may be a function of the child runs' ids."""

    metrics: dict[str, Any]  # metrics/<study>.json
    # (partition, seed, frame[, point]), written lazily; point = (method, operating point) of the
    # summary rows whose steps these are (the links into Trajectories), left out for steps of no point
    trajectories: Iterable[tuple[str, int, pl.DataFrame] | tuple[str, int, pl.DataFrame, tuple[str, str]]] = ()
    summaries: Frame | Callable[[RunIds], Frame] | None = None  # results/summaries/<study>.parquet
    outcomes: Frame | Callable[[RunIds], Frame] | None = None  # results/outcomes/<study>.parquet
    figures: Callable[[], Iterable[Path | tuple[Path, str | None]] | None] | None = None  # writes plots/...; returns what to log
    children: list[ChildRun] = field(default_factory=list)  # child runs not yet submitted
    finish: Callable[[Written], None] | None = None  # late metrics (timings, row counts, checks on the written files)
    parent_metrics: Mapping[str, Any] = field(default_factory=dict)
    parent_tags: Mapping[str, Any] = field(default_factory=dict)
    artifacts: list[Path | tuple[Path, str | None]] = field(default_factory=list)  # logged after the metrics file
    log_metrics_file: bool = True  # the metrics json as an artifact of the parent run
    report: Callable[[dict[str, Any]], str] | None = None  # the stage's closing line(s)
    flush_rows: int = 200_000  # TrajectoryWriter's buffer
    phase_names: Mapping[str, str] = field(default_factory=dict)  # rename write_study's timed phases


@runtime_checkable
class Study(Protocol):
    """A study stage: its MLflow experiment, the stage (parent run) name, the params section it logs."""

    name: str  # the study: metrics/<name>.json, results/summaries/<name>.parquet, the trajectories' study=
    stage: str  # the DVC stage (and parent run name)

    def params(self, ctx: StageContext) -> Any: ...  # the parent run's params (a section or a dict)

    def background_children(self, ctx: StageContext) -> bool: ...

    def run(self, ctx: StudyContext) -> StudyResult: ...


def _frame(value: Frame | Callable[[RunIds], Frame], ids: RunIds) -> Frame:
    return value(ids) if callable(value) else value


def check_points(study: str, points: Mapping[str, Mapping[str, Any]], summaries: Frame) -> None:
    """Every point a trajectory partition says it holds is a summary row at each of its seeds: a link
    from a point to its steps cannot name a point the study did not report (InputError)."""
    rows = summaries.to_dicts() if isinstance(summaries, pl.DataFrame) else summaries
    reported = {(r["method"], r["operating_point"], int(r["seed"])) for r in rows}
    for partition, p in points.items():
        missing = [s for s in p["seeds"] if (p["method"], p["operating_point"], int(s)) not in reported]
        if missing:
            raise InputError(f"trajectories of {study}/{partition}: hold ({p['method']!r}, {p['operating_point']!r}) "
                             f"at seed(s) {missing}, which no summary row of {study} reports")


def write_study(ctx: StudyContext, study_name: str, result: StudyResult) -> dict[str, Any]:
    """Write `result` (see the module docstring for the order); the metrics written."""
    layout, names = ctx.stage.layout, dict(result.phase_names)

    def phase(name: str) -> Any:
        return ctx.stage.phase(names.get(name, name))

    ctx.children.submit(result.children)
    with phase("trajectories"), TrajectoryWriter(layout, study_name, flush_rows=result.flush_rows) as writer:
        for method, seed, frame, *point in result.trajectories:
            writer.add(method, seed, frame, point[0] if point else None)
    rows = writer.rows_written  # every row, once the writer has committed
    logged: list[Path | tuple[Path, str | None]] = []
    if result.figures is not None:
        with phase("plots"):
            logged += list(result.figures() or [])
    with phase("mlflow_wait"):
        ids = ctx.children.run_ids()
    with phase("summaries"):
        if result.summaries is not None:
            summaries = _frame(result.summaries, ids)
            check_points(study_name, writer.points(), summaries)
            write_summaries(layout, study_name, summaries)
        if result.outcomes is not None:
            write_outcomes(layout, study_name, _frame(result.outcomes, ids))
    if result.finish is not None:
        result.finish(Written(rows, ids))
    write_json_atomic(result.metrics, layout.metrics(study_name))
    parent = ctx.parent
    if result.parent_tags:
        parent.set_tags(result.parent_tags)
    if result.parent_metrics:
        parent.log_metrics(result.parent_metrics)
    for item in [*logged, *([layout.metrics(study_name)] if result.log_metrics_file else []), *result.artifacts]:
        path, folder = item if isinstance(item, tuple) else (item, None)
        parent.log_artifact(path, folder) if Path(path).is_file() else parent.log_artifacts(path, folder)
    if result.report is not None:
        print(result.report(result.metrics))
    return result.metrics


def run_study_stage(ctx: StageContext, study: Study) -> dict[str, Any]:
    """Open the study's parent run and child-run writer, run it, write it (the stage's body)."""
    with ctx.tracker.stage_run(study.name, study.stage, study.params(ctx)) as parent, \
            ChildRunWriter(parent, ctx.tracker.uri, study.background_children(ctx)) as children:
        sctx = StudyContext(ctx, parent, children)
        return write_study(sctx, study.name, study.run(sctx))
