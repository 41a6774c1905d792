"""Hostile or broken OpenAI-compatible servers (issue 32): replies over `max_reply_bytes` as sent or
after decompression (a gzip bomb) are refused while they stream, with the process's peak memory
measured; a usage that bills a long text as one token is re-estimated and flagged; a reply that only
calls a tool is an error row. Normal replies, compressed or not, stay the same answers."""

from __future__ import annotations

import gzip
import json
import os
import sys
import zlib
from collections.abc import Callable, Iterator

import pytest

from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams

from tests.loopback_http import LoopbackServer, QuietHandler
from tests.memory_probe import peak_rss_mib
from tests.solvers.test_backend_openai_compat import expected_answer, make_solver

Body = tuple[dict[str, str], Iterator[bytes]]


class StreamServer:
    """POST answers with `respond(payload) -> (headers, chunks)`, streamed chunk by chunk; without a
    Content-Length header the body ends when the connection closes (HTTP/1.0)."""

    def __init__(self, respond: Callable[[dict], Body]):
        self.respond = respond
        self.calls = 0
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.calls += 1
                headers, chunks = server.respond(payload)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    for chunk in chunks:
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):  # the client refused the rest
                    pass

        self.loopback = LoopbackServer(Handler)
        self.url = self.loopback.url

    def close(self) -> None:
        self.loopback.close()


