"""The one MLflow wrapper every stage uses.

One experiment per study; one parent run per stage invocation, tagged with the git commit,
`DVC_EXP_NAME`, the stage name and a hash of its params section; one child run per
method x seed with its params, per-episode metrics (`log_batch` with `step`), final metrics and
artifacts. With tracking disabled every call is a no-op, so stage code never branches on it.

Every run records the process that owns it (tags `dlab.host`, `dlab.pid`, `dlab.pid_start`). A
stage killed without cleanup (SIGKILL, OOM, power) leaves its runs RUNNING; the stage's next run
marks those whose process is gone from this host FAILED (`mark_dead_runs_failed`). A run of another
host, or of a live process here (a concurrent `dvc exp run`), is left alone.

The store stays small: a logged curve keeps at most `tracking.series_points` points (means over
equal runs of consecutive values, each at the step of its run's last value), the full curves go to
one Parquet artifact per run (`curves.parquet`: key, step, value), and a stage's run that finishes
replaces its older runs of the same DVC experiment (`tracking.keep_runs` newest kept, children
included, hard-deleted; the sqlite file is vacuumed): the runs of other `dvc exp` experiments stay
to be compared. `dlab runs prune` does the same for every stage of the store; two pruners at once
(two `dlab runs prune`, or stages ending together) skip the runs the other deleted. Behind a server
(`dlab tracking serve`) the REST API can only soft-delete; `mlflow gc` purges those.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from delegation_lab.params.root import TrackingParams
from delegation_lab.flatten import flatten, is_number
from delegation_lab.hashing import stable_hash

# MLflow's telemetry thread fetches a config from the internet at import and, when that fails,
# deletes _MLFLOW_TELEMETRY_SESSION_ID from os.environ while the main thread may be iterating it
# (requests' proxy lookup on every REST call): a KeyError that fails a stage under load. Off before
# any mlflow import here; child processes (the `mlflow server` of `dlab tracking serve`) inherit it.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

EXPS_TMP = os.sep + os.path.join(".dvc", "tmp", "exps") + os.sep
MAX_BATCH = 1000  # MLflow accepts at most 1000 metrics per log_batch call


def project_root(start: Path | None = None) -> Path:
    """The repository root, also from inside a `dvc exp run --temp/--queue` copy (.dvc/tmp/exps/...)."""
    path = Path(os.environ.get("DVC_ROOT") or start or Path.cwd()).resolve()
    text = str(path)
    if EXPS_TMP in text:
        return Path(text.split(EXPS_TMP, 1)[0])
    return path


def resolve_uri(uri: str, root: Path | None = None) -> str:
    """Make a relative sqlite / file URI absolute against the repository root."""
    root = root or project_root()
    for scheme in ("sqlite:///", "file://"):
        if uri.startswith(scheme):
            rest = uri[len(scheme) :]
            if rest and not rest.startswith("/"):
                return scheme + str((root / rest).resolve())
    if "://" not in uri and not uri.startswith("/"):
        return str((root / uri).resolve())
    return uri


def git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*):[^@/\s]*@")


def without_url_passwords(value: str) -> str:
    """A password written into a URL (`https://user:secret@host`) never reaches the tracking store."""
    return _URL_PASSWORD.sub(r"\1:***@", value)


_METRIC_NAME_REFUSED = re.compile(r"[^A-Za-z0-9_\-. /]")  # characters MLflow refuses in a metric name


def metric_names(metrics: Any) -> dict[str, float]:
    """A metrics tree's numbers as MLflow metric names (a/b/c; a refused character, e.g. `=` or `>`,
    becomes `_`), the `paper` subtrees left out (the paper's figures are not this run's)."""
    return {_METRIC_NAME_REFUSED.sub("_", key): value
            for key, value in flatten(metrics, "/", numbers_only=True, skip={"paper"}).items()}


HOST_TAG, PID_TAG, PID_START_TAG = "dlab.host", "dlab.pid", "dlab.pid_start"


def _process_start(pid: int) -> str | None:
    """The process's start time (clock ticks since boot) from Linux /proc, None if there is no such
    live process (a zombie counts as gone); tells a reused pid from the original."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
    return None if fields[0] in ("Z", "X") else fields[19]


