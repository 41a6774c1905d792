"""Services on hostile ground (issue 32): the README's `streamlit run` binds loopback, and two
`dlab runs prune` at once both succeed (the second skips the runs the first deleted)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from delegation_lab.params.root import TrackingParams
from delegation_lab.tracking.tracker import Tracker

from tests.conftest import BIN, REPO, env_with_venv, run


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


# ------------------------------------------------------------------------ tracking server token


async def echo(scope, receive, send) -> None:
    """An upstream that answers with what reached it: method, path, query, headers and body."""
    import json

    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    seen = {"method": scope["method"], "path": scope["path"], "query": scope["query_string"].decode(),
            "headers": {k.decode(): v.decode() for k, v in scope["headers"]}, "body": body.decode()}
    await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(seen).encode()})


def test_the_token_gate_refuses_without_the_token_and_forwards_with_it(tmp_path: Path):
    import asyncio

    import httpx

    from delegation_lab.tracking.auth import TokenGate

    gate = TokenGate("s3cret", str(tmp_path / "unused.sock"))
    gate.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=echo), base_url="http://127.0.0.1")

    async def calls() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://127.0.0.1:5055") as client:
            return [await client.get("/health"),
                    await client.get("/health", headers={"Authorization": "Bearer wrong"}),
                    await client.get("/health", headers={"Authorization": "s3cret"}),
                    await client.post("/api/2.0/mlflow/runs/create?x=1", content=b'{"a": 1}',
                                      headers={"Authorization": "Bearer s3cret"})]

    none, wrong, bare, good = asyncio.run(calls())
    for refused in (none, wrong, bare):
        assert refused.status_code == 401 and b"MLFLOW_TRACKING_TOKEN" in refused.content
    assert good.status_code == 201
    seen = good.json()
    assert (seen["method"], seen["path"], seen["query"], seen["body"]) == ("POST", "/api/2.0/mlflow/runs/create", "x=1", '{"a": 1}')
    assert "authorization" not in seen["headers"] and seen["headers"]["host"] == "127.0.0.1:5055"


def test_token_env_that_is_not_set_is_refused(tmp_path: Path):
    env = {k: v for k, v in env_with_venv().items() if k != "NO_SUCH_TOKEN_VAR"}
    proc = subprocess.run([str(BIN / "dlab"), "tracking", "serve", "--token-env", "NO_SUCH_TOKEN_VAR"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --token-env NO_SUCH_TOKEN_VAR: the variable is not set or empty"


@pytest.mark.processes
def test_a_served_store_with_a_token_serves_only_requests_that_carry_it(tmp_path: Path):
    """`dlab tracking serve` accepted unauthenticated writes from any local process; with
    --token-env, MLflow listens on a private socket and the port answers 401 without the token."""
    import socket

    import httpx
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    log = tmp_path / "serve.log"
    env = {**env_with_venv(), "DLAB_TEST_TOKEN": "s3cret"}
    env.pop("MLFLOW_TRACKING_TOKEN", None)
    server = subprocess.Popen([str(BIN / "dlab"), "tracking", "serve", "--port", str(port), "--token-env", "DLAB_TEST_TOKEN"],
                              cwd=tmp_path, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        import time

        deadline = time.monotonic() + 240
        while "experiments ready" not in log.read_text() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(1)
        assert server.poll() is None and "only requests with the token" in log.read_text(), log.read_text()
        assert httpx.get(f"{url}/health").status_code == 401
        assert httpx.post(f"{url}/api/2.0/mlflow/experiments/create", json={"name": "x"}).status_code == 401
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("MLFLOW_TRACKING_TOKEN", raising=False)
            with pytest.raises(MlflowException, match="401"):
                MlflowClient(url).search_experiments()
            mp.setenv("MLFLOW_TRACKING_TOKEN", "s3cret")
            client = MlflowClient(url)
            run_id = client.create_run(client.get_experiment_by_name("data").experiment_id).info.run_id
            client.log_metric(run_id, "x", 1.5)
            assert client.get_run(run_id).data.metrics == {"x": 1.5}
    finally:
        server.terminate()
        server.wait(timeout=60)
