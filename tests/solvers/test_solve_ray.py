"""The Ray executor of `solve` on a real local Ray cluster (2 CPUs): its cache equals the local
executor's row for row (simulated, and SmolLM2 through llama.cpp), a killed actor is survived with
no duplicate and no lost answer, a killed driver resumes with only what is missing, and a bad
executor section fails naming the key or the address before any request is sent."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import polars as pl
import psutil
import pytest
import yaml

from delegation_lab.params.root import ConfigError, parse_params
from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.errors import InputError
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.cache import AnswerCache
from delegation_lab.solvers.executor import build_executor
from delegation_lab.solvers.params import SolverParams

from tests.conftest import BIN, REPO, env_with_venv, needs_llamacpp
from tests.solvers.test_backend_openai_compat import FakeServer
from tests.solvers.test_solve_stage import stage_in

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.processes]  # a local Ray cluster's processes; drivers and actors killed

PRICE = {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 3.0}
ROW_COLUMNS = ["solver", "item_id", "request_hash", "role", "backend", "model", "answer_text", "parsed_answer",
               "tokens_in", "tokens_out", "cost_usd", "latency_s", "error", "extra"]  # all but created_at


@pytest.fixture(scope="module")
def cluster():
    """A real Ray instance with 2 CPUs on this machine, shut down even when a test fails."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def simulated(executor: dict | None = None, sleep_scale: float = 0.0, batch_size: int = 256) -> SolverParams:
    return SolverParams(backend="simulated", model="sim-b", price=PRICE, batch_size=batch_size,
                        simulated={"skill": 1.2, "seed": 4, "sleep_scale": sleep_scale},
                        executor=executor or {})


def fill(tmp: Path, params: SolverParams, items, **kw):
    """Fill a fresh cache with these params' executor; (run, cache frame, the answers in the order written)."""
    solver = build_solver("B", params)
    cache = AnswerCache(tmp / "B.parquet", tmp / "journal" / "B")
    written = []
    executor = build_executor("B", params)
    try:
        on_batch = kw.pop("on_batch", None)

        def batch_done(answers):
            written.extend(answers)
            if on_batch:
                on_batch(executor, answers)

        run = cache.fill(solver, [solver.request(i) for i in items], batch_size=params.batch_size, progress=False,
                         executor=executor, on_batch=batch_done, **kw)
    finally:
        executor.close()
    return run, cache.read(), written


def rows(frame: pl.DataFrame, timed: bool = False) -> list[dict]:
    """The rows without created_at (and without latency_s for a real backend, whose latency is measured)."""
    columns = [c for c in ROW_COLUMNS if not (timed and c == "latency_s")]
    return frame.select(columns).sort(["item_id", "request_hash"]).to_dicts()


ITEMS = generate(ArithParams(min_steps=1, max_steps=4), 45, seed=11)


def test_ray_cache_equals_the_local_one_row_for_row(cluster, tmp_path):
    _, local, _ = fill(tmp_path / "local", simulated(), ITEMS)
    run, remote, written = fill(tmp_path / "ray", simulated({"kind": "ray", "workers": 2, "batch_size": 7}), ITEMS)
    assert local.height == remote.height == len(ITEMS)
    assert rows(remote) == rows(local)  # same hashes, same answers, same prices
    assert (run.executor, run.workers, run.batches, run.retries) == ("ray", 2, math.ceil(len(ITEMS) / 7), 0)
    assert run.backend_calls == len(ITEMS) and len(written) == len(ITEMS)


def test_a_killed_actor_is_survived_without_duplicates_or_losses(cluster, tmp_path):
    killed = []

    def kill_one(executor, answers):
        if not killed:  # the other tasks are still sleeping inside their actors
            killed.append(executor.ray.get(executor.actors[0].ready.remote()))
            executor.ray.kill(executor.actors[0], no_restart=False)  # Ray restarts it; its tasks died with it

    # each batch sleeps ~0.5 s (simulated latency x sleep_scale), so the first kill finds tasks in flight
    params = simulated({"kind": "ray", "workers": 2, "batch_size": 5}, sleep_scale=0.2)
    run, remote, written = fill(tmp_path / "ray", params, ITEMS, on_batch=kill_one)
    _, local, _ = fill(tmp_path / "local", simulated(), ITEMS)
    assert killed and run.retries >= 1
    counts = Counter((a.item_id, a.request_hash) for a in written)
    assert len(counts) == len(ITEMS) and set(counts.values()) == {1}  # each answered exactly once
    assert rows(remote) == rows(local)


def test_a_bad_executor_section_names_the_key(tmp_path):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    for section, key in (({"kind": "dask"}, "executor.kind"), ({"kind": "ray", "workers": 0}, "executor.workers")):
        name = next(iter(raw["solvers"]))
        bad = {**raw, "solvers": {**raw["solvers"], name: {**raw["solvers"][name], "executor": section}}}
        with pytest.raises(ConfigError, match=rf"solvers\.{name}\.{key}"):
            parse_params(bad)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


