"""`dlab serve`'s production manners, against a fake endpoint: OpenAI-style 4xx for bad requests,
401 without the key, 5xx naming the failed backend, 429 with Retry-After when the queue is full."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.serve_fixtures import CLIENT_KEY, FakeBackend, ServeProcess, write_project

openai = pytest.importorskip("openai")
pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    fake = FakeBackend()
    root = write_project(tmp_path_factory.mktemp("serve_errors"), fake.url)
    server = ServeProcess(root, "--model", "solver:fake", "--model", "cascade:fake>A", "--api-key-env", "DLAB_CLIENT_KEY",
                          "--max-body-bytes", "4096")
    yield server
    server.stop()
    fake.close()


def client(server: ServeProcess, key: str = CLIENT_KEY):
    return openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=60)


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def post(server: ServeProcess, **kw) -> httpx.Response:
    return httpx.post(f"{server.url}/chat/completions", headers={"Authorization": f"Bearer {CLIENT_KEY}"}, timeout=60, **kw)


def test_unknown_model_is_404(served):
    with pytest.raises(openai.NotFoundError) as e:
        client(served).chat.completions.create(model="solver:nope", messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["code"] == "model_not_found" and e.value.body["param"] == "model"


@pytest.mark.parametrize("messages, param", [
    ([], "messages"),
    ([{"role": "robot", "content": "hi"}], "messages.0.role"),
    ([{"role": "user"}], "messages.0.content"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}], "messages"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "messages"),
])
def test_malformed_messages_are_400(served, messages, param):
    with pytest.raises(openai.BadRequestError) as e:
        client(served).chat.completions.create(model="solver:fake", messages=messages)
    assert e.value.status_code == 400 and e.value.body["param"] == param


def test_not_json_and_oversized_bodies(served):
    assert error_of(post(served, content=b"{not json")) ["type"] == "invalid_request_error"
    big = post(served, json={"model": "solver:fake", "messages": [{"role": "user", "content": "x" * 5000}]})
    assert big.status_code == 413 and error_of(big)["code"] == "body_too_large"


def test_the_client_key_is_required(served):
    with pytest.raises(openai.AuthenticationError):
        client(served, key="sk-wrong").chat.completions.create(model="solver:fake", messages=[{"role": "user", "content": "hi"}])
    assert httpx.get(f"{served.url}/models").status_code == 401
    assert httpx.get(served.url.removesuffix("/v1") + "/health").json()["status"] == "ok"


def test_a_failed_backend_is_a_5xx_naming_it(served):
    response = post(served, json={"model": "solver:fake", "messages": [{"role": "user", "content": "FAIL now"}]})
    assert response.status_code == 502 and response.headers["x-dlab-failed-solver"] == "fake"
    error = error_of(response)
    assert error["code"] == "backend_failed" and "'fake'" in error["message"] and "HTTP 500" in error["message"]


def test_a_cascade_cannot_stream(served):
    response = post(served, json={"model": "cascade:fake>A", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 400 and error_of(response)["param"] == "stream"


def test_a_full_queue_is_429_with_retry_after(tmp_path):
    fake = FakeBackend()
    fake.hold_until = 10**6  # hold every request until released
    root = write_project(tmp_path / "project", fake.url)
    server = ServeProcess(root, "--model", "solver:fake", "--concurrency", "2", "--queue-size", "1")
    results: list[int] = []
    body = {"model": "solver:fake", "messages": [{"role": "user", "content": "hold on"}]}
    threads = [threading.Thread(target=lambda: results.append(httpx.post(f"{server.url}/chat/completions", json=body,
                                                                         timeout=120).status_code)) for _ in range(3)]
    try:
        for t in threads:
            t.start()
        assert fake.wait_in_flight(2, timeout=60)  # two working, one queued behind them
        deadline = 60
        while httpx.get(server.url.removesuffix("/v1") + "/health").json()["queued"] < 1 and deadline > 0:
            threading.Event().wait(0.1)
            deadline -= 0.1
        full = httpx.post(f"{server.url}/chat/completions", json=body, timeout=60)
        assert full.status_code == 429 and int(full.headers["retry-after"]) >= 1
        assert error_of(full)["code"] == "queue_full"
        fake.let_go()
        for t in threads:
            t.join(timeout=120)
        assert results == [200, 200, 200]
    finally:
        fake.let_go()
        server.stop()
        fake.close()
