"""`openai_compat`: any OpenAI-compatible chat endpoint (vLLM server, llama.cpp server, Ollama,
hosted APIs).

Requests go out concurrently (httpx + asyncio, at most `concurrency` in flight) because remote
endpoints are latency-bound, not compute-bound. Transient failures — 429, 5xx, timeouts, dropped
connections, replies that are not the JSON we asked for — are retried with exponential backoff
and jitter (a server's Retry-After wins, capped); other 4xx mean the request itself is wrong and
are not retried. When retries run out the answer becomes a row with `error` set, so one bad item
never sinks a batch and the cache can retry it later.

The API key is read from the environment variable named in params at call time and only ever
travels in the Authorization header: it is not stored on the backend, not in the fingerprint,
not in `extra`, and is scrubbed from any error text a server echoes back.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from delegation_lab.config import Decoding, OpenAICompatParams
from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.pricing import estimate_tokens, messages_tokens

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

    def __init__(self, model: str, params: OpenAICompatParams, decoding: Decoding):
        self.model = model
        self.params = params
        self.decoding = decoding
        self.base_url = normalise_base_url(params.base_url)

    def fingerprint(self) -> dict[str, Any]:
        # Another endpoint may serve different weights under the same model name.
        return {"base_url": self.base_url}

    def generate(self, requests: list[Request]) -> list[Generation]:
        """Sync entry point; inside a running event loop (notebooks, async callers) the work runs
        on a worker thread with its own loop, since a loop cannot be re-entered."""
        if not requests:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.agenerate(requests))
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(lambda: asyncio.run(self.agenerate(requests))).result()

    async def agenerate(self, requests: list[Request]) -> list[Generation]:
        key_env = self.params.api_key_env
        key = os.environ.get(key_env) if key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        n = self.params.concurrency
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        gate = asyncio.Semaphore(self.params.concurrency)
        async with httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=httpx.Timeout(self.params.timeout_s), limits=limits
        ) as client:
            generations = await asyncio.gather(*(self._one(client, gate, r) for r in requests))
        if key:
            generations = [_scrub(g, key) for g in generations]
        return list(generations)

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

    async def _one(self, client: httpx.AsyncClient, gate: asyncio.Semaphore, request: Request) -> Generation:
        payload = self._payload(request)
        p = self.params
        failure = ""
        for attempt in range(p.max_retries + 1):
            try:
                async with gate:
                    start = time.perf_counter()
                    gen = await self._attempt(client, payload, request)
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

    async def _attempt(self, client: httpx.AsyncClient, payload: dict[str, Any], request: Request) -> Generation:
        """One POST; a Generation on success or a hard failure, _Retryable on a transient one."""
        try:
            response = await client.post("/chat/completions", json=payload)
        except httpx.TimeoutException as e:
            raise _Retryable(f"timeout after {self.params.timeout_s:g} s ({type(e).__name__})") from None
        except httpx.TransportError as e:
            raise _Retryable(f"connection error ({type(e).__name__})") from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(f"HTTP {status}", parse_retry_after(response.headers.get("retry-after")))
        if status >= 400:
            body = " ".join(response.text.split())[:ERROR_BODY_CHARS]
            return Generation(text=None, error=f"HTTP {status}: {body}" if body else f"HTTP {status}")
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise _Retryable(f"malformed reply (HTTP {status}, not a chat completion)") from None
        extra: dict[str, Any] = {}
        if choice.get("finish_reason") not in (None, "stop"):
            extra["finish_reason"] = choice["finish_reason"]
        usage = data.get("usage") or {}
        tokens_in, tokens_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if not isinstance(tokens_in, int) or not isinstance(tokens_out, int):
            tokens_in, tokens_out = messages_tokens(request.messages), estimate_tokens(text)
            extra["tokens_estimated"] = True
        return Generation(text=text, tokens_in=tokens_in, tokens_out=tokens_out, extra=extra)


def _scrub(gen: Generation, key: str) -> Generation:
    """Last line of defence: a server that echoes the key back must not get it into a row."""
    if gen.error and key in gen.error:
        gen.error = gen.error.replace(key, "***")
    return gen
