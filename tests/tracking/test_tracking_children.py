"""`dlab tracking serve --token-env` cleans up after a SIGKILL (issue 42): its MLflow server, uvicorn
worker and huey consumers (~10 processes, ~2.6 GB; the job runner is off now) and its private folder
were left behind, since a SIGKILL runs no handler. Now they run in one process group, die with the command (PR_SET_PDEATHSIG)
and a watchdog ends the group and removes the folder."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, REPO, env_with_venv


def _group_members(pgid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        out += [int(c) for c in task.read_text().split()]
    return out


@pytest.mark.processes
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="Linux /proc")
def test_sigkill_of_tracking_serve_leaves_no_process_and_no_private_folder(tmp_path: Path):
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**env_with_venv(), "DLAB_TEST_TOKEN": "s3cret", "TMPDIR": str(tmp)}
    serve = subprocess.Popen([str(BIN / "dlab"), "tracking", "serve", "--port", "0", "--token-env", "DLAB_TEST_TOKEN"],
                             cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        server = None
        while time.monotonic() < deadline:  # the MLflow server started and has children of its own
            kids = [k for k in _children(serve.pid) if b"mlflow" in Path(f"/proc/{k}/cmdline").read_bytes()]
            if kids and _children(kids[0]):
                server = kids[0]
                break
            time.sleep(0.5)
        assert server is not None, "the MLflow server did not start"
        assert b"MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" in Path(f"/proc/{server}/environ").read_bytes().split(b"\0")
        assert list(tmp.glob("dlab-tracking-*")), "no private folder"
        assert len(_group_members(server)) >= 2
    finally:
        serve.send_signal(signal.SIGKILL)
        serve.wait()
    deadline = time.monotonic() + 30
    while (_group_members(server) or list(tmp.glob("dlab-tracking-*"))) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = _group_members(server)
    for pid in left:  # don't leak them from the test run either
        os.kill(pid, signal.SIGKILL)
    assert left == [] and list(tmp.glob("dlab-tracking-*")) == []
