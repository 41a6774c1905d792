"""An exclusive OS file lock (fcntl.flock) whose file exists only while it is held.

The kernel drops the lock when its holder dies (SIGKILL included), so it is never stale. The file
is removed on release, because a cache may live inside a DVC out (MARGENT's answer cache) where a
leftover file would change the out's hash. Removing a flock file is safe only with the inode check
below: a waiter that locked a file someone has just unlinked holds a lock nobody else can see, so
it retries on the file now at that path.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

POLL_S = 0.05


class LockHeld(Exception):
    """The lock was still held by another process when the wait ran out."""


def _try_lock(path: Path) -> int | None:
    """An fd holding the lock on the file now at `path`, or None if another process holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            raise
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the holder before us removed this file: lock the one at the path now


@contextmanager
def exclusive_lock(path: Path, wait_s: float | None = None, on_wait=None) -> Iterator[None]:
    """Hold `path` exclusively; wait up to `wait_s` seconds for another holder (None: as long as it
    takes, 0: not at all), calling `on_wait()` once if it has to; LockHeld when the wait runs out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = None if wait_s is None else time.monotonic() + max(wait_s, 0.0)
    fd = _try_lock(path)
    if fd is None and on_wait is not None and (wait_s is None or wait_s > 0):
        on_wait()
    while fd is None:
        if deadline is not None and time.monotonic() >= deadline:
            raise LockHeld(str(path))
        time.sleep(POLL_S)
        fd = _try_lock(path)
    try:
        yield
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.close(fd)  # closing the only fd releases the flock