def test_an_unreachable_address_or_too_few_cpus_fail_before_any_request(cluster):
    server = FakeServer()
    try:
        endpoint = {"base_url": server.url, "api_key_env": None, "max_retries": 0}
        port = closed_port()
        params = SolverParams(backend="openai_compat", model="m", price=PRICE, openai_compat=endpoint,
                              executor={"kind": "ray", "address": f"127.0.0.1:{port}"})
        with pytest.raises(InputError, match=rf"solvers\.A\.executor\.address '127\.0\.0\.1:{port}' is unreachable"):
            build_executor("A", params)
        params = SolverParams(backend="openai_compat", model="m", price=PRICE, openai_compat=endpoint,
                              executor={"kind": "ray", "workers": 5})
        with pytest.raises(InputError, match=r"solvers\.A\.executor: workers=5 x cpus_per_worker=1 needs 5 CPUs"):
            build_executor("A", params)
        assert server.calls == 0
    finally:
        server.close()


def write_project(root: Path, per_split: int, **solver_a) -> Path:
    """params.yaml with solver A (simulated) configured by `solver_a`, items prepared; no git, no DVC."""
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["data"].update(ability_size=per_split, train_size=per_split, test_size=per_split)
    raw["solvers"]["A"].update(solver_a)
    raw["tracking"]["enabled"] = False
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    assert stage_in(root, "prepare", []) == 0
    return root


def test_the_solve_stage_on_ray_writes_the_local_cache_and_reports_the_pool(cluster, tmp_path):
    ray_run = write_project(tmp_path / "ray", 8, executor={"kind": "ray", "workers": 2, "batch_size": 5})
    local_run = write_project(tmp_path / "local", 8)
    assert stage_in(ray_run, "solve", ["--solver", "A"]) == 0
    assert stage_in(local_run, "solve", ["--solver", "A"]) == 0
    answers = {p: pl.read_parquet(p / "data" / "answers" / "A.parquet") for p in (ray_run, local_run)}
    assert answers[ray_run].height == 24 and rows(answers[ray_run]) == rows(answers[local_run])
    stats = json.loads((ray_run / "metrics" / "solve_runs" / "A.json").read_text())
    assert {k: stats[k] for k in ("executor", "workers", "batches", "retries", "backend_calls")} == {
        "executor": "ray", "workers": 2, "batches": 5, "retries": 0, "backend_calls": 24}
    assert stats["answers_per_s"] > 0
    assert stage_in(ray_run, "solve", ["--solver", "A"]) == 0  # a rerun sends nothing
    assert json.loads((ray_run / "metrics" / "solve_runs" / "A.json").read_text())["backend_calls"] == 0


@pytest.mark.slow
def test_a_driver_killed_mid_run_resumes_with_only_what_is_missing(cluster, tmp_path):
    # its own local Ray (address null): ~0.3 s per 4-request task, 60 items in 15 tasks on 2 workers
    executor = {"kind": "ray", "workers": 2, "batch_size": 4}
    project = write_project(tmp_path / "p", 20, batch_size=4, executor=executor,
                            simulated={**yaml.safe_load((REPO / "params.yaml").read_text())["solvers"]["A"]["simulated"],
                                       "sleep_scale": 0.05})
    journal = project / "data" / ".journal" / "A"
    driver = subprocess.Popen([str(BIN / "python"), str(REPO / "stages" / "solve.py"), "--solver", "A"], cwd=project,
                              env=env_with_venv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 240
        while len(list(journal.glob("part-*.parquet"))) < 2 and driver.poll() is None and time.monotonic() < deadline:
            children = psutil.Process(driver.pid).children(recursive=True) or children
            time.sleep(0.05)
        assert driver.poll() is None, f"the driver ended before it could be killed: {driver.stderr.read()}"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
        for child in children:  # the Ray processes the driver started, by pid
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
    kept = AnswerCache(project / "data" / "answers" / "A.parquet", journal).read().height
    assert 0 < kept < 60
    assert stage_in(project, "solve", ["--solver", "A"]) == 0  # resumes on this test's cluster
    stats = json.loads((project / "metrics" / "solve_runs" / "A.json").read_text())
    assert (stats["cached"], stats["backend_calls"]) == (kept, 60 - kept)
    final = pl.read_parquet(project / "data" / "answers" / "A.parquet")
    local = write_project(tmp_path / "local", 20)
    assert stage_in(local, "solve", ["--solver", "A"]) == 0
    assert rows(final) == rows(pl.read_parquet(local / "data" / "answers" / "A.parquet"))


@pytest.mark.slow
@needs_llamacpp
def test_llamacpp_on_ray_answers_like_the_local_executor(cluster, tmp_path):
    items = ITEMS[:4]

    def smollm(executor: dict | None = None) -> SolverParams:
        return SolverParams(backend="llamacpp", model="smollm2-135m", price=PRICE, decoding={"max_tokens": 24},
                            llamacpp={"n_threads": 1, "n_ctx": 512}, executor=executor or {})

    _, local, _ = fill(tmp_path / "local", smollm(), items)
    run, remote, _ = fill(tmp_path / "ray", smollm({"kind": "ray", "workers": 2, "batch_size": 1}), items)
    assert (run.workers, run.batches, run.retries) == (2, 4, 0)
    assert remote["error"].is_null().all() and remote["tokens_out"].min() > 0
    assert rows(remote, timed=True) == rows(local, timed=True)  # greedy: the same text, tokens and prices
