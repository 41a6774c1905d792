"""An HTTP reply body read with a byte cap, on the wire and after decompression.

Why not `response.content` or httpx's `aiter_bytes`: both decode a compressed chunk in one go, so a
few kilobytes of gzip can expand to gigabytes before any count is checked (a "gzip bomb"). Here the
raw (wire) bytes are counted as they arrive and decompressed with zlib's `max_length`, so no more
than `cap + 1` decoded bytes ever exist; a Content-Length above the cap is refused before reading.
Only the encodings we ask for (`ACCEPT_ENCODING`) are decoded; any other is refused, not guessed.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import httpx

ACCEPT_ENCODING = "gzip, deflate"
"""The Accept-Encoding sent: the encodings `read_capped` can decode within its cap."""


class ReplyTooLarge(ValueError):
    """The reply is over the cap (or in an encoding we cannot bound); the message says which."""


def _decoder(encoding: str) -> zlib._Decompress | None:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(zlib.MAX_WBITS | 32)  # auto-detects the gzip or zlib header
    raise ReplyTooLarge(f"reply in Content-Encoding {encoding[:40]!r}, which cannot be decoded within a byte cap")


def _inflate(decoder: zlib._Decompress, chunk: bytes, out: bytearray, cap: int) -> None:
    data = chunk
    while data:
        out += decoder.decompress(data, cap + 1 - len(out))
        if len(out) > cap:
            return
        data = decoder.unconsumed_tail


async def read_capped(response: httpx.Response, cap: int, setting: str = "max_reply_bytes") -> bytes:
    """The decoded body of a streamed `response`, at most `cap` bytes both as sent and as decoded;
    over either, ReplyTooLarge naming `setting` (the param that raises the cap)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise ReplyTooLarge(f"reply refused: Content-Length {declared} bytes is over {setting} = {cap}")
    decoder = _decoder(response.headers.get("content-encoding", ""))
    out = bytearray()
    wire = 0
    async for chunk in response.aiter_raw():
        wire += len(chunk)
        if wire > cap:
            raise ReplyTooLarge(f"reply refused: over {setting} = {cap} bytes as sent")
        if decoder is None:
            out += chunk
        else:
            try:
                _inflate(decoder, chunk, out, cap)
            except zlib.error as e:
                raise ReplyTooLarge(f"reply refused: its compressed body does not decode ({e})") from None
        if len(out) > cap:
            raise ReplyTooLarge(f"reply refused: over {setting} = {cap} bytes after decompression "
                                f"(stopped after {wire} bytes as sent)")
    if decoder is not None:
        out += decoder.flush()
        if len(out) > cap:
            raise ReplyTooLarge(f"reply refused: over {setting} = {cap} bytes after decompression")
    return bytes(out)


STREAM_OVERHEAD = 32
"""A streamed reply's decoded bytes may be this many times `max_reply_bytes`: server-sent events wrap
every few characters of text in ~150 bytes of JSON."""


async def iter_lines_capped(response: httpx.Response, line_cap: int, total_cap: int,
                            setting: str = "max_reply_bytes") -> AsyncIterator[str]:
    """The lines of a streamed `response` (server-sent events), decoded and decompressed in bounded
    steps: one line over `line_cap` bytes (a 300 MB SSE line), or the whole stream over `total_cap`
    decoded bytes (a gzip bomb), is ReplyTooLarge naming `setting`; no more than about one line's
    cap is ever held."""
    decoder = _decoder(response.headers.get("content-encoding", ""))
    buf = bytearray()
    total = 0

    def take(out: bytes) -> list[str]:
        nonlocal total
        total += len(out)
        if total > total_cap:
            raise ReplyTooLarge(f"stream refused: over {total_cap} bytes decoded ({STREAM_OVERHEAD} x {setting})")
        buf.extend(out)
        lines = []
        while (i := buf.find(b"\n")) >= 0:
            lines.append(bytes(buf[:i]).rstrip(b"\r").decode("utf-8", errors="replace"))
            del buf[: i + 1]
        if len(buf) > line_cap:
            raise ReplyTooLarge(f"stream refused: one line over {setting} = {line_cap} bytes")
        return lines

    try:
        async for chunk in response.aiter_raw():
            if decoder is None:
                for line in take(chunk):
                    yield line
                continue
            data = chunk
            while data:
                for line in take(decoder.decompress(data, 1 << 16)):
                    yield line
                data = decoder.unconsumed_tail
        if decoder is not None:
            for line in take(decoder.flush()):
                yield line
    except zlib.error as e:
        raise ReplyTooLarge(f"stream refused: its compressed body does not decode ({e})") from None
    if buf:
        yield bytes(buf).rstrip(b"\r").decode("utf-8", errors="replace")
