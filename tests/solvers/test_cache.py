"""The answer cache: no answer paid twice, error retries, resuming after SIGKILL, and its lock."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.params.root import load_params
from delegation_lab.data import build_items
from delegation_lab.data.params import DataParams
from delegation_lab.solvers.base import Generation, Request, Solver
from delegation_lab.solvers.cache import KEY, AnswerCache, CacheLocked
from delegation_lab.solvers.params import SolverParams

from tests.conftest import BIN, REPO, env_with_venv, make_project, run

PARAMS = load_params(REPO / "params.yaml")
ITEMS = [i for i in build_items(DataParams(ability_size=50, train_size=50, test_size=50))]


class FlakyBackend:
    """Fails the items whose index is in `fail`; counts every request it is sent."""

    def __init__(self, fail: set[str]):
        self.fail = fail
        self.sent: list[str] = []

    def fingerprint(self):
        return {}

    def generate(self, requests: list[Request]) -> list[Generation]:
        self.sent += [r.item.item_id for r in requests]
        return [
            Generation(text=None, error="HTTP 503") if r.item.item_id in self.fail
            else Generation(text=f"#### {r.item.gold}", tokens_in=10, tokens_out=5)
            for r in requests
        ]


def solver_with(backend) -> Solver:
    return Solver("X", PARAMS.solvers["B"], backend)


def test_cached_answers_are_never_paid_twice_and_errors_retry_on_demand(tmp_path: Path):
    failing = {ITEMS[3].item_id, ITEMS[7].item_id}
    backend = FlakyBackend(failing)
    solver = solver_with(backend)
    cache = AnswerCache(tmp_path / "X.parquet", tmp_path / "journal")
    requests = [solver.request(i) for i in ITEMS]
    first = cache.fill(solver, requests, batch_size=32, progress=False)
    assert (first.backend_calls, first.errors, first.cached) == (150, 2, 0)
    second = cache.fill(solver, requests, batch_size=32, progress=False)
    assert second.backend_calls == 0 and second.cached == 150
    backend.fail = set()
    third = cache.fill(solver, requests, retry_errors=True, batch_size=32, progress=False)
    assert third.backend_calls == 2 and sorted(backend.sent[-2:]) == sorted(failing)
    df = pl.read_parquet(tmp_path / "X.parquet")
    assert df.height == 150 and df["error"].null_count() == 150
    assert df.select(KEY).is_duplicated().sum() == 0
    assert not (tmp_path / "journal").exists()


def test_a_changed_prompt_setting_gets_new_answers(tmp_path: Path):
    backend = FlakyBackend(set())
    cache = AnswerCache(tmp_path / "X.parquet", tmp_path / "journal")
    solver = solver_with(backend)
    cache.fill(solver, [solver.request(i) for i in ITEMS[:20]], progress=False)
    raw = PARAMS.solvers["B"].model_dump()
    raw["decoding"]["max_tokens"] = 128
    changed = Solver("X", SolverParams.model_validate(raw), backend)
    run_changed = cache.fill(changed, [changed.request(i) for i in ITEMS[:20]], progress=False)
    assert run_changed.backend_calls == 20
    assert pl.read_parquet(tmp_path / "X.parquet").height == 40  # old answers kept, keyed by their hash


@pytest.mark.processes
def test_sigkill_mid_run_then_resume(tmp_path: Path):
    project = make_project(tmp_path / "p")
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["solvers"]["A"]["batch_size"] = 40
    raw["solvers"]["A"]["simulated"]["sleep_scale"] = 0.04  # ~0.4 s per batch: slow enough to kill
    raw["data"].update(ability_size=100, train_size=300, test_size=100)  # 500 items: 13 batches
    raw["tracking"]["enabled"] = False  # about the answer cache, not MLflow: ~2.5 CPU s less per stage run
    (project / "params.yaml").write_text(yaml.safe_dump(raw))
    run([str(BIN / "python"), "stages/prepare.py"], project)
    total = sum(pl.read_parquet(p).height for p in (project / "data" / "items").glob("*.parquet"))

    journal = project / "data" / ".journal" / "A"
    proc = subprocess.Popen([str(BIN / "python"), "stages/solve.py", "--solver", "A"], cwd=project, env=env_with_venv(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300  # generous: stage start-up is slow on a loaded machine
    while time.monotonic() < deadline and len(list(journal.glob("part-*.parquet"))) < 4 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    parts = list(journal.glob("part-*.parquet"))
    assert 4 <= len(parts) < total // 40
    before = pl.concat([pl.read_parquet(p) for p in parts])
    assert not (project / "data" / "answers" / "A.parquet").exists()

    run([str(BIN / "python"), "stages/solve.py", "--solver", "A"], project)
    stats = json.loads((project / "metrics" / "solve_runs" / "A.json").read_text())
    assert stats["cached"] == before.height
    assert stats["backend_calls"] == total - before.height  # only the missing items were sent
    after = pl.read_parquet(project / "data" / "answers" / "A.parquet")
    assert after.height == total and after.select(KEY).is_duplicated().sum() == 0
    kept = before.join(after, on=KEY, suffix="_after")
    assert kept.height == before.height  # no completed answer lost
    assert (kept["created_at"] == kept["created_at_after"]).all()
    assert not journal.exists()


@pytest.mark.processes
def test_fill_holds_a_lock_that_a_killed_holder_never_leaves_stale(tmp_path: Path):
    solver = solver_with(FlakyBackend(set()))
    requests = [solver.request(i) for i in ITEMS[:5]]
    cache = AnswerCache(tmp_path / "X.parquet", tmp_path / "journal")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path\n"
         "from delegation_lab.solvers.file_lock import exclusive_lock\n"
         "with exclusive_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)",
         str(cache.lock_path)],
        env=env_with_venv(), stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CacheLocked, match=f"{cache.lock_path} still held after 0.2 s"):
            cache.fill(solver, requests, progress=False, lock_wait_s=0.2)
        assert not (tmp_path / "X.parquet").exists()  # nothing was sent or written without the lock
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    run_after = cache.fill(solver, requests, progress=False, lock_wait_s=0)  # the kernel dropped the dead holder's lock
    assert run_after.backend_calls == 5 and run_after.answered == 5
    assert not cache.lock_path.exists()  # removed on release: no stray file inside a DVC out
