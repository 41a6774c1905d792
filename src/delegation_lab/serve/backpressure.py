"""The bounded queue: at most `concurrency` requests are worked on and `queue_size` more wait; one
past that is refused at once (429 with Retry-After) rather than queued without bound, so a burst
costs latency up to a known depth and then fails fast where the client can back off."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class QueueFull(Exception):
    """No room: the client should retry after `retry_after_s`."""

    def __init__(self, retry_after_s: int):
        super().__init__(f"the server's queue is full; retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Admission:
    def __init__(self, concurrency: int, queue_size: int):
        self.concurrency, self.queue_size = concurrency, queue_size
        self._slots = asyncio.Semaphore(concurrency)
        self.admitted = 0  # working + waiting
        self.working = 0
        self._mean_s = 1.0  # running mean of a request's time, for Retry-After

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: one queue's worth of mean request times, at least 1."""
        waves = (self.admitted - self.concurrency + 1) / self.concurrency
        return max(1, math.ceil(self._mean_s * max(waves, 1.0)))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.admitted >= self.concurrency + self.queue_size:
            raise QueueFull(self.retry_after())
        self.admitted += 1
        try:
            async with self._slots:
                self.working += 1
                start = asyncio.get_running_loop().time()
                try:
                    yield
                finally:
                    self.working -= 1
                    self._mean_s = 0.9 * self._mean_s + 0.1 * (asyncio.get_running_loop().time() - start)
        finally:
            self.admitted -= 1


class BodyBudget:
    """Request-body bytes every client together may have in memory at once: a request takes its
    chunks as they arrive and gives them back when it is done; one that would pass `total` is refused."""

    def __init__(self, total: int):
        self.total = total
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self.total:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n
