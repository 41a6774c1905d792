"""The `solve` stage against a local OpenAI-compatible fake: a run with no answer exits non-zero
with the error counts (`min_success_share` sets the bar for partial runs), and two processes
filling one solver's cache at once pay for each item once (the cache's file lock), and a run killed
while one request hangs keeps every answer that completed."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.pipeline.stage import run_stage

from tests.conftest import BIN, REPO, env_with_venv
from tests.solvers.test_backend_openai_compat import FakeServer

KEY_ENV = "DLAB_TEST_STAGE_KEY"


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    if fake.hold is not None:
        fake.hold.set()
    fake.close()


def write_project(root: Path, base_url: str, tracking: bool = False, per_split: int = 3, **solver) -> Path:
    """A folder with params.yaml (solver A on the endpoint) and prepared items; no git, no DVC."""
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["data"].update(ability_size=per_split, train_size=per_split, test_size=per_split)
    raw["portfolio"].update(router_folds=2, cv_folds=2)  # a fold needs an item: params check refuses more folds than train items
    raw["solvers"]["A"] = {
        "backend": "openai_compat", "model": "fake-model",
        "price": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 3.0},
        "openai_compat": {"base_url": base_url, "api_key_env": KEY_ENV, "concurrency": 2, "max_retries": 0,
                          "backoff_s": 0.01, "timeout_s": 10.0},
        **solver,
    }
    raw["tracking"]["enabled"] = tracking
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    assert stage_in(root, "prepare", []) == 0
    return root


def stage_in(root: Path, stage: str, argv: list[str]) -> int:
    """Run stages/<stage>.py in this process with `root` as the working directory; its exit code."""
    spec = importlib.util.spec_from_file_location(f"stage_{stage}", REPO / "stages" / f"{stage}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    here = Path.cwd()
    try:
        os.chdir(root)
        run_stage(stage, getattr(module, stage), getattr(module, "arguments", None), argv=[*argv, "--no-progress"])
        return 0
    except SystemExit as e:
        return e.code
    finally:
        os.chdir(here)


def test_a_solve_where_every_request_failed_exits_non_zero_with_the_counts(server, tmp_path, capsys):
    server.mode, server.status, server.fail_first = "status", 401, 10**6
    project = write_project(tmp_path / "p", server.url)
    assert stage_in(project, "solve", ["--solver", "A"]) == 1
    err = capsys.readouterr().err
    assert "0 of 9 items answered, 9 error rows (9 errors in this run): no item was answered" in err
    assert "HTTP 401" in err and "--retry-errors" in err
    stats = json.loads((project / "metrics" / "solve_runs" / "A.json").read_text())
    assert (stats["answered"], stats["error_rows"], stats["backend_calls"]) == (0, 9, 9)
    assert pl.read_parquet(project / "data" / "answers" / "A.parquet")["error"].null_count() == 0  # rows kept

    # a rerun without --retry-errors sends nothing and still fails: the cache holds no answer
    assert stage_in(project, "solve", ["--solver", "A"]) == 1
    assert "0 of 9 items answered" in capsys.readouterr().err and server.calls == 9

    server.mode = "ok"  # the endpoint is fixed: retrying the errors succeeds and the stage passes
    assert stage_in(project, "solve", ["--solver", "A", "--retry-errors"]) == 0
    assert json.loads((project / "metrics" / "solve_runs" / "A.json").read_text())["answered"] == 9


def test_one_stage_fills_every_solver_and_a_failing_one_stops_none_of_the_others(server, tmp_path, capsys):
    server.mode, server.status, server.fail_first = "status", 401, 10**6
    project = write_project(tmp_path / "p", server.url)  # A on the failing endpoint, B and C simulated
    assert stage_in(project, "solve", []) == 1
    err = capsys.readouterr().err
    assert "solver A: 0 of 9 items answered" in err and "solver B" not in err and len(err.strip().splitlines()) == 1
    runs = {s: json.loads((project / "metrics" / "solve_runs" / f"{s}.json").read_text()) for s in "ABC"}
    assert [runs[s]["answered"] for s in "ABC"] == [0, 9, 9]
    for s in "BC":
        assert pl.read_parquet(project / "data" / "answers" / f"{s}.parquet").height == 9
    assert not (project / "metrics" / "timings" / "solve.json").exists()  # a failed stage writes no timings

    server.fail_first = 0  # the endpoint is back: the rerun sends A's errors again and nothing of B or C
    assert stage_in(project, "solve", ["--retry-errors"]) == 0
    runs = {s: json.loads((project / "metrics" / "solve_runs" / f"{s}.json").read_text()) for s in "ABC"}
    assert [(runs[s]["answered"], runs[s]["backend_calls"]) for s in "ABC"] == [(9, 9), (9, 0), (9, 0)]
    timings = json.loads((project / "metrics" / "timings" / "solve.json").read_text())
    assert set(timings["phases"]) == {"A", "B", "C"}


def test_an_unknown_solver_is_one_line_naming_the_known_ones(server, tmp_path, capsys):
    project = write_project(tmp_path / "p", server.url)
    assert stage_in(project, "solve", ["--solver", "B", "--solver", "Z"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "solve: error: --solver 'Z' not in params.yaml solvers (have: A, B, C)"
    assert not (project / "metrics" / "solve_runs").exists()  # refused before any solver ran


@pytest.mark.parametrize(("share", "code"), [(0.0, 0), (0.5, 0), (0.9, 1)])
def test_min_success_share_sets_the_bar_for_a_partial_run(server, tmp_path, capsys, share, code):
    server.mode, server.status, server.fail_first = "status", 400, 3  # 3 of 9 fail, not retried
    project = write_project(tmp_path / "p", server.url, min_success_share=share,
                            openai_compat={"base_url": server.url, "api_key_env": None, "max_retries": 0})
    assert stage_in(project, "solve", ["--solver", "A"]) == code
    captured = capsys.readouterr()
    if code:
        assert "6 of 9 items answered, 3 error rows" in captured.err and "min_success_share=0.9" in captured.err
    else:
        assert "3 error rows kept; rerun with --retry-errors" in captured.out


@pytest.mark.processes
def test_two_processes_filling_one_cache_pay_for_each_item_once(server, tmp_path):
    server.hold = threading.Event()  # the first process's first request waits until released
    project = write_project(tmp_path / "p", server.url, per_split=2)
    solve = [str(BIN / "python"), str(REPO / "stages" / "solve.py"), "--solver", "A"]
    logs = {name: (tmp_path / f"{name}.out", tmp_path / f"{name}.err") for name in ("first", "second")}

    def start(name: str, *extra: str) -> subprocess.Popen:
        out, err = logs[name]
        return subprocess.Popen([*solve, *extra], cwd=project, env=env_with_venv(), stdout=out.open("w"),
                                stderr=err.open("w"))

    procs = [start("first")]
    try:
        deadline = time.monotonic() + 120  # generous: stage start-up is slow on a loaded machine
        while server.calls == 0 and time.monotonic() < deadline:  # the first process holds the lock now
            time.sleep(0.05)
        assert server.calls >= 1
        procs.append(start("second"))
        impatient = subprocess.run([*solve, "--lock-wait", "0"], cwd=project, env=env_with_venv(),
                                   capture_output=True, text=True, timeout=120)
        assert impatient.returncode == 1
        assert "data/.journal/A.lock is held: another process is filling this answer cache" in impatient.stderr
        deadline = time.monotonic() + 120
        while "waiting for" not in logs["second"][1].read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "waiting for data/.journal/A.lock" in logs["second"][1].read_text()
        assert procs[0].poll() is None and server.calls <= 6  # first still held; nothing sent twice
    finally:
        server.hold.set()
        for proc in procs:
            proc.wait(timeout=120)
    assert [p.returncode for p in procs] == [0, 0], [logs[n][1].read_text() for n in logs]
    prompts = Counter(server.prompts)
    assert len(prompts) == 6 and set(prompts.values()) == {1}  # six items, each sent once in all
    second = json.loads((project / "metrics" / "solve_runs" / "A.json").read_text())
    assert (second["backend_calls"], second["cached"], second["answered"]) == (0, 6, 6)


@pytest.mark.processes
def test_a_run_killed_while_one_request_hangs_keeps_every_completed_answer(server, tmp_path):
    server.hold = threading.Event()  # call 1 hangs until released; the other five answer at once
    project = write_project(tmp_path / "p", server.url, per_split=2)
    journal = project / "data" / ".journal" / "A"
    proc = subprocess.Popen([str(BIN / "python"), str(REPO / "stages" / "solve.py"), "--solver", "A"], cwd=project,
                            env=env_with_venv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        rows = 0
        while rows < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
            parts = sorted(journal.glob("part-*.parquet"))
            rows = sum(pl.read_parquet(p).height for p in parts)
        assert rows == 5 and proc.poll() is None
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    server.hold.set()
    assert stage_in(project, "solve", ["--solver", "A"]) == 0
    stats = json.loads((project / "metrics" / "solve_runs" / "A.json").read_text())
    assert (stats["cached"], stats["backend_calls"], stats["answered"]) == (5, 1, 6)  # only the hung item again
