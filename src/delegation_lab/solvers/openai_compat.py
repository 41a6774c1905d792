"""`openai_compat`: any OpenAI-compatible chat endpoint (vLLM server, llama.cpp server, Ollama,
hosted APIs).

Requests go out concurrently (httpx + asyncio, at most `concurrency` in flight) because remote
endpoints are latency-bound, not compute-bound. Transient failures — 429, 5xx, timeouts, dropped
connections, replies that are not the JSON we asked for — are retried with exponential backoff
and jitter (a server's Retry-After wins, capped); other 4xx mean the request itself is wrong and
are not retried. When retries run out the answer becomes a row with `error` set, so one bad item
never sinks a batch and the cache can retry it later; so does anything unexpected (a bug, an
httpx surprise), rather than an exception that loses the batch in flight.

Deadlines: `timeout_s` bounds each attempt's wall-clock time as a whole (asyncio.timeout around
connect + send + read), so a server that trickles a byte at a time cannot hold a request past it;
httpx's per-phase timeouts alone reset on every byte. Each generation is reported as it
completes (`generate_each`), so the cache checkpoints fast answers while a slow one is in flight.

Replies are read with a byte cap (`max_reply_bytes`, as sent and after decompression, see
`http_body`) and validated into `chat_reply.ChatCompletion` (content strings or parts, odd usage).
A reply's usage is checked against its own text and the request at the one boundary every endpoint
number passes (`usage.checked_generation`, shared with `dlab serve`: 1e30, negative, NaN or
implausible counts become the estimate, flagged), and a reply that only calls a tool is an error
row, not an empty answer.

The API key is read from the environment variable named in params at call time and only ever
travels in the Authorization header: it is not stored on the backend, not in the fingerprint,
and it (with every `secret_envs` value) is masked by `base.mask_secrets` in every text a server
sends back — error bodies before they are cut to ERROR_BODY_CHARS, completion text, `extra`.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from delegation_lab.solvers.base import Generation, Request, configured_secrets, mask_secrets
from delegation_lab.solvers.chat_reply import MalformedReply, Usage, parse_chat_completion
from delegation_lab.solvers.params import Decoding, OpenAICompatParams, SolverParams
from delegation_lab.solvers.http_body import ACCEPT_ENCODING, ReplyTooLarge, read_capped
from delegation_lab.solvers.usage import checked_generation

RETRY_AFTER_CAP_S = 60.0
"""Longest wait a server's Retry-After header can impose before one retry."""
ERROR_BODY_CHARS = 200
"""How much of a non-retryable error reply is kept in the answer's `error` (enough for the reason)."""


