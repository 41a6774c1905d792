"""The FastAPI app and the uvicorn server behind `dlab serve`.

Endpoints: `POST /v1/chat/completions` and `GET /v1/models` in OpenAI's wire format, `GET /health`,
`GET /metrics` (Prometheus text). With `--api-key-env`, /v1/* and /metrics need
`Authorization: Bearer <key>` (compared in constant time; the key is never logged, journalled or
labelled). Errors are OpenAI's error JSON: 400 malformed body or messages, 401 bad key, 404 unknown
model, 413 body over the limit, 429 queue full (with Retry-After), 502 / 504 a backend failed or
timed out after its retries (the message names the solver and backend), 503 the journal cannot be
written (so no answer would be recorded; /health says why), 500 a bug.

Shutdown (SIGTERM or SIGINT): uvicorn stops accepting, lets every request in flight finish, then the
lifespan's exit flushes and compacts the journal; the process exits 0, or 1 when a journal write
failed (the count it prints is the count of decision rows on disk either way).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from delegation_lab.params.root import load_params
from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.backpressure import Admission, BodyBudget, QueueFull
from delegation_lab.serve.calls import served_item
from delegation_lab.serve.connection import HEADER_TIMEOUT_S, header_timeout_protocol
from delegation_lab.serve.journal import ServedJournal, served_lock
from delegation_lab.serve.metrics import ServerMetrics
from delegation_lab.serve.policies import Policy, Served, build_policies, default_models
from delegation_lab.serve.state import ServerState, dlab_headers, record
from delegation_lab.serve.wire import ChatRequest, completion, error_response, validation_message
from delegation_lab.solvers.base import mask_secrets

MAX_BODY_BYTES = 1 << 20
"""Default largest request body (1 MiB): a chat request is far smaller; a bigger one is refused with 413."""

MAX_BODY_BYTES_IN_FLIGHT = 64 << 20
"""Default bound on the request bytes all clients together may have in the server's memory at once
(64 MiB): 320 concurrent 1 MiB bodies were 9.2 GB of Python objects; past the bound a request is
refused with 429 while its body is still arriving."""


@dataclass
class ServeOptions:
    root: Path = Path(".")
    host: str = "127.0.0.1"
    port: int = 8000
    models: list[str] = field(default_factory=list)  # empty: every solver and every saved router's operating points
    api_key_env: str | None = None
    concurrency: int = 64
    queue_size: int = 256
    max_body_bytes: int = MAX_BODY_BYTES
    log_level: str = "info"
    header_timeout_s: float = HEADER_TIMEOUT_S
    max_body_bytes_in_flight: int = MAX_BODY_BYTES_IN_FLIGHT


def _authorized(state: ServerState, request: Request) -> bool:
    if not state.api_key:
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), state.api_key.encode())


def _unauthorized() -> JSONResponse:
    return error_response(401, "missing or wrong API key (Authorization: Bearer <key>)", "invalid_request_error",
                          "invalid_api_key")


def create_app(state: ServerState) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        state.journal.close()  # every request has finished: flush and compact
        for solver in {id(s): s for p in state.policies.values() for s in p.solvers.values()}.values():
            await solver.aclose()

    app = FastAPI(title="delegation-lab serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/health")
    async def health() -> Any:
        body = {"status": "ok", "models": len(state.policies), "in_flight": state.admission.working,
                "queued": state.admission.admitted - state.admission.working, "journalled": state.journal.rows}
        failure = state.journal.failure
        if failure:
            return JSONResponse({**body, "status": "unhealthy", "error": failure}, status_code=503)
        return body

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        if not _authorized(state, request):
            return _unauthorized()
        state.metrics.in_flight.set(state.admission.working)
        state.metrics.queued.set(state.admission.admitted - state.admission.working)
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/v1/models")
    async def models(request: Request) -> Any:
        if not _authorized(state, request):
            return _unauthorized()
        return {"object": "list", "data": [{"id": name, "object": "model", "created": state.started,
                                            "owned_by": f"delegation-lab:{p.kind}"} for name, p in state.policies.items()]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        if not _authorized(state, request):
            return _unauthorized()
        if state.journal.failure:  # an answer now would not be recorded: refuse rather than lose it
            return error_response(503, f"the server cannot journal requests: {state.journal.failure}", "server_error",
                                  "journal_failed")
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > state.max_body_bytes:
            return _too_large(state)
        held = [0]
        try:
            body = await _read_body(state, request, held)
            if isinstance(body, Response):
                return body
            return await _chat(state, body)
        finally:
            state.bodies.give(held[0])

    return app


async def _read_body(state: ServerState, request: Request, held: list[int]) -> bytes | Response:
    """The body, counted as it arrives (a chunked upload has no Content-Length to check first): 413
    past `max_body_bytes`, 429 when every client's bodies together pass the in-flight bound; `held[0]`
    is what this request took from that bound (given back by the caller)."""
    chunks: list[bytes] = []
    async for chunk in request.stream():
        held[0] += len(chunk)
        if held[0] > state.max_body_bytes:
            return _too_large(state)
        if not state.bodies.take(len(chunk)):
            held[0] -= len(chunk)
            state.metrics.rejected.inc()
            return error_response(429, f"the server holds {state.bodies.total} bytes of request bodies already; retry",
                                  "rate_limit_error", "body_bytes_in_flight", headers={"Retry-After": "1"})
        chunks.append(chunk)
    return b"".join(chunks)


async def _chat(state: ServerState, body: bytes) -> Response:
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return error_response(400, f"the body is not JSON ({e.msg if hasattr(e, 'msg') else e})", "invalid_request_error")
    except RecursionError:
        return error_response(400, f"the body is nested too deeply (more than about {sys.getrecursionlimit()} "
                              "levels of arrays or objects)", "invalid_request_error", "too_deep")
    try:
        chat_request = ChatRequest.model_validate(payload)
    except ValidationError as e:
        message, param = validation_message(e)
        return error_response(400, message, "invalid_request_error", "invalid_request", param)
    policy = state.policies.get(chat_request.model)
    if policy is None:
        state.metrics.requests.labels("(unknown)", "404").inc()
        return error_response(404, f"the model {chat_request.model!r} is not served here; GET /v1/models lists "
                              f"{len(state.policies)}", "invalid_request_error", "model_not_found", "model")
    try:
        if chat_request.stream:  # the slot is held until the stream ends, not until this returns
            from delegation_lab.serve.stream import stream_response

            slot = state.admission.slot()
            await slot.__aenter__()
            try:
                return await stream_response(state, policy, chat_request, lambda: slot.__aexit__(None, None, None))
            except BaseException:
                await slot.__aexit__(None, None, None)
                raise
        async with state.admission.slot():
            return await _answer(state, policy, chat_request)
    except QueueFull as e:
        state.metrics.rejected.inc()
        state.metrics.requests.labels(policy.name, "429").inc()
        return error_response(429, str(e), "rate_limit_error", "queue_full",
                              headers={"Retry-After": str(e.retry_after_s)})



def _too_large(state: ServerState) -> JSONResponse:
    return error_response(413, f"the body is over {state.max_body_bytes} bytes", "invalid_request_error", "body_too_large")


async def _answer(state: ServerState, policy: Policy, chat_request: ChatRequest) -> Response:
    request_id = uuid.uuid4().hex
    start = time.perf_counter()
    conversation = chat_request.conversation()
    item = served_item(conversation, chat_request.gold())
    try:
        served = await policy.run(item, conversation)
    except Exception as e:  # a bug: the client gets a 500, the log the reason (masked)
        detail = mask_secrets(f"{type(e).__name__}: {e}", state.secrets)
        print(f"dlab serve: request {request_id} ({policy.name}) failed: {detail}", file=sys.stderr, flush=True)
        state.metrics.requests.labels(policy.name, "500").inc()
        return error_response(500, f"internal error ({type(e).__name__}); request {request_id}", "server_error")
    latency = time.perf_counter() - start
    status, body = _reply(request_id, policy, served)
    record(state, request_id, policy, item, served, status, latency)
    headers = dlab_headers(request_id, policy, served)
    return JSONResponse(body, status_code=status, headers=headers)


def _reply(request_id: str, policy: Policy, served: Served) -> tuple[int, dict[str, Any]]:
    answer = served.answer
    if answer.error is not None:
        status = 504 if "timeout" in answer.error else 502
        message = (f"solver {answer.solver!r} ({answer.backend} backend, model {answer.model}) failed after its "
                   f"retries: {answer.error}")
        return status, {"error": {"message": message, "type": "backend_error", "param": None,
                                  "code": "backend_timeout" if status == 504 else "backend_failed"},
                        "dlab": _dlab(request_id, served)}
    extra = json.loads(answer.extra) if answer.extra else {}
    return 200, completion(request_id, policy.name, answer.answer_text or "", extra.get("finish_reason", "stop"),
                           served.usage(), _dlab(request_id, served))


def _dlab(request_id: str, served: Served) -> dict[str, Any]:
    return {"request_id": request_id, "answered_by": served.answer.solver, "called": [a.solver for a in served.calls],
            "cost_usd": served.cost_usd, "decision": served.decision}


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(options: ServeOptions) -> int:
    """Build the policies, bind, serve until SIGTERM / SIGINT, flush the journal; the exit code."""
    import uvicorn

    layout = Layout(options.root)
    api_key = None
    if options.api_key_env:
        api_key = os.environ.get(options.api_key_env)
        if not api_key:
            raise InputError(f"--api-key-env {options.api_key_env}: that environment variable is empty or unset")
    if not _loopback(options.host) and not api_key:
        raise InputError(f"--host {options.host} is reachable from other machines: set --api-key-env too "
                         "(docs/serving.md, security)")
    params = load_params(layout.params_file)
    names = options.models or default_models(params, layout)
    if not names:
        raise InputError(f"nothing to serve: no solvers in {layout.params_file} and no saved routers")
    policies = build_policies(names, params, layout)
    solvers = sorted({s for p in policies.values() for s in p.solvers})
    secrets = [api_key] if api_key else []
    for p in policies.values():
        for s in p.solvers.values():
            secrets += s.secrets
    with served_lock(layout):
        journal = ServedJournal(layout, solvers, secrets=secrets)
        state = ServerState(policies, journal, Admission(options.concurrency, options.queue_size), ServerMetrics(),
                            api_key, options.max_body_bytes, secrets, BodyBudget(options.max_body_bytes_in_flight))
        # IPPROTO_TCP named, as getaddrinfo would: asyncio disables Nagle only on sockets that say so, and
        # without it every reply written in two parts waits ~40 ms for a delayed ACK
        sock = socket.socket(socket.AF_INET6 if ":" in options.host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((options.host, options.port))
        except OSError as e:
            journal.close()
            raise InputError(f"cannot listen on {options.host}:{options.port}: {e.strerror or e}") from None
        port = sock.getsockname()[1]
        host = f"[{options.host}]" if ":" in options.host else options.host
        print(f"dlab serve: {len(policies)} models on http://{host}:{port}/v1 "
              f"(journal: {layout.served_dir})", flush=True)
        config = uvicorn.Config(create_app(state), log_level=options.log_level, timeout_graceful_shutdown=None,
                                http=header_timeout_protocol(options.header_timeout_s),
                                backlog=max(2048, options.concurrency + options.queue_size))
        # uvicorn drains on SIGTERM / SIGINT, then raises the signal again under the handlers it found:
        # these, so a requested shutdown that drained and flushed ends with exit code 0
        stopped_by: list[int] = []
        previous = {sig: signal.signal(sig, lambda signum, frame: stopped_by.append(signum))
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            journal.close()  # after the lifespan's close (a no-op then), or when the app never started
    why = f" by {signal.Signals(stopped_by[0]).name}" if stopped_by else ""
    print(f"dlab serve: stopped{why}; {journal.rows} requests journalled in {layout.served_dir}", flush=True)
    if journal.failure or journal.pending:
        print(f"dlab serve: error: {journal.pending} requests answered but NOT journalled; {journal.failure}",
              file=sys.stderr, flush=True)
        return 1
    return 0
