"""`timeout_s` bounds a whole request whatever the server sends, and a slow item holds up neither
the journal nor the items after it. Servers listen on 127.0.0.1 only; every wait is bounded."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import polars as pl
import pytest

from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.solvers.cache import AnswerCache

from tests.solvers.test_backend_openai_compat import FakeServer, make_solver


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    if fake.hold is not None:
        fake.hold.set()  # release a held handler so the server shuts down at once
    fake.close()


def _journal_rows(journal: Path) -> pl.DataFrame:
    parts = sorted(journal.glob("part-*.parquet")) if journal.exists() else []
    return pl.concat([pl.read_parquet(p) for p in parts]) if parts else pl.DataFrame()


def test_a_trickling_server_is_cut_at_timeout_s(server):
    server.trickle_s = 0.1  # one byte every 0.1 s: each read succeeds, so httpx's own timeout never fires
    item = generate(ArithParams(), 1, seed=21)
    start = time.perf_counter()
    answer = make_solver(server.url, timeout_s=1.0, max_retries=0).solve(item)[0]
    elapsed = time.perf_counter() - start
    assert answer.error is not None and answer.error.startswith("timeout after 1 s"), answer.error
    assert "1 attempt" in answer.error and answer.cost_usd == 0.0
    assert 0.9 <= elapsed < 15  # the ~30 s body was cut at the deadline (a busy machine adds seconds, not 15)


def test_a_stuck_item_does_not_hold_up_the_journal_or_later_batches(server, tmp_path: Path):
    items = generate(ArithParams(), 6, seed=22)
    server.hold = threading.Event()  # the first request waits until the test lets it go
    solver = make_solver(server.url, concurrency=2, max_retries=0, timeout_s=30.0)
    requests = [solver.request(i) for i in items]
    cache = AnswerCache(tmp_path / "answers.parquet", tmp_path / "journal")
    runs: list = []
    filler = threading.Thread(target=lambda: runs.append(cache.fill(solver, requests, batch_size=2, progress=False)))
    filler.start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _journal_rows(tmp_path / "journal").height < 5:
            time.sleep(0.05)
        on_disk = _journal_rows(tmp_path / "journal")
        # the five others, from all three batches of 2, are on disk while the first is still stuck
        assert on_disk.height == 5 and on_disk["error"].null_count() == 5
        assert filler.is_alive() and server.done_calls and 1 not in server.done_calls
        # the held call is whichever request reached the server first (two threads race for it)
        stuck = next(r.item.item_id for r in requests if r.messages[-1]["content"] == server.prompts[0])
        assert stuck not in on_disk["item_id"].to_list()
    finally:
        server.hold.set()
        filler.join(timeout=30)
    assert not filler.is_alive()
    assert runs[0].backend_calls == 6 and runs[0].errors == 0 and runs[0].answered == 6
    assert pl.read_parquet(tmp_path / "answers.parquet").height == 6


def test_retry_after_waits_overlap_instead_of_adding_up(server, tmp_path: Path):
    """Each item's first attempt gets 429 + Retry-After: 3. Batches of 2 used to wait 3 s each in
    turn (six batches, > 18 s); streamed, the waits overlap (~3 s, a busy machine adds a few)."""
    items = generate(ArithParams(), 12, seed=23)
    server.mode, server.status, server.fail_first, server.retry_after = "status", 429, 12, "3"
    solver = make_solver(server.url, concurrency=4, max_retries=2)
    cache = AnswerCache(tmp_path / "answers.parquet", tmp_path / "journal")
    start = time.perf_counter()
    run = cache.fill(solver, [solver.request(i) for i in items], batch_size=2, progress=False)
    elapsed = time.perf_counter() - start
    assert run.errors == 0 and run.answered == 12 and server.calls == 24
    assert elapsed < 12.0, elapsed
