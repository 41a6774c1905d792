"""64 requests in flight at once through `dlab serve`, then SIGTERM while all of them wait on the
backend: every one is answered, the process exits 0, and the journal holds exactly one decision and
one answer row per request (none lost, none twice)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.journal import read_decisions, read_served_answers

from tests.serve_fixtures import FakeBackend, ServeProcess, fake_answer, write_project

openai = pytest.importorskip("openai")
N = 64


@pytest.mark.processes
@pytest.mark.timeout(400)
def test_64_in_flight_then_sigterm_drains_and_flushes(tmp_path):
    fake = FakeBackend()
    fake.hold_until = 10**6  # nobody is answered until let go
    root = write_project(tmp_path / "project", fake.url)
    server = ServeProcess(root, "--model", "solver:fake", "--concurrency", str(N), "--queue-size", "0")
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=180)
    questions = [f"question number {i}: {'x' * i}" for i in range(N)]
    try:
        with ThreadPoolExecutor(N) as pool:
            futures = [pool.submit(client.chat.completions.create, model="solver:fake",
                                   messages=[{"role": "user", "content": q}]) for q in questions]
            assert fake.wait_in_flight(N, timeout=120), fake.in_flight
            server.terminate()  # while all 64 wait on the backend
            time.sleep(1)
            fake.let_go()
            replies = [f.result(timeout=180) for f in futures]
        assert server.wait(timeout=120) == 0
    finally:
        fake.let_go()
        server.stop()
        fake.close()
    assert fake.max_in_flight == N
    assert [r.choices[0].message.content for r in replies] == [fake_answer(q) for q in questions]
    layout = Layout(root)
    decisions = read_decisions(layout)
    assert decisions.height == N and decisions["request_id"].n_unique() == N
    assert sorted(decisions["question"]) == sorted(questions)
    answers = read_served_answers(layout, "fake")
    assert answers.height == N and answers["item_id"].n_unique() == N
    assert not list(layout.served_dir.glob(".journal/*/*.parquet"))  # compacted on shutdown
    assert "stopped by SIGTERM; 64 requests journalled" in server.log.read_text()
