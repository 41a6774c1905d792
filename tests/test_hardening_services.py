"""Services on hostile ground (issue 32): the README's `streamlit run` binds loopback, and two
`dlab runs prune` at once both succeed (the second skips the runs the first deleted)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from delegation_lab.config import TrackingParams
from delegation_lab.tracking import Tracker

from .conftest import BIN, REPO, env_with_venv, run


def test_streamlit_run_from_the_repository_binds_loopback_only():
    """`streamlit run dashboards/app.py` listened on every interface; the project's config file
    now sets the address (a command-line `--server.address` still wins, to expose it on purpose)."""
    shown = run([str(BIN / "python"), "-m", "streamlit", "config", "show"], REPO).stdout
    assert f'# The value below was set in {REPO / ".streamlit" / "config.toml"}\naddress = "127.0.0.1"' in shown


def stage_runs(tracker: Tracker, study: str, stage: str, n: int) -> None:
    for _ in range(n):
        with tracker.stage_run(study, stage) as parent:
            with parent.child("m", seed=0) as child:
                child.log_metrics({"x": 1.0})


def parents(tracker: Tracker, study: str) -> list:
    found = tracker.client.get_experiment_by_name(study)
    return [r for r in tracker.client.search_runs([found.experiment_id], run_view_type=3) if "mlflow.parentRunId" not in r.data.tags]


@pytest.fixture
def crowded(tmp_path: Path) -> Path:
    """A store where one stage has five runs (keep_runs 10: no stage pruned on its own)."""
    stage_runs(Tracker(TrackingParams(uri="sqlite:///mlflow.db", keep_runs=10), root=tmp_path), "study", "stage", 5)
    return tmp_path


def test_a_second_pruner_skips_the_runs_the_first_deleted_meanwhile(crowded: Path, monkeypatch):
    """The interleaving of two `dlab runs prune` at once, made deterministic: between this pruner's
    search and its first deletion, another pruner deletes every old run. It raised `MlflowException:
    Run '…' not found`."""
    first = Tracker(TrackingParams(uri="sqlite:///mlflow.db"), root=crowded)
    other = Tracker(TrackingParams(uri="sqlite:///mlflow.db"), root=crowded)
    real_store = first._store
    deleted_by_other: list[str] = []

    class Racing:
        def __init__(self) -> None:
            self.store = real_store()

        def _hard_delete_run(self, run_id: str) -> None:
            if not deleted_by_other:
                deleted_by_other.extend(other.prune("study", keep=1))
            self.store._hard_delete_run(run_id)

    monkeypatch.setattr(first, "_store", Racing)
    assert first.prune("study", keep=1) == []
    assert len(deleted_by_other) == 4 and len(parents(first, "study")) == 1


@pytest.mark.processes
def test_two_runs_prune_at_once_both_succeed(crowded: Path):
    stage_runs(Tracker(TrackingParams(uri="sqlite:///mlflow.db", keep_runs=40), root=crowded), "study", "stage", 25)
    params = crowded / "params.yaml"
    params.write_text((REPO / "params.yaml").read_text())
    cmd = [str(BIN / "dlab"), "runs", "prune", "--params", str(params)]
    procs = [subprocess.Popen(cmd, cwd=crowded, env=env_with_venv(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and "Traceback" not in err, err
    assert len(parents(Tracker(TrackingParams(uri="sqlite:///mlflow.db"), root=crowded), "study")) == 1
