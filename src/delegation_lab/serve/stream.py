"""`stream: true`: a policy that answers with one model (a solver, or a router once it has chosen)
passes that model's stream through as server-sent events, chunk by chunk, with the policy's name as
`model`; the assembled answer is journalled like any other when the stream ends. A remote
(`openai_compat`) backend is streamed from its endpoint with the solver's key and per-attempt
deadline; there is no retry once bytes have gone out. An in-process backend answers whole and is
sent as one chunk. A cascade decides after seeing answers, so it cannot stream: 400.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi.responses import Response, StreamingResponse

from delegation_lab.serve.calls import ServedSolver, served_item
from delegation_lab.serve.policies import Policy, Served
from delegation_lab.serve.state import dlab_headers, record
from delegation_lab.serve.wire import ChatRequest, error_response
from delegation_lab.solvers.base import Answer, Generation, Request, mask_secrets
from delegation_lab.solvers.http_body import ReplyTooLarge, read_capped
from delegation_lab.solvers.openai_compat import ERROR_BODY_CHARS
from delegation_lab.solvers.pricing import estimate_tokens, messages_tokens


def _event(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"


async def stream_response(state: Any, policy: Policy, chat_request: ChatRequest, release: Any) -> Response:
    """The SSE response; `release()` frees the admission slot when the stream ends (or is refused)."""
    request_id = uuid.uuid4().hex
    start = time.perf_counter()
    conversation = chat_request.conversation()
    item = served_item(conversation, (chat_request.metadata or {}).get("gold"))
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

    async def events() -> AsyncIterator[str]:
        answer: Answer | None = None
        try:
            if solver.remote:
                parts: list[str] = []
                async for piece, result in _pass_through(solver, request, parts):
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
            record(state, request_id, policy, item, served, 200 if answer.error is None else 502,
                   time.perf_counter() - start)
        finally:
            await release()

    served_now = Served(Answer.model_construct(solver=solver_name, error=None), [], decision)
    headers = {k: v for k, v in dlab_headers(request_id, policy, served_now).items() if k != "x-dlab-cost-usd"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


async def _pass_through(solver: ServedSolver, request: Request, parts: list[str]
                        ) -> AsyncIterator[tuple[str | None, Answer | None]]:
    """The backend's content deltas as they come, then the journalled answer (text, usage, price)."""
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
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    event = json.loads(data)
                    usage = event.get("usage") or usage
                    for choice in event.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content")
                        if piece:
                            parts.append(piece)
                            received += len(piece.encode())
                            if received > backend.params.max_reply_bytes:  # a reply is never held whole past the cap
                                error = f"the streamed reply is over max_reply_bytes ({backend.params.max_reply_bytes})"
                                break
                            yield mask_secrets(piece, solver.secrets), None
                    if error:
                        break
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        error = f"stream failed ({type(e).__name__})"
    text = "".join(parts)
    tokens_in = usage.get("prompt_tokens") or messages_tokens(request.messages)
    tokens_out = usage.get("completion_tokens") or estimate_tokens(text)
    extra = {} if usage else {"tokens_estimated": True}
    gen = Generation(text=None if error else text, tokens_in=0 if error else tokens_in, tokens_out=0 if error else tokens_out,
                     latency_s=round(time.perf_counter() - start, 4), error=error, extra={**extra, "streamed": True})
    yield None, solver.solver.answers_for([request], [gen])[0]
