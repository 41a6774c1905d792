"""`dlab tracking serve`: the store's address and port come from params, every study's experiment
exists before any worker starts, and two experiments queued with `dvc queue start -j 2` both land
in the served store with their params and no "database is locked"."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from delegation_lab.errors import InputError
from delegation_lab.tracking.server import served_port, served_store, server_env, study_experiments

from tests.conftest import BIN, REPO, env_with_venv, make_project, run


def test_store_and_port_come_from_tracking_uri(tmp_path: Path):
    assert served_store("sqlite:///mlflow.db", tmp_path, None) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert served_store("http://127.0.0.1:5055", tmp_path, None) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert served_port("http://127.0.0.1:5055", None) == 5055 and served_port("sqlite:///x.db", None) == 5000
    assert served_port("http://127.0.0.1:5055", 6000) == 6000
    with pytest.raises(InputError, match="--store 'postgresql://db/x'"):
        served_store("sqlite:///mlflow.db", tmp_path, "postgresql://db/x")


def test_the_server_runs_without_mlflows_job_runner(monkeypatch: pytest.MonkeyPatch):
    """MLflow's job runner (huey consumers, 8 more processes each importing MLflow) made the server
    take 60-85 s to answer on a 2-core machine (issue 42); the project submits no jobs. Set by the
    environment, the user's choice stands."""
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)
    assert server_env()["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "true")
    assert server_env()["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "true"


def test_every_study_of_the_dag_gets_its_experiment():
    names = study_experiments(REPO)
    assert {"data", "margent", "frontier", "coordinator", "market", "redref"} <= set(names)
    assert not any(n.startswith(("solve", "margent_", "prepare")) for n in names)


SKILLS = {"skill-a": 2.25, "skill-b": 2.5}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout_s: float, what: str, every_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)


@pytest.mark.processes
def test_two_queued_experiments_with_j2_land_in_the_served_store(tmp_path: Path):
    """Both experiments' runs land, and a workspace rerun behind the server replaces only its own
    older run (soft-deleted: MLflow's REST API has no hard delete). Two causes made one of the two
    experiments fail before: MLflow's telemetry thread deleting a variable from os.environ while
    the stage's REST call iterated it (a race that load makes likely), and a finished stage run
    pruning the other experiment's run of the same stage through a store method REST lacks."""
    from mlflow.tracking import MlflowClient

    project = make_project(tmp_path / "project")
    url = f"http://127.0.0.1:{free_port()}"
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["tracking"]["uri"] = url
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    run(["git", "add", "-A"], project)
    run(["git", "commit", "-qm", "project"], project)
    log = tmp_path / "serve.log"
    server = subprocess.Popen([str(BIN / "dlab"), "tracking", "serve"], cwd=project, env=env_with_venv(),
                              stdout=log.open("w"), stderr=subprocess.STDOUT)
    dvc = str(BIN / "dvc")
    try:
        wait_for(lambda: "experiments ready" in log.read_text() or server.poll() is not None, 240, "the server")
        assert server.poll() is None, log.read_text()
        for name, skill in SKILLS.items():
            run([dvc, "exp", "run", "--queue", "solve", "--name", name, "-S", f"solvers.A.simulated.skill={skill}"],
                project)
        run([dvc, "queue", "start", "-j", "2"], project)

        def finished() -> bool:
            status = run([dvc, "queue", "status"], project).stdout
            return "Queued" not in status and "Running" not in status

        # each look is a `dvc` process (~1.5 CPU s): every 5 s leaves the CPU to the experiments
        wait_for(finished, 900, "both queued experiments", every_s=5.0)
        status = run([dvc, "queue", "status"], project).stdout
        logs = {name: run([dvc, "queue", "logs", name], project, check=False) for name in SKILLS}
        for _ in range(2):  # the workspace's own prepare run, then its replacement
            run([str(BIN / "python"), "stages/prepare.py"], project)
    finally:
        run([dvc, "queue", "stop", "--kill"], project, check=False)
        server.terminate()
        server.wait(timeout=60)
    assert status.count("Success") == 2, (status, {name: out.stdout[-3000:] for name, out in logs.items()})
    for name, out in logs.items():
        assert "database is locked" not in out.stdout + out.stderr, (name, out.stdout[-3000:])
    # the server is gone; its store is the project's sqlite file
    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    data = client.get_experiment_by_name("data")
    runs = client.search_runs([data.experiment_id], filter_string="tags.stage = 'solve@A'")
    landed = {r.data.tags["dvc_exp_name"]: r for r in runs}
    assert set(landed) == set(SKILLS)
    assert {n: float(r.data.params["simulated.skill"]) for n, r in landed.items()} == SKILLS
    assert {r.info.status for r in runs} == {"FINISHED"}
    prepare = client.search_runs([data.experiment_id], filter_string="tags.stage = 'prepare'", run_view_type=3)
    by_exp = sorted((r.data.tags["dvc_exp_name"], r.info.lifecycle_stage) for r in prepare)
    assert by_exp == [("", "active"), ("", "deleted"), ("skill-a", "active"), ("skill-b", "active")], by_exp