def owner_tags() -> dict[str, str]:
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), PID_START_TAG: _process_start(os.getpid()) or ""}


def owner_is_gone(tags: Mapping[str, str]) -> bool:
    """True only when the run's process was on this host and no longer runs (never for runs
    without owner tags, or of another host: their process cannot be seen from here)."""
    if tags.get(HOST_TAG) != socket.gethostname() or not tags.get(PID_TAG, "").isdigit():
        return False
    pid, started = int(tags[PID_TAG]), tags.get(PID_START_TAG)
    if Path("/proc/self/stat").exists():
        now = _process_start(pid)
        return now is None or (bool(started) and now != started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. another user's live process
        return False
    return False


def downsample(values: Sequence[float], points: int, steps: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of at most `points` points: means over consecutive equal-as-possible runs of
    the values, each at the step of its run's last value; a short curve is returned whole."""
    v = np.asarray(values, dtype=np.float64)
    s = np.arange(len(v)) if steps is None else np.asarray(steps, dtype=np.int64)
    if len(v) <= points:
        return s, v
    edges = np.linspace(0, len(v), points + 1).round().astype(np.int64)
    return s[edges[1:] - 1], np.add.reduceat(v, edges[:-1]) / np.diff(edges)


CURVES_ARTIFACT = "curves.parquet"


class Run:
    """A parent or child MLflow run (or a no-op stand-in when tracking is off)."""

    def __init__(self, client: Any, run_id: str | None, experiment_id: str | None, series_points: int = 200):
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.series_points = series_points
        self._curves: list[tuple[str, np.ndarray, np.ndarray]] = []  # full curves for the artifact

    @property
    def active(self) -> bool:
        return self.client is not None and self.run_id is not None

    def log_params(self, params: Mapping[str, Any] | Any) -> None:
        if not self.active:
            return
        from mlflow.entities import Param

        flat = flatten(params)
        items = [Param(k, without_url_passwords(json.dumps(v) if isinstance(v, list | dict) else str(v))[:6000])
                 for k, v in flat.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, metrics: Mapping[str, float | int | None], step: int = 0) -> None:
        if not self.active:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in flatten(metrics).items() if _is_number(v)]
        for i in range(0, len(items), MAX_BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + MAX_BATCH])

    def log_series(self, series: Mapping[str, Sequence[float]], start_step: int = 0,
                   steps: Sequence[int] | None = None, points: int | None = None) -> None:
        """Per-episode curves: each key's values at step = start_step + index (or the given `steps`,
        one per value), logged downsampled to at most `points` (at most `tracking.series_points`)
        points; the full curves are kept for the run's Parquet artifact (written when it ends)."""
        if not self.active:
            return
        from mlflow.entities import Metric

        cap = min(points or self.series_points, self.series_points)
        now = int(time.time() * 1000)
        items = []
        for key, values in series.items():
            v = np.asarray(values, dtype=np.float64)
            st = np.asarray(steps, dtype=np.int64) if steps is not None else start_step + np.arange(len(v))
            keep = np.isfinite(v)  # NaN and inf are never logged
            v, st = v[keep], st[keep]
            self._curves.append((key, st, v))
            ds, dv = downsample(v, cap, st)
            items += [Metric(key, float(x), now, int(i)) for i, x in zip(ds, dv, strict=True)]
        for i in range(0, len(items), MAX_BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + MAX_BATCH])

    def write_curves(self) -> None:
        """The full curves logged so far as one Parquet artifact (key, step, value) of this run."""
        if not self.active or not self._curves:
            return
        import tempfile

        import polars as pl

        frame = pl.DataFrame({
            "key": np.concatenate([np.full(len(v), k, dtype=object) for k, _, v in self._curves]).astype(str),
            "step": np.concatenate([st for _, st, _ in self._curves]),
            "value": np.concatenate([v for _, _, v in self._curves]),
        })
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / CURVES_ARTIFACT
            frame.write_parquet(path)
            self.client.log_artifact(self.run_id, str(path))
        self._curves = []

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if not self.active:
            return
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items() if v is not None])

    def log_artifact(self, path: Path | str, artifact_path: str | None = None) -> None:
        if self.active and Path(path).exists():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_artifacts(self, folder: Path | str, artifact_path: str | None = None) -> None:
        if self.active and Path(folder).is_dir():
            self.client.log_artifacts(self.run_id, str(folder), artifact_path)


