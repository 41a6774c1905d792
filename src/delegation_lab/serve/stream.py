"""`stream: true`: a policy that answers with one model (a solver, or a router once it has chosen)
passes that model's stream through as server-sent events, chunk by chunk, with the policy's name as
`model`; the assembled answer is journalled like any other when the stream ends. A remote
(`openai_compat`) backend is streamed from its endpoint with the solver's key and per-attempt
deadline; there is no retry once bytes have gone out. An in-process backend answers whole and is
sent as one chunk. A cascade decides after seeing answers, so it cannot stream: 400.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from fastapi.responses import Response, StreamingResponse

from delegation_lab.serve.calls import ServedSolver, served_item
from delegation_lab.serve.policies import Policy, Served
from delegation_lab.serve.state import dlab_headers, record
from delegation_lab.serve.wire import ChatRequest, clean_text, error_response
from delegation_lab.solvers.base import Answer, Generation, Request, mask_secrets
from delegation_lab.solvers.http_body import STREAM_OVERHEAD, ReplyTooLarge, iter_lines_capped, read_capped
from delegation_lab.solvers.openai_compat import ERROR_BODY_CHARS
from delegation_lab.solvers.pricing import estimate_tokens, messages_tokens


def _event(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"


async def stream_response(state: Any, policy: Policy, chat_request: ChatRequest, release: Any) -> Response:
    """The SSE response; `release()` frees the admission slot when the stream ends (or is refused)."""
    request_id = uuid.uuid4().hex
    start = time.perf_counter()
    conversation = chat_request.conversation()
    item = served_item(conversation, chat_request.gold())
    solver_name, decision = await policy.choose(item)
    if solver_name is None:
        await release()
        return error_response(400, f"stream: true needs a policy that answers with one model; {policy.name} is a "
                              f"{policy.kind}, which decides after seeing answers", "invalid_request_error",
                              "stream_unsupported", "stream")
    solver = policy.solvers[solver_name]
    request = solver.request(item, conversation)
    include_usage = bool(chat_request.stream_options and chat_request.stream_options.include_usage)
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None, **more: Any) -> dict[str, Any]:
        return {"id": f"chatcmpl-{request_id}", "object": "chat.completion.chunk", "created": created,
                "model": policy.name, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None
                else [], **more}

    secrets = [*solver.secrets, *state.secrets]

    async def events() -> AsyncIterator[str]:
        answer: Answer | None = None
        parts: list[str] = []
        called = False
        backend_stream = _pass_through(solver, request, parts, secrets) if solver.remote else None
        try:
            called = True
            if backend_stream is not None:
                async for piece, result in backend_stream:
                    if result is not None:
                        answer = result
                    elif piece is not None:
                        yield _event(chunk({"content": piece}, None))
            else:
                answer = await solver.answer(request)
                if answer.error is None:
                    yield _event(chunk({"role": "assistant", "content": answer.answer_text or ""}, None))
            assert answer is not None
            served = Served(answer, [answer], decision)
            dlab = {"request_id": request_id, "answered_by": answer.solver, "called": [answer.solver],
                    "cost_usd": served.cost_usd, "decision": decision}
            if answer.error is not None:
                yield _event({"error": {"message": f"solver {answer.solver!r} ({answer.backend} backend) failed: "
                                                   f"{answer.error}", "type": "backend_error", "param": None,
                                        "code": "backend_failed"}, "dlab": dlab})
            else:
                yield _event(chunk({}, "stop", dlab=dlab))
                if include_usage:
                    yield _event(chunk(None, None, usage=served.usage()))
            yield "data: [DONE]\n\n"
            called = False  # journalled below
            record(state, request_id, policy, item, served, 200 if answer.error is None else 502,
                   time.perf_counter() - start)
        except Exception as e:  # a bug mid-stream: the client gets an error event, the journal the call
            detail = mask_secrets(f"{type(e).__name__}: {e}", secrets)
            print(f"dlab serve: stream {request_id} ({policy.name}) failed: {detail}", file=sys.stderr, flush=True)
            _journal_unfinished(state, request_id, policy, item, decision, solver, request, parts, answer, called,
                                f"the server failed mid-stream ({type(e).__name__})", 500, start)
            called = False
            yield _event({"error": {"message": f"internal error ({type(e).__name__}); request {request_id}",
                                    "type": "server_error", "param": None, "code": None}})
        except BaseException:  # the client went away (cancelled, or the generator closed): journal the call
            _journal_unfinished(state, request_id, policy, item, decision, solver, request, parts, answer, called,
                                "the client disconnected mid-stream", 499, start)
            called = False
            raise
        finally:
            if backend_stream is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await backend_stream.aclose()
                    except Exception:  # noqa: BLE001, S110 - closing the backend's stream is best effort
                        pass
            await release()

    served_now = Served(Answer.model_construct(solver=solver_name, error=None), [], decision)
    headers = {k: v for k, v in dlab_headers(request_id, policy, served_now).items() if k != "x-dlab-cost-usd"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _journal_unfinished(state: Any, request_id: str, policy: Policy, item: Any, decision: dict[str, Any],
                        solver: ServedSolver, request: Request, parts: list[str], answer: Answer | None, called: bool,
                        why: str, status: int, start: float) -> None:
    """Journal a stream that did not finish: the backend was called (and may bill), so its call is an
    error row with the text received so far counted (tokens estimated), and the request a decision."""
    if not called:
        return
    if answer is None:
        received = "".join(parts)
        gen = Generation(text=None, tokens_in=messages_tokens(request.messages), tokens_out=estimate_tokens(received),
                         latency_s=round(time.perf_counter() - start, 4), error=why,
                         extra={"streamed": True, "tokens_estimated": True, "received_chars": len(received)})
        answer = solver.finish(request, gen)
    try:
        record(state, request_id, policy, item, Served(answer, [answer], decision), status, time.perf_counter() - start)
    except Exception as e:  # noqa: BLE001 - nothing more can be done here; say so
        print(f"dlab serve: stream {request_id} could not be journalled ({type(e).__name__})", file=sys.stderr, flush=True)


def _stream_event(data: str) -> tuple[dict[str, Any] | None, list[str], str | None]:
    """(usage, content pieces, error) of one SSE data line, checked like a whole reply: an event that
    is not an object, choices that are not a list of objects, a delta that is not an object or
    content that is not text is an error; usage that is not an object is ignored (estimated)."""
    try:
        event = json.loads(data)
    except (ValueError, RecursionError) as e:
        return None, [], f"malformed stream event (not JSON: {type(e).__name__})"
    if not isinstance(event, dict):
        return None, [], f"malformed stream event (a JSON {type(event).__name__}, not an object)"
    usage = event.get("usage") if isinstance(event.get("usage"), dict) else None
    choices = event.get("choices") or []
    if not isinstance(choices, list):
        return usage, [], "malformed stream event (choices is not a list)"
    pieces = []
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        delta = {} if delta is None and isinstance(choice, dict) else delta
        if not isinstance(delta, dict):
            return usage, pieces, "malformed stream event (a choice or its delta is not an object)"
        piece = delta.get("content")
        if piece is not None and not isinstance(piece, str):
            return usage, pieces, f"malformed stream event (delta.content is a {type(piece).__name__}, not text)"
        if piece:
            pieces.append(piece)
    return usage, pieces, None


async def _pass_through(solver: ServedSolver, request: Request, parts: list[str], secrets: list[str]
                        ) -> AsyncIterator[tuple[str | None, Answer | None]]:
    """The backend's content deltas as they come (masked), then the journalled answer (text, usage,
    price, checked by `ServedSolver.finish`)."""
    backend = solver.solver.backend
    client, gate = solver.session()
    payload = {**backend._payload(request), "stream": True, "stream_options": {"include_usage": True}}
    usage: dict[str, Any] = {}
    error: str | None = None
    received = 0
    start = time.perf_counter()
    try:
        async with gate, client.stream("POST", "/chat/completions", json=payload) as response:
            if response.status_code >= 400:
                try:
                    raw = await read_capped(response, backend.params.max_reply_bytes)
                except ReplyTooLarge as e:
                    raw = str(e).encode()
                body = mask_secrets(raw.decode(errors="replace"), solver.secrets) or ""
                error = f"HTTP {response.status_code}: {' '.join(body.split())[:ERROR_BODY_CHARS]}"
            else:
                cap = backend.params.max_reply_bytes
                async for line in iter_lines_capped(response, cap, STREAM_OVERHEAD * cap):
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    event_usage, pieces, error = _stream_event(data)
                    usage = event_usage or usage
                    for piece in pieces:
                        parts.append(piece)
                        received += len(piece.encode(errors="replace"))
                        if received > backend.params.max_reply_bytes:  # a reply is never held whole past the cap
                            error = f"the streamed reply is over max_reply_bytes ({backend.params.max_reply_bytes})"
                            break
                        yield mask_secrets(clean_text(piece), secrets), None
                    if error:
                        break
    except httpx.HTTPError as e:
        error = f"stream failed ({type(e).__name__})"
    except ReplyTooLarge as e:  # one huge line, or a gzip bomb: an error row, never an empty 200 answer
        error = str(e)
    text = "".join(parts)
    # the counts as reported: `finish` passes them through the one boundary (solvers.usage.checked_generation)
    gen = Generation.model_construct(
        text=None if error else text, tokens_in=None if error else usage.get("prompt_tokens"),
        tokens_out=None if error else usage.get("completion_tokens"), latency_s=round(time.perf_counter() - start, 4),
        error=error, cost_usd=None, parsed_answer=None, source_parsed=False, extra={"streamed": True})
    yield None, solver.finish(request, gen)
