"""`dlab tracking serve --token-env VAR`: a bearer-token gate in front of the MLflow server.

MLflow's server has no token check of its own (its `basic-auth` app wants users and passwords in a
database of its own). With a token the server listens on a Unix socket in a private folder (mode
0700: no other user of the machine can connect to it) and this small ASGI app, on 127.0.0.1:PORT,
forwards only requests that carry `Authorization: Bearer <token>`, which MLflow's client sends
when `MLFLOW_TRACKING_TOKEN` is set; any other request gets 401 and reaches nothing. Bodies stream
through in both directions (artifacts are never held whole). The token guards against other users
of the machine and against web pages a local browser opens; a process of the same user can read
the store's file anyway.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"upgrade", b"proxy-authorization", b"te", b"trailer"}
REFUSED = b"401 Unauthorized: this MLflow server needs `Authorization: Bearer <token>` (set MLFLOW_TRACKING_TOKEN)\n"


class TokenGate:
    """ASGI app: requests with the bearer token go to the MLflow server on `socket_path`."""

    def __init__(self, token: str, socket_path: str):
        if not token:
            raise ValueError("an empty token would let every request through")
        self.expected = b"Bearer " + token.encode("utf-8")
        self.client = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=socket_path),
                                        base_url="http://127.0.0.1", timeout=None)

    def authorised(self, headers: list[tuple[bytes, bytes]]) -> bool:
        given = next((v for k, v in headers if k.lower() == b"authorization"), b"")
        return hmac.compare_digest(given, self.expected)

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await self.client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        if not self.authorised(scope["headers"]):
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": REFUSED})
            return
        await self.forward(scope, receive, send)

    async def forward(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        async def body() -> AsyncIterator[bytes]:
            while True:
                message = await receive()
                yield message.get("body", b"")
                if not message.get("more_body"):
                    return

        path = scope["raw_path"].decode("latin-1") if scope.get("raw_path") else scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP | {b"authorization"}]
        request = self.client.build_request(scope["method"], path + (f"?{query}" if query else ""), headers=headers,
                                            content=body())
        reply = await self.client.send(request, stream=True)
        try:
            await send({"type": "http.response.start", "status": reply.status_code,
                        "headers": [(k, v) for k, v in reply.headers.raw if k.lower() not in HOP_BY_HOP]})
            async for chunk in reply.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await reply.aclose()