def _is_number(value: Any) -> bool:
    return is_number(value) and value == value  # drops NaN


class StageRun(Run):
    """The parent run of one stage invocation; children are method x seed runs."""

    def __init__(self, client: Any, run_id: str | None, experiment_id: str | None, stage: str, series_points: int = 200):
        super().__init__(client, run_id, experiment_id, series_points)
        self.stage = stage

    @contextmanager
    def child(self, method: str, seed: int | None = None, params: Mapping[str, Any] | Any = None, **tags: Any) -> Iterator[Run]:
        if not self.active:
            yield Run(None, None, None)
            return
        from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

        name = method if seed is None else f"{method}/seed={seed}"
        run_tags = {MLFLOW_PARENT_RUN_ID: self.run_id, MLFLOW_RUN_NAME: name, "method": method, "stage": self.stage,
                    **owner_tags()}
        if seed is not None:
            run_tags["seed"] = str(seed)
        run_tags.update({k: str(v) for k, v in tags.items()})
        info = self.client.create_run(self.experiment_id, tags=run_tags, run_name=name)
        child = Run(self.client, info.info.run_id, self.experiment_id, self.series_points)
        if params is not None:
            child.log_params(params)
        status = "FAILED"
        try:
            yield child
            child.write_curves()
            status = "FINISHED"
        finally:
            self.client.set_terminated(child.run_id, status=status)