def completion(payload: dict, text: str | None = None, **message) -> dict:
    text = f"Counting carefully.\n#### {expected_answer(payload['messages'])}" if text is None else text
    return {"id": "c", "object": "chat.completion", "model": payload["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, **message},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37}}


@pytest.fixture
def serve():
    servers: list[StreamServer] = []

    def start(respond: Callable[[dict], Body]) -> StreamServer:
        servers.append(StreamServer(respond))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


@pytest.fixture(scope="module")
def items():
    return generate(ArithParams(min_steps=1, max_steps=3), 2, seed=5)


def _zeros_gzip(n_bytes: int) -> bytes:
    """A gzip member of `n_bytes` zero bytes (about 1/1000 of that on the wire)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    return b"".join([*(c.compress(block) for _ in range(n_bytes >> 20)), c.flush()])


def test_gzip_and_plain_replies_give_the_same_answers(serve, items):
    plain = serve(lambda p: ({}, iter([json.dumps(completion(p)).encode()])))
    packed = serve(lambda p: ({"Content-Encoding": "gzip"}, iter([gzip.compress(json.dumps(completion(p)).encode())])))
    a = make_solver(plain.url, max_retries=0).solve(items)
    b = make_solver(packed.url, max_retries=0).solve(items)
    assert [x.error for x in a] == [None, None]
    keep = {"answer_text", "parsed_answer", "tokens_in", "tokens_out", "cost_usd", "error", "extra"}
    strip = lambda answers: [x.model_dump(include=keep) for x in answers]  # noqa: E731
    assert strip(a) == strip(b)


def test_a_gzip_bomb_is_refused_without_expanding_it(serve, items):
    bomb = _zeros_gzip(64 << 20)  # 64 MiB decoded from ~64 KiB sent
    server = serve(lambda p: ({"Content-Encoding": "gzip", "Content-Length": str(len(bomb))}, iter([bomb])))
    answers = make_solver(server.url, max_retries=2, max_reply_bytes=1 << 20).solve(items)
    for a in answers:
        assert a.answer_text is None and a.cost_usd == 0.0
        assert "max_reply_bytes = 1048576 bytes after decompression" in a.error, a.error
    assert server.calls == len(items)  # refused, not retried: the same request gets the same reply


def test_a_long_reply_without_content_length_is_cut_on_the_wire(serve, items):
    chunk = b" " * (1 << 16)
    server = serve(lambda p: ({}, (chunk for _ in range(10_000))))  # 640 MiB if read whole
    a = make_solver(server.url, max_retries=0, max_reply_bytes=1 << 20).solve(items[:1])[0]
    assert a.answer_text is None and "over max_reply_bytes = 1048576 bytes as sent" in a.error, a.error


def test_a_declared_length_over_the_cap_is_refused_before_reading(serve, items):
    server = serve(lambda p: ({"Content-Length": str(300 << 20)}, iter([b"{}"])))
    a = make_solver(server.url, max_retries=0).solve(items[:1])[0]
    assert "Content-Length 314572800 bytes is over max_reply_bytes = 4194304" in a.error, a.error


@pytest.mark.parametrize(("headers", "body", "reason"), [
    ({"Content-Encoding": "br"}, b"\x0b\x02\x80{}\x03", "Content-Encoding 'br'"),
    ({"Content-Encoding": "gzip"}, b"\x1f\x8b\x08\x00 not gzip at all", "does not decode"),
], ids=["brotli", "corrupt_gzip"])
def test_undecodable_bodies_are_error_rows(serve, items, headers, body, reason):
    server = serve(lambda p: (headers, iter([body])))
    a = make_solver(server.url, max_retries=0).solve(items[:1])[0]
    assert a.answer_text is None and reason in a.error, a.error


def test_a_usage_that_bills_a_long_text_as_one_token_is_re_estimated(serve, items):
    text = "x" * 100_000 + "\n#### 1"
    server = serve(lambda p: ({}, iter([json.dumps({**completion(p, text), "usage": {
        "prompt_tokens": 30, "completion_tokens": 1}}).encode()])))
    a = make_solver(server.url, max_retries=0).solve(items[:1])[0]
    extra = json.loads(a.extra)
    assert a.error is None and a.tokens_out == 25_002  # ceil(100_007 / 4): the documented estimate
    assert extra["tokens_estimated"] is True and extra["reported_tokens_out"] == 1


def test_a_plausible_usage_is_kept_as_the_server_said(serve, items):
    server = serve(lambda p: ({}, iter([json.dumps(completion(p)).encode()])))
    a = make_solver(server.url, max_retries=0).solve(items[:1])[0]
    assert a.error is None and a.tokens_in == 30 and a.tokens_out == 7 and a.extra is None


@pytest.mark.parametrize("call", [
    {"tool_calls": [{"id": "t", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]},
    {"function_call": {"name": "calc", "arguments": "{}"}},
], ids=["tool_calls", "legacy_function_call"])
def test_a_tool_call_only_reply_is_an_error_row(serve, items, call):
    def respond(p: dict) -> Body:
        body = completion(p)
        body["choices"][0]["message"].update(content=None, **call)
        return {}, iter([json.dumps(body).encode()])

    server = serve(respond)
    a = make_solver(server.url, max_retries=0).solve(items[:1])[0]
    assert a.answer_text is None and "only tool_calls" in a.error and a.cost_usd == 0.0, a.error


def test_a_tool_call_beside_content_is_still_an_answer(serve, items):
    call = {"tool_calls": [{"id": "t", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]}
    server = serve(lambda p: ({}, iter([json.dumps(completion(p, None, **call)).encode()])))
    solver = make_solver(server.url, max_retries=0)
    a = solver.solve(items[:1])[0]
    assert a.error is None and a.parsed_answer == expected_answer(solver.request(items[0]).messages)


_CHILD = """
import sys
from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.params import SolverParams
params = SolverParams(backend="openai_compat", model="m", price={"input_usd_per_mtok": 1, "output_usd_per_mtok": 1},
                      openai_compat={"base_url": sys.argv[1], "api_key_env": None, "max_retries": 0, "timeout_s": 60})
answer = build_solver("remote", params).solve(generate(ArithParams(), 1, seed=0))[0]
print("ERROR:", answer.error, file=sys.stderr)
"""


def test_peak_memory_of_a_gzip_bomb_stays_near_a_normal_reply(serve):
    """512 MiB decoded (httpx alone would hold all of it, twice while joining): the process that
    refuses it peaks within the default 4 MiB cap plus noise of one answering a normal reply."""
    bomb = _zeros_gzip(512 << 20)
    normal = serve(lambda p: ({}, iter([json.dumps(completion(p)).encode()])))
    hostile = serve(lambda p: ({"Content-Encoding": "gzip"}, (bomb[i:i + 65536] for i in range(0, len(bomb), 65536))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    base_mib, rc, err = peak_rss_mib([sys.executable, "-c", _CHILD, normal.url], env)
    assert rc == 0 and "ERROR: None" in err, err
    bomb_mib, rc, err = peak_rss_mib([sys.executable, "-c", _CHILD, hostile.url], env)
    assert rc == 0 and "after decompression" in err, err
    assert bomb_mib < base_mib + 48, (base_mib, bomb_mib)
