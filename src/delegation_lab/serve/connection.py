"""The HTTP/1.1 connection `dlab serve` runs on: uvicorn's h11 protocol with a header-read deadline.

uvicorn's `timeout_keep_alive` only starts after a response; a client that connects and sends
nothing, or half a request line, is held forever (a half-open connection costs a socket and a
parser each). Here every connection must deliver a complete request head within
`HEADER_TIMEOUT_S` of connecting (and of its previous response), else it is closed."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 30.0
"""Longest wait for a complete request head (request line and headers)."""


def header_timeout_protocol(timeout_s: float = HEADER_TIMEOUT_S) -> type[H11Protocol]:
    """An H11Protocol class that closes a connection whose request head is not complete in `timeout_s`."""

    class HeaderTimeoutH11(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(timeout_s, self._head_timeout)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            if self.cycle is None or self.cycle.response_complete:  # no request head arrived in time
                if not self.transport.is_closing():
                    self.transport.close()

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # a whole head arrived: the request's own deadlines apply now

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutH11