class Tracker:
    def __init__(self, params: TrackingParams, root: Path | None = None):
        self.params = params
        self.root = project_root(root)
        self.uri = resolve_uri(params.uri, self.root)
        self._client = None

    @property
    def client(self) -> Any:
        if self._client is None and self.params.enabled:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    def experiment_id(self, study: str) -> str:
        """Get or create the study's experiment; a concurrent creator is tolerated."""
        from mlflow.exceptions import MlflowException

        client = self.client
        found = client.get_experiment_by_name(study)
        if found is not None:
            return found.experiment_id
        try:
            return client.create_experiment(study)
        except MlflowException:
            found = client.get_experiment_by_name(study)
            if found is None:
                raise
            return found.experiment_id

    def mark_dead_runs_failed(self, experiment_id: str, stage: str) -> list[str]:
        """Mark FAILED the RUNNING runs (parents and children) of `stage` whose process is gone."""
        from mlflow.entities import RunTag

        running = self.client.search_runs(
            [experiment_id], filter_string=f"attributes.status = 'RUNNING' and tags.stage = '{stage}'", max_results=5000
        )
        dead = [r for r in running if owner_is_gone(r.data.tags)]
        for r in dead:
            note = (f"process {r.data.tags[PID_TAG]} on {r.data.tags[HOST_TAG]} ended without closing this run; "
                    f"marked FAILED by the next run of stage {stage}")
            self.client.log_batch(r.info.run_id, tags=[RunTag("dlab.failure", note)])
            self.client.set_terminated(r.info.run_id, status="FAILED")
        return [r.info.run_id for r in dead]

    @contextmanager
    def stage_run(self, study: str, stage: str, params_section: Any = None) -> Iterator[StageRun]:
        if not self.params.enabled:
            yield StageRun(None, None, None, stage)
            return
        from mlflow.utils.mlflow_tags import MLFLOW_GIT_COMMIT, MLFLOW_RUN_NAME

        section = params_section.model_dump() if hasattr(params_section, "model_dump") else (params_section or {})
        exp_id = self.experiment_id(study)
        self.mark_dead_runs_failed(exp_id, stage)
        tags = {
            MLFLOW_RUN_NAME: stage,
            "stage": stage,
            "dvc_exp_name": os.environ.get("DVC_EXP_NAME", ""),
            "params_hash": stable_hash(section, 16),
            **owner_tags(),
        }
        commit = git_commit(self.root)
        if commit:
            tags[MLFLOW_GIT_COMMIT] = commit
        info = self.client.create_run(exp_id, tags=tags, run_name=stage)
        run = StageRun(self.client, info.info.run_id, exp_id, stage, self.params.series_points)
        if section:
            run.log_params(section)
        status = "FAILED"
        try:
            yield run
            run.write_curves()
            status = "FINISHED"
        finally:
            self.client.set_terminated(run.run_id, status=status)
        # the finished run replaces the older ones of its own DVC experiment
        self.prune(study, stage, self.params.keep_runs, experiment=tags["dvc_exp_name"])

    def prune(self, study: str, stage: str | None = None, keep: int = 1, experiment: str | None = None) -> list[str]:
        """Hard-delete all but the `keep` newest runs of each stage of `study` (every stage, or
        `stage`; only the runs of DVC experiment `experiment` when given, "" for the workspace's),
        their children with them; a RUNNING run is never touched. Returns the deleted parent run
        ids; a sqlite store is vacuumed after a deletion. A server's store (http URI) only
        soft-deletes: MLflow's REST API has no hard delete."""
        found = self.client.get_experiment_by_name(study) if self.params.enabled else None
        if found is None:
            return []
        # the stage's own runs only (a stage run's end must not read every child run of the store)
        where = f"tags.stage = '{stage}'" if stage is not None else ""
        parents = [r for r in self.client.search_runs([found.experiment_id], where, max_results=50_000, run_view_type=3)
                   if "mlflow.parentRunId" not in r.data.tags and "stage" in r.data.tags  # ViewType.ALL
                   and (experiment is None or r.data.tags.get("dvc_exp_name", "") == experiment)]
        served = self.uri.startswith(("http://", "https://"))  # MLflow's REST API has no hard delete
        if served:  # runs soft-deleted before are gone from every view but ALL: not deleted again
            parents = [r for r in parents if r.info.lifecycle_stage != "deleted"]
        doomed: list[str] = []
        for name in {r.data.tags["stage"] for r in parents}:
            mine = sorted((r for r in parents if r.data.tags["stage"] == name), key=lambda r: r.info.start_time, reverse=True)
            doomed += [r.info.run_id for r in mine[keep:] if r.info.status != "RUNNING"]
        if not doomed:
            return []
        children = [r.info.run_id for parent in doomed for r in self.client.search_runs(
            [found.experiment_id], f"tags.mlflow.parentRunId = '{parent}'", max_results=50_000, run_view_type=3)]
        store = None if served else self._store()
        gone = {run_id for run_id in children + doomed if not self._delete(store, run_id)}
        if self.uri.startswith("sqlite:///"):
            import sqlite3

            try:
                with sqlite3.connect(self.uri[len("sqlite:///"):], timeout=30) as con:
                    con.execute("VACUUM")
            except sqlite3.OperationalError:  # another pruner holds the file ("database is locked"): it vacuums
                pass
        return [run_id for run_id in doomed if run_id not in gone]

    def _delete(self, store: Any, run_id: str) -> bool:
        """Delete one run; False when it is gone already: another pruner (a second `dlab runs prune`,
        a stage ending at the same time) deleted it between our search and this call."""
        from mlflow.exceptions import MlflowException
        from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode

        try:
            if store is None:
                self.client.delete_run(run_id)
            else:
                store._hard_delete_run(run_id)
        except MlflowException as e:
            if e.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
                return False
            if store is None and self.client.get_run(run_id).info.lifecycle_stage == "deleted":  # soft-deleted by the other
                return False
            raise
        return True

    def _store(self) -> Any:
        from mlflow.tracking._tracking_service.utils import _get_store

        return _get_store(self.uri)
