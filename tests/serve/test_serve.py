"""`dlab serve` with the official `openai` client: a saved kNN router between a real llama.cpp server
(SmolLM2-135M) and a fake endpoint, a cascade under the agreement verifier, streaming, and the
journal: every call an answer row under the request hash `solve` computes for the served item, the
decision beside it, no key anywhere (journal, log, metrics)."""

from __future__ import annotations

import json

import httpx
import polars as pl
import pytest

from delegation_lab.params.root import load_params
from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.calls import served_item
from delegation_lab.serve.journal import DECISIONS_JOURNAL, read_decisions, read_served_answers
from delegation_lab.solvers import build_solver

from tests.serve_fixtures import BACKEND_KEY, CLIENT_KEY, FakeBackend, ServeProcess, fake_answer, write_project
from tests.solvers.test_backend_openai_compat import llama_server  # noqa: F401 - the session fixture: a real llama.cpp server

openai = pytest.importorskip("openai")
ROUTER = "router:knn@lambda=0.5"


@pytest.fixture
def fake():
    backend = FakeBackend()
    yield backend
    backend.close()


@pytest.mark.processes
@pytest.mark.timeout(600)
def test_router_cascade_and_journal_with_the_openai_client(llama_server, fake, tmp_path):  # noqa: F811
    root = write_project(tmp_path / "project", fake.url, llama_server)
    server = ServeProcess(root, "--model", ROUTER, "--model", "cascade:small>fake", "--model", "solver:fake",
                          "--api-key-env", "DLAB_CLIENT_KEY")
    try:
        client = openai.OpenAI(base_url=server.url, api_key=CLIENT_KEY, max_retries=0, timeout=180)
        assert {m.id for m in client.models.list()} == {ROUTER, "cascade:small>fake", "solver:fake"}

        # routed to the real llama.cpp model
        alpha = [{"role": "user", "content": "alpha alpha: what is 2 + 3?"}]
        raw = client.chat.completions.with_raw_response.create(model=ROUTER, messages=alpha)
        reply = raw.parse()
        assert raw.headers["x-dlab-answered-by"] == "small" and raw.headers["x-dlab-called"] == "small"
        assert reply.model == ROUTER and reply.choices[0].message.content
        assert reply.model_extra["dlab"]["decision"]["solver"] == "small"
        assert reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 24
        cost = reply.model_extra["dlab"]["cost_usd"]
        assert cost > 0 and float(raw.headers["x-dlab-cost-usd"]) == pytest.approx(cost)

        # routed to the fake endpoint, whose reply we know
        beta = [{"role": "user", "content": "beta beta: what is 7 * 6?"}]
        reply = client.chat.completions.create(model=ROUTER, messages=beta)
        assert reply.model_extra["dlab"]["answered_by"] == "fake"
        assert reply.choices[0].message.content == fake_answer(beta[0]["content"])

        # the cascade: llama answers, the fake checks it (they disagree), the fake answers: usage adds both
        cheap = [{"role": "user", "content": "Compute 12 + 30."}]
        raw = client.chat.completions.with_raw_response.create(model="cascade:small>fake", messages=cheap)
        reply = raw.parse()
        dlab = reply.model_extra["dlab"]
        assert dlab["called"] == ["small", "fake"] and raw.headers["x-dlab-called"] == "small,fake"
        steps = dlab["decision"]["steps"]
        assert steps[0]["solver"] == "small" and steps[0]["checked_by"] == ["fake"]
        assert dlab["answered_by"] == ("small" if steps[0]["accepted"] else "fake")
        fake_usage = 10 + len(cheap[0]["content"]) // 4 + 7
        assert reply.usage.total_tokens > fake_usage  # llama's tokens and the fake's

        # a stream through the router, from the fake endpoint's SSE
        pieces = [c.choices[0].delta.content or "" for c in
                  client.chat.completions.create(model=ROUTER, messages=[{"role": "user", "content": "beta beta stream"}],
                                                 stream=True) if c.choices]
        assert "".join(pieces) == fake_answer("beta beta stream") and len(pieces) > 2

        # a key a backend echoes back is masked before the client or the journal sees it
        echoed = client.chat.completions.create(model="solver:fake", messages=[{"role": "user", "content": "ECHOKEY please"}])
        assert BACKEND_KEY not in echoed.choices[0].message.content and "***" in echoed.choices[0].message.content

        metrics = httpx.get(server.url.removesuffix("/v1") + "/metrics", headers={"Authorization": f"Bearer {CLIENT_KEY}"}).text
        assert 'dlab_serve_requests_total{model="router:knn@lambda=0.5",status="200"} 3.0' in metrics
    finally:
        server.stop()
    assert server.proc.returncode == 0

    layout = Layout(root)
    decisions = read_decisions(layout)
    assert decisions.height == 5 and decisions["request_id"].n_unique() == 5
    assert (layout.served_decisions.exists() and not list(layout.served_journal(DECISIONS_JOURNAL).glob("*.parquet")))
    # the journal row of the routed llama answer: the request hash solve@small computes for the served item
    params = load_params(layout.params_file)
    item = served_item(alpha)
    solve_hash = build_solver("small", params.solvers["small"]).request(item).request_hash
    small = read_served_answers(layout, "small")
    row = small.filter(pl.col("item_id") == item.item_id).to_dicts()
    assert len(row) == 1 and row[0]["request_hash"] == solve_hash and row[0]["error"] is None and row[0]["answer_text"]
    routed = decisions.filter(pl.col("item_id") == item.item_id).row(0, named=True)
    assert routed["answered_by"] == "small" and routed["request_hashes"] == [solve_hash]
    assert json.loads(routed["decision"])["operating_point"] == "lambda=0.5"
    assert read_served_answers(layout, "fake").height == 4  # beta, the cascade's check, the stream, the echo

    for path in [*layout.served_dir.rglob("*.parquet"), server.log]:
        text = path.read_bytes()
        assert BACKEND_KEY.encode() not in text and CLIENT_KEY.encode() not in text, path
    assert BACKEND_KEY not in metrics and CLIENT_KEY not in metrics
