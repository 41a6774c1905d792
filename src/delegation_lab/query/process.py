"""A query's DuckDB work in a forked child process with a hard memory bound; its rows read back here.

DuckDB's `memory_limit` governs its buffer manager, not every vector it builds: one huge value
(`SELECT repeat('x', 1500000000)`) or a batch of big ones is allocated outside it, and the process
held 3 GB and more before any check could see the value. The child runs under RLIMIT_DATA (the
private writable memory a process may map, counted by Linux since 4.7) set to what it held when
forked plus `extra` bytes; past it an allocation fails, which DuckDB reports as an out-of-memory
error (one line), and what cannot report (an abort, the kernel's OOM killer) ends only the child,
whose parent then says which bound was passed. RLIMIT_AS would not do: the interpreter with DuckDB,
Arrow and polars loaded reserves gigabytes of address space it never touches (allocator arenas),
and how much moves with the machine.

A fork, not a fresh interpreter: the child starts in milliseconds with every module loaded. It uses
nothing of the parent but the pipes (no polars, never stdout) and leaves with `os._exit`, so no
buffer of the parent is flushed twice. Rows come back as an Arrow IPC stream cut into pieces of at
most PIECE_BYTES, so the parent holds little at a time; the child's one-line failure comes back on
a second pipe once the stream is closed.
"""

from __future__ import annotations

import os
import resource
import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pyarrow as pa

PIECE_BYTES = 64 * 1024**2  # the most one IPC message carries (a batch is cut into pieces of rows)
NOTE_BYTES = 4000  # a failure's line: far below a pipe's buffer, so writing it never blocks
MEMORY_EXIT = 3  # the child's exit code for Python's own MemoryError


def data_held() -> int | None:
    """Bytes of private writable memory this process has mapped (VmData), None where /proc has no such line."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def bound_data(extra: int) -> int | None:
    """Cap this process's private writable memory at what it holds now plus `extra` bytes (RLIMIT_DATA,
    soft and hard: nothing in the process can lift it); the cap, or None where it cannot be read."""
    held = data_held()
    if held is None:
        return None
    cap = held + extra
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    return cap


def pieces(batch: pa.RecordBatch, max_bytes: int = PIECE_BYTES) -> Iterator[pa.RecordBatch]:
    """`batch` cut into runs of rows of about `max_bytes` each (zero-copy slices; at least one row each)."""
    size = batch.nbytes
    if size <= max_bytes or batch.num_rows <= 1:
        yield batch
        return
    step = max(1, batch.num_rows * max_bytes // size)
    for start in range(0, batch.num_rows, step):
        yield batch.slice(start, step)


class ChildRows:
    """The schema and record batches a forked child streams back. Iterating ends with the child's own
    failure, raised as `failure(line)`, or with a failure naming the bound when it died without one."""

    def __init__(self, pid: int, data_fd: int, note_fd: int, failure: Callable[[str], Exception], died: str):
        self.pid, self.failure, self.died = pid, failure, died
        self.data = os.fdopen(data_fd, "rb")
        self.note = os.fdopen(note_fd, "rb")
        self.status: int | None = None
        try:
            self.reader = pa.ipc.open_stream(self.data)
        except (pa.ArrowException, OSError):  # the child failed before it had a schema to send
            raise self._failure() from None

    @property
    def schema(self) -> pa.Schema:
        return self.reader.schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            try:
                batch = self.reader.read_next_batch()
            except StopIteration:
                break
            except (pa.ArrowException, OSError):  # the stream was cut: the child died mid-batch
                break
            yield batch
        failure = self._failure()
        if failure is not None:
            raise failure

    def _failure(self) -> Exception | None:
        """The child's own line if it wrote one, else one naming how it ended; None if it ended well."""
        note = self.note.read(NOTE_BYTES).decode("utf-8", "replace").strip()
        status = self._wait()
        if status == 0 and not note:
            return None
        if note and os.WIFEXITED(status) and os.WEXITSTATUS(status) != MEMORY_EXIT:
            return self.failure(note)
        how = (f"was killed by {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else "ran out of memory" if os.WEXITSTATUS(status) == MEMORY_EXIT else f"exited with code {os.WEXITSTATUS(status)}")
        return self.failure(f"the query's process {how}: {self.died}")

    def _wait(self) -> int:
        if self.status is None:
            self.status = os.waitpid(self.pid, 0)[1]
        return self.status

    def close(self) -> None:
        """Stop the child if it still runs (the reader stopped early) and reap it."""
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._wait()
        self.data.close()
        self.note.close()


@contextmanager
def forked_rows(open_stream: Callable[[], AbstractContextManager[Any]], extra_bytes: int,
                failure: Callable[[str], Exception], died: str) -> Iterator[ChildRows]:
    """Run `open_stream()` (a context giving `.schema` and record batches) in a forked child bounded
    to `extra_bytes` more private memory than it had when forked, and yield its rows as they arrive.
    A failure in the child comes back as `failure(its line)`; a child that died without one as
    `failure("the query's process ...: " + died)`."""
    data_r, data_w = os.pipe()
    note_r, note_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(data_r)
            os.close(note_r)
            code = _child(open_stream, extra_bytes, data_w, note_w)
        finally:
            os._exit(code)
    os.close(data_w)
    os.close(note_w)
    rows = None
    try:
        rows = ChildRows(pid, data_r, note_r, failure, died)
        yield rows
    finally:
        if rows is not None:
            rows.close()
        else:  # ChildRows refused before it owned the descriptors' files (it reaped the child)
            for fd in (data_r, note_r):
                try:
                    os.close(fd)
                except OSError:
                    pass


def _child(open_stream: Callable[[], AbstractContextManager[Any]], extra_bytes: int, data_fd: int, note_fd: int) -> int:
    """The child's whole life: bound itself, stream the rows, note a failure; its exit code."""
    note = ""
    code = 0
    try:
        bound_data(extra_bytes)
        with open_stream() as stream, os.fdopen(data_fd, "wb") as sink, pa.ipc.new_stream(sink, stream.schema) as writer:
            for batch in stream:
                for piece in pieces(batch):
                    writer.write_batch(piece)
                sink.flush()  # each batch reaches the parent now, not when the pipe's buffer fills
    except BrokenPipeError:  # the parent stopped reading: nothing to say
        code = 0
    except MemoryError:
        note, code = "MemoryError", MEMORY_EXIT
    except BaseException as e:  # noqa: BLE001 - every failure becomes the parent's one line
        note, code = (str(e).strip().splitlines() or [type(e).__name__])[0], 2
    try:
        os.write(note_fd, note.encode("utf-8", "replace")[:NOTE_BYTES])
    except OSError:
        pass
    return code
