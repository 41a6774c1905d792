"""`dlab tracking serve`: an MLflow server over the project's sqlite store on 127.0.0.1, the way
parallel writers (`dvc queue start -j N`, several machines' `solve` drivers) share one store.

Many processes opening one sqlite file race on its write lock ("database is locked"); behind one
server process with one worker every write is serialised there. Before it says it is ready the
command creates every study's experiment (idempotently), so concurrent first runs never race to
create the same experiment either.

MLflow's server starts a uvicorn worker, and by default also a job runner (huey consumers for the
GenAI job features: judge optimisation, scheduled scorers), each importing all of MLflow. This
project submits no jobs, so the server runs with MLflow's own switch
MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false (unless the environment sets it): on this 2-core machine
the consumers' imports competed with the worker's and made the server take 60-85 s to answer.
While it starts, this process imports MLflow's client (for `ensure_experiments`) in a thread, so
that import is not paid after the server is up either.

The server and its worker run in one process group of their own, started with PR_SET_PDEATHSIG
(SIGTERM when this process dies) and watched by a small watchdog process, which kills the group
and removes the private folder once this process is gone however it ended: a SIGKILL runs no
handler of ours, and left ~10 MLflow / huey processes (~2.6 GB) and the private folder behind.

Without a token the server is unauthenticated: any process on this machine can read and write the
store through it. With `--token-env VAR` it listens on a Unix socket in a private folder and
`tracking_auth.TokenGate` on 127.0.0.1:PORT lets through only requests with the bearer token.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml

from delegation_lab.params.root import TrackingParams
from delegation_lab.errors import InputError
from delegation_lab.tracking.tracker import Tracker, resolve_uri

HOST = "127.0.0.1"
DEFAULT_PORT = 5000
START_TIMEOUT_S = 180.0
DATA_STAGES = {"prepare", "solve", "label", "ability_map", "embed"}
"""Stages that log to the `data` experiment; every other stage's study is its name (margent_* share one)."""


def study_experiments(root: Path) -> list[str]:
    """The MLflow experiments the project's stages log to, from dvc.yaml's stage names."""
    path = root / "dvc.yaml"
    stages = (yaml.safe_load(path.read_text()) or {}).get("stages", {}) if path.exists() else {}
    names = {"data" if s in DATA_STAGES else s.split("_")[0] if s.startswith("margent_") else s for s in stages}
    return sorted(names | {"data"})


def served_store(tracking_uri: str, root: Path, store: str | None) -> str:
    """The sqlite store to serve: `store`, else tracking.uri when it is sqlite, else <root>/mlflow.db."""
    uri = store or (tracking_uri if tracking_uri.startswith("sqlite:") else "sqlite:///mlflow.db")
    if not uri.startswith("sqlite:"):
        raise InputError(f"--store {uri!r}: `dlab tracking serve` serves a sqlite store (sqlite:///PATH)")
    return resolve_uri(uri, root)


def served_port(tracking_uri: str, port: int | None) -> int:
    """`port`, else the port of an http://127.0.0.1:PORT tracking.uri, else DEFAULT_PORT."""
    if port is not None:
        return port
    parts = urlsplit(tracking_uri)
    if parts.scheme in ("http", "https") and parts.hostname in (HOST, "localhost") and parts.port:
        return parts.port
    return DEFAULT_PORT


def server_command(store_uri: str, artifacts: Path, port: int, socket_path: Path | None = None) -> list[str]:
    """mlflow server on HOST:port, or (socket_path) on that Unix socket only: uvicorn's --uds wins
    over --host / --port."""
    uds = ["--uvicorn-opts", f"--uds {socket_path}"] if socket_path else []
    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store_uri,
            "--artifacts-destination", str(artifacts), "--host", HOST, "--port", str(port), "--workers", "1", *uds]


