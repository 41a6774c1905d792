"""Streams from an endpoint are read in bounded steps (issue 42): one 300 MB SSE line took 1.5 GB and
a gzip-bombed stream answered 200 with an empty answer; now each is ReplyTooLarge (an error row)."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc

import httpx
import pytest

from delegation_lab.solvers.http_body import ReplyTooLarge, iter_lines_capped


async def _lines(body: bytes, gz: bool, line_cap: int, total_cap: int, keep: bool = True) -> list[str]:
    headers = {"content-encoding": "gzip"} if gz else {}

    async def chunks():
        for i in range(0, len(body), 1 << 16):
            yield body[i : i + (1 << 16)]

    transport = httpx.MockTransport(lambda request: httpx.Response(200, headers=headers, content=chunks()))
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        async with client.stream("POST", "/chat/completions") as response:
            lines = []
            async for line in iter_lines_capped(response, line_cap, total_cap):
                if keep:
                    lines.append(line)
            return lines


def test_sse_lines_are_read_plain_and_gzipped():
    body = b'data: {"a": 1}\r\n\r\ndata: [DONE]\n'
    for gz in (False, True):
        lines = asyncio.run(_lines(gzip.compress(body) if gz else body, gz, 1000, 10_000))
        assert lines == ['data: {"a": 1}', "", "data: [DONE]"]


@pytest.mark.parametrize("gz", [False, True])
def test_one_huge_line_is_refused_without_holding_it(gz):
    body = b"data: " + b"x" * (40 << 20)
    body = gzip.compress(body, compresslevel=1) if gz else body
    tracemalloc.start()
    try:
        with pytest.raises(ReplyTooLarge, match="one line over"):
            asyncio.run(_lines(body, gz, 1 << 20, 1 << 30))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(body) // 2 + (8 << 20) if not gz else peak < 8 << 20


def test_a_gzip_bomb_of_short_lines_is_refused_by_the_total():
    bomb = gzip.compress(b"\n" * (200 << 20), compresslevel=9)  # ~200 KB that inflate to 200 MB
    tracemalloc.start()
    try:
        with pytest.raises(ReplyTooLarge, match="decoded"):
            asyncio.run(_lines(bomb, True, 1 << 20, 8 << 20, keep=False))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