class _Retryable(Exception):
    """A transient failure: worth another attempt after `retry_after` (or the backoff)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def normalise_base_url(url: str) -> str:
    """Scheme and host lower-cased, no trailing slash: equal endpoints give equal request hashes."""
    url = url.strip().rstrip("/")
    parsed = httpx.URL(url)
    return str(parsed.copy_with(scheme=parsed.scheme.lower(), host=parsed.host.lower())).rstrip("/")


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


class OpenAICompatBackend:
    """POSTs each request to `{base_url}/chat/completions`, concurrently and with retries."""

    @classmethod
    def from_params(cls, name: str, params: SolverParams) -> OpenAICompatBackend:
        """The backend of solver `name` (`solvers.BACKENDS` builds every backend this way)."""
        return cls(params.model, params.openai_compat, params.decoding)

    def __init__(self, model: str, params: OpenAICompatParams, decoding: Decoding):
        self.model = model
        self.params = params
        self.decoding = decoding
        self.base_url = normalise_base_url(params.base_url)

    def fingerprint(self) -> dict[str, Any]:
        # Another endpoint may serve different weights under the same model name.
        return {"base_url": self.base_url}

    def generate(self, requests: list[Request]) -> list[Generation]:
        return self.generate_each(requests, None)

    def generate_each(
        self, requests: list[Request], on_generation: Callable[[int, Generation], None] | None
    ) -> list[Generation]:
        """Sync entry point; inside a running event loop (notebooks, async callers) the work runs
        on a worker thread with its own loop, since a loop cannot be re-entered."""
        if not requests:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.agenerate(requests, on_generation))
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(lambda: asyncio.run(self.agenerate(requests, on_generation))).result()

    def client(self) -> httpx.AsyncClient:
        """An HTTP client for this endpoint: the key in its Authorization header, the deadline, at most
        `concurrency` connections. A long-lived caller (`dlab serve`) keeps one and passes it to agenerate."""
        key_env = self.params.api_key_env
        key = os.environ.get(key_env) if key_env else None
        headers = {"Accept-Encoding": ACCEPT_ENCODING}  # only what read_capped can decode within its cap
        if key:
            headers["Authorization"] = f"Bearer {key}"
        n = self.params.concurrency
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=httpx.Timeout(self.params.timeout_s),
                                 limits=limits)

    async def agenerate(
        self, requests: list[Request], on_generation: Callable[[int, Generation], None] | None = None,
        client: httpx.AsyncClient | None = None, gate: asyncio.Semaphore | None = None,
    ) -> list[Generation]:
        """Every request answered concurrently, at most `concurrency` in flight (`gate`: a semaphore the
        caller shares between calls; `client`: one of `client()`, kept open by the caller)."""
        secrets = configured_secrets(self.params)
        gate = gate or asyncio.Semaphore(self.params.concurrency)

        async def one(client: httpx.AsyncClient, i: int, request: Request) -> Generation:
            gen = (await self._one(client, gate, request, secrets)).masked(secrets)
            if on_generation:
                on_generation(i, gen)
            return gen

        if client is not None:
            return list(await asyncio.gather(*(one(client, i, r) for i, r in enumerate(requests))))
        async with self.client() as own:
            return list(await asyncio.gather(*(one(own, i, r) for i, r in enumerate(requests))))

    def _payload(self, request: Request) -> dict[str, Any]:
        d = self.decoding
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": d.temperature,
            "top_p": d.top_p,
            "max_tokens": d.max_tokens,
        }
        if d.seed is not None:
            payload["seed"] = d.seed
        return payload

    async def _one(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, request: Request, secrets: list[str]
    ) -> Generation:
        try:
            return await self._with_retries(client, gate, request, secrets)
        except Exception as e:  # a bug or an httpx surprise costs this row, not the batch in flight
            detail = mask_secrets(f"{type(e).__name__}: {e}", secrets) or ""
            return Generation(text=None, error=f"unexpected error ({' '.join(detail.split())[:ERROR_BODY_CHARS]})")

    async def _with_retries(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, request: Request, secrets: list[str]
    ) -> Generation:
        payload = self._payload(request)
        p = self.params
        failure = ""
        for attempt in range(p.max_retries + 1):
            try:
                async with gate:
                    start = time.perf_counter()
                    try:
                        async with asyncio.timeout(p.timeout_s):
                            gen = await self._attempt(client, payload, request, secrets)
                    except TimeoutError:
                        raise _Retryable(f"timeout after {p.timeout_s:g} s (deadline of the whole request)") from None
                    gen.latency_s = round(time.perf_counter() - start, 4)
                if attempt:
                    gen.extra["retries"] = attempt
                return gen
            except _Retryable as e:
                failure = str(e)
                if attempt == p.max_retries:
                    break
                backoff = p.backoff_s * 2**attempt
                delay = e.retry_after if e.retry_after is not None else backoff * random.uniform(0.5, 1.0)
                await asyncio.sleep(delay)
        tries = p.max_retries + 1
        return Generation(text=None, error=f"{failure} (gave up after {tries} attempt{'s' * (tries > 1)})")

    async def _attempt(
        self, client: httpx.AsyncClient, payload: dict[str, Any], request: Request, secrets: list[str]
    ) -> Generation:
        """One POST; a Generation on success or a hard failure, _Retryable on a transient one. The
        body is read with `http_body.read_capped`: a reply over `max_reply_bytes` (as sent or
        decompressed) is an error row, never held whole in memory."""
        cap = self.params.max_reply_bytes
        try:
            async with client.stream("POST", "/chat/completions", json=payload) as response:
                status = response.status_code
                if status == 429 or status >= 500:
                    raise _Retryable(f"HTTP {status}", parse_retry_after(response.headers.get("retry-after")))
                try:
                    content = await read_capped(response, cap)
                except ReplyTooLarge as e:
                    return Generation(text=None, error=f"HTTP {status}: {e}")
                encoding = response.encoding or "utf-8"
        except httpx.TimeoutException as e:
            raise _Retryable(f"timeout after {self.params.timeout_s:g} s ({type(e).__name__})") from None
        except httpx.TransportError as e:
            raise _Retryable(f"connection error ({type(e).__name__})") from None
        if status >= 400:
            # mask first: a key cut by the truncation would no longer be found whole
            text = content.decode(encoding, errors="replace")
            body = " ".join((mask_secrets(text, secrets) or "").split())[:ERROR_BODY_CHARS]
            return Generation(text=None, error=f"HTTP {status}: {body}" if body else f"HTTP {status}")
        try:
            reply = parse_chat_completion(content)
        except MalformedReply as e:
            raise _Retryable(f"malformed reply (HTTP {status}, not a chat completion: {e})") from None
        text = reply.text
        if not text and reply.calls_a_tool:
            return Generation(text=None, error="reply has only tool_calls and no content: the model called a tool "
                                               "instead of answering (tool calls are not supported)")
        extra: dict[str, Any] = {}
        if reply.finish_reason not in (None, "stop"):
            extra["finish_reason"] = reply.finish_reason
        usage = reply.usage or Usage()
        # the counts as reported (None, negative, 1e30...): checked_generation estimates what is not plausible
        reported = Generation.model_construct(text=text, tokens_in=usage.prompt_tokens, tokens_out=usage.completion_tokens,
                                              latency_s=0.0, error=None, cost_usd=None, parsed_answer=None,
                                              source_parsed=False, extra=extra)
        checked = checked_generation(reported, request, self.decoding.max_tokens)
        return Generation(text=checked.text, tokens_in=checked.tokens_in, tokens_out=checked.tokens_out,
                          extra=checked.extra)