WATCHDOG = r"""
import os, shutil, signal, sys, time
parent, group, private = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
signal.signal(signal.SIGINT, signal.SIG_IGN)
while os.getppid() == parent:
    time.sleep(0.5)
for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 2.0)):
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        break
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
if private:
    shutil.rmtree(private, ignore_errors=True)
"""
"""Run by `watch_children` with (this process's pid, the server's process group, the private folder):
when this process is gone (the watchdog is handed to init), SIGTERM then SIGKILL to the group, then
the folder removed. It imports nothing of the project (a few MB)."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux's PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def server_env() -> dict[str, str]:
    """This process's environment, with MLflow's job runner off unless the environment says otherwise
    (the module docstring)."""
    return {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **os.environ}


def start_server(command: list[str], root: Path, private: Path | None) -> subprocess.Popen:
    """The MLflow server in a process group of its own (its uvicorn worker inherits it), told
    to die with this process, and watched by `WATCHDOG`, which ends the group and removes `private` once
    this process is gone (a SIGKILL included)."""
    server = subprocess.Popen(command, cwd=root, env=server_env(), start_new_session=True, preexec_fn=_die_with_parent)
    subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid()), str(server.pid), str(private or "")],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, close_fds=True)
    return server


def stop_server(server: subprocess.Popen, timeout_s: float = 30) -> None:
    """SIGTERM to the server's process group (its uvicorn worker), then SIGKILL after `timeout_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=timeout_s)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_until_up(url: str, server: subprocess.Popen, timeout_s: float = START_TIMEOUT_S,
                  client: httpx.Client | None = None) -> None:
    client = client or httpx.Client()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise InputError(f"mlflow server exited with code {server.returncode} before answering on {url} "
                             f"(is the port taken?)")
        try:
            if client.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise InputError(f"mlflow server did not answer on {url} within {timeout_s:g} s")


def start_gate(token: str, socket_path: Path, port: int) -> object:
    """TokenGate on HOST:port in a thread (uvicorn.Server; `.should_exit = True` stops it)."""
    import uvicorn

    from delegation_lab.tracking.auth import TokenGate

    gate = uvicorn.Server(uvicorn.Config(TokenGate(token, str(socket_path)), host=HOST, port=port, log_level="warning",
                                         lifespan="on"))
    threading.Thread(target=gate.run, name="token-gate", daemon=True).start()
    deadline = time.monotonic() + 30
    while not gate.started:
        if time.monotonic() > deadline or (not gate.started and gate.should_exit):
            raise InputError(f"the token gate could not listen on {HOST}:{port} (is the port taken?)")
        time.sleep(0.1)
    return gate


def ensure_experiments(uri: str, names: Iterable[str]) -> list[str]:
    """Create each experiment that does not exist yet (an existing one is left as it is); their ids."""
    tracker = Tracker(TrackingParams(uri=uri))
    return [tracker.experiment_id(name) for name in names]


def serve(root: Path, tracking_uri: str, port: int | None = None, store: str | None = None,
          experiments: Iterable[str] = (), token: str | None = None) -> int:
    """Run the server until it ends or Ctrl-C; its exit code. With `token`, only requests with
    `Authorization: Bearer <token>` reach it (the module docstring)."""
    store_uri, port = served_store(tracking_uri, root, store), served_port(tracking_uri, port)
    url = f"http://{HOST}:{port}"
    private = Path(tempfile.mkdtemp(prefix="dlab-tracking-")) if token else None  # mode 0700
    socket_path = private / "mlflow.sock" if private else None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` stops the server too, through `finally`
    server = start_server(server_command(store_uri, root / "mlartifacts", port, socket_path), root, private)
    client_import = threading.Thread(target=importlib.import_module, args=("mlflow.tracking",), daemon=True)
    client_import.start()  # while the server starts: ensure_experiments needs MLflow's client
    gate = None
    try:
        if token and socket_path:
            wait_until_up("http://127.0.0.1", server, client=httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path))))
            gate = start_gate(token, socket_path, port)
            os.environ["MLFLOW_TRACKING_TOKEN"] = token  # this process's own client (ensure_experiments)
        else:
            wait_until_up(url, server)
        names = sorted({*study_experiments(root), *experiments})
        ensure_experiments(url, names)
        print(f"MLflow server on {url} over {store_uri}; experiments ready: {', '.join(names)}\n"
              f"set `tracking.uri: {url}` in params.yaml (or `dvc exp run -S tracking.uri={url}`); Ctrl-C stops it"
              + ("\nonly requests with the token are served: export MLFLOW_TRACKING_TOKEN=<token> for the stages" if token else
                 "\nunauthenticated: any process on this machine can use it (--token-env VAR requires a token)"),
              flush=True)
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if gate is not None:
            gate.should_exit = True  # type: ignore[attr-defined]
        stop_server(server)
        if private:
            shutil.rmtree(private, ignore_errors=True)
