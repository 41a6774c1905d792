"""`dlab serve` keeps memory and connections bounded (issue 42): a chunked body is counted as it
arrives (1 GB chunked was buffered whole before the 413: 2.35 GB), every client's bodies together
are bounded (320 x 1 MiB was 9.2 GB), and a connection that never completes its request head is
closed (half-open connections were held forever)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.serve_fixtures import CLIENT_KEY, FakeBackend, ServeProcess, write_project


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def connect(server: ServeProcess) -> socket.socket:
    url = urlsplit(server.url)
    return socket.create_connection((url.hostname, url.port), timeout=30)


def head(length: str = "chunked") -> bytes:
    framing = "Transfer-Encoding: chunked" if length == "chunked" else f"Content-Length: {length}"
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {CLIENT_KEY}\r\n"
            f"Content-Type: application/json\r\n{framing}\r\n\r\n").encode()


def reply_status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        got = sock.recv(4096)
        if not got:
            break
        data += got
    return int(data.split()[1])


@pytest.fixture
def server(tmp_path: Path):
    fake = FakeBackend()
    root = write_project(tmp_path / "project", fake.url)
    proc = ServeProcess(root, "--model", "solver:fake", "--api-key-env", "DLAB_CLIENT_KEY",
                        "--max-body-bytes-in-flight", str(2 << 20), "--header-timeout", "1.5")
    yield proc
    proc.stop()
    fake.close()


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_bodies_and_heads_are_bounded(server: ServeProcess):
    pid = server.proc.pid
    before = peak_rss_kib(pid)
    # 1. a chunked body of 150 MB: refused once it passes max_body_bytes, never held whole
    sock = connect(server)
    sock.sendall(head())
    chunk = b"x" * (1 << 20)
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    try:
        for _ in range(150):
            sock.sendall(framed)
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert reply_status(sock) == 413
    sock.close()
    assert peak_rss_kib(pid) - before < 60 * 1024, "the chunked body was buffered"
    # 2. bodies in flight together: two clients hold 0.9 MiB each, a third one passes the 2 MiB bound
    partial = b'{"model": "solver:fake", "messages": [{"role": "user", "content": "' + b"y" * 900_000
    held = []
    for _ in range(2):
        s = connect(server)
        s.sendall(head(str(1_000_000)) + partial)
        held.append(s)
    time.sleep(0.5)
    third = connect(server)
    third.sendall(head(str(1_000_000)) + partial)
    assert reply_status(third) == 429
    for s in [*held, third]:
        s.close()
    # 3. a connection that sends half a request line is closed after --header-timeout
    idle = connect(server)
    idle.sendall(b"POST /v1/chat/comp")
    start = time.monotonic()
    assert idle.recv(100) == b"" and time.monotonic() - start < 10
    idle.close()
