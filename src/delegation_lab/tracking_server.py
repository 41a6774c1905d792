"""`dlab tracking serve`: an MLflow server over the project's sqlite store on 127.0.0.1, the way
parallel writers (`dvc queue start -j N`, several machines' `solve` drivers) share one store.

Many processes opening one sqlite file race on its write lock ("database is locked"); behind one
server process with one worker every write is serialised there. Before it says it is ready the
command creates every study's experiment (idempotently), so concurrent first runs never race to
create the same experiment either.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml

from delegation_lab.config import TrackingParams
from delegation_lab.errors import InputError
from delegation_lab.tracking import Tracker, resolve_uri

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


def server_command(store_uri: str, artifacts: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store_uri,
            "--artifacts-destination", str(artifacts), "--host", HOST, "--port", str(port), "--workers", "1"]


def wait_until_up(url: str, server: subprocess.Popen, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise InputError(f"mlflow server exited with code {server.returncode} before answering on {url} "
                             f"(is the port taken?)")
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise InputError(f"mlflow server did not answer on {url} within {timeout_s:g} s")


def ensure_experiments(uri: str, names: Iterable[str]) -> list[str]:
    """Create each experiment that does not exist yet (an existing one is left as it is); their ids."""
    tracker = Tracker(TrackingParams(uri=uri))
    return [tracker.experiment_id(name) for name in names]


def serve(root: Path, tracking_uri: str, port: int | None = None, store: str | None = None,
          experiments: Iterable[str] = ()) -> int:
    """Run the server until it ends or Ctrl-C; its exit code."""
    store_uri, port = served_store(tracking_uri, root, store), served_port(tracking_uri, port)
    url = f"http://{HOST}:{port}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` stops the server too, through `finally`
    server = subprocess.Popen(server_command(store_uri, root / "mlartifacts", port), cwd=root)
    try:
        wait_until_up(url, server)
        names = sorted({*study_experiments(root), *experiments})
        ensure_experiments(url, names)
        print(f"MLflow server on {url} over {store_uri}; experiments ready: {', '.join(names)}\n"
              f"set `tracking.uri: {url}` in params.yaml (or `dvc exp run -S tracking.uri={url}`); Ctrl-C stops it",
              flush=True)
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
