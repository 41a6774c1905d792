"""`dlab query`'s statement runs in a forked child whose private memory is capped (issue 42): a single
huge value (`repeat('x', 1500000000)`, outside DuckDB's memory_limit) took 3.2 GB before the cell
cap could see it; a batch of values each under the cap could take 16 GB. Now both stay under 2 GB
and end in one line, exit 2, with `--out` left as it was. The probes run under a hard RLIMIT_DATA
safety net (`memory_probe`), high enough that without the child's cap they pass 2 GB, never the
machine's memory. A child that dies (abort, kill) is one line naming the bound; a reader that stops
early stops the child."""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest

from delegation_lab.pipeline.layout import Layout
from delegation_lab.query.process import forked_rows, pieces
from delegation_lab.query.sealed import QueryRefused, query_rows

from tests.conftest import BIN, env_with_venv
from tests.memory_probe import peak_rss_mib
from tests.query.test_memory_limits import project  # noqa: F401 - the fixture: a project with one answers file

GIB = 1024**3
SAFETY_NET = 6 * GIB  # the dlab process's whole private memory, reserved address space included (~1.3 GiB at start)


@pytest.mark.processes
@pytest.mark.parametrize("sql", [
    "SELECT repeat('x', 1500000000) AS s",  # the probe: one value of 1.5 GB
    "SELECT repeat('x', 16000000) AS s FROM range(1000)",  # each value under the 16 MiB cell cap, 16 GB a batch
])
def test_a_huge_value_or_batch_stays_under_2gb_and_is_one_line(project: Path, tmp_path: Path, sql: str):  # noqa: F811
    out = tmp_path / "out.csv"
    out.write_text("previous\n")
    peak, code, err = peak_rss_mib([str(BIN / "dlab"), "query", "--root", str(project), sql, "--format", "csv",
                                    "--max-rows", "0", "--out", str(out)], env=env_with_venv(), timeout=120,
                                   data_limit=SAFETY_NET)
    print(f"peak {peak:.0f} MiB: {err.strip()}")
    assert peak < 2000, f"peak {peak:.0f} MiB"
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert "--memory-limit" in lines[0], lines[0]
    assert out.read_text() == "previous\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "project"]


@pytest.mark.processes
def test_out_is_written_whole_on_success(project: Path, tmp_path: Path):  # noqa: F811
    import subprocess

    out = tmp_path / "rows.json"
    done = subprocess.run([str(BIN / "dlab"), "query", "--root", str(project), "SELECT range AS i FROM range(3)",
                           "--format", "json", "--out", str(out)], capture_output=True, text=True, env=env_with_venv(),
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"wrote 3 rows to {out}", done.stderr
    assert out.read_text() == '[{"i": 0}, {"i": 1}, {"i": 2}]\n'


def _batches(n: int, width: int = 10) -> pa.RecordBatch:
    return pa.record_batch({"s": pa.array(["x" * width] * n)})


@contextmanager
def _fake_stream(action):
    """A stream with one column whose iteration runs `action` (in the child) after one batch."""

    class Stream:
        schema = pa.schema([("s", pa.string())])

        def __iter__(self):
            yield _batches(2)
            action()

    yield Stream()


def _read_all(action, extra: int = GIB) -> list[str]:
    with forked_rows(lambda: _fake_stream(action), extra, QueryRefused, "it passed its bound of TEST") as rows:
        return [v for batch in rows for v in batch.column(0).to_pylist()]


def test_a_child_that_dies_is_one_line_naming_the_bound():
    with pytest.raises(QueryRefused, match=r"^the query's process was killed by SIGKILL: it passed its bound of TEST$"):
        _read_all(lambda: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(QueryRefused, match=r"^the query's process was killed by SIGABRT: it passed"):
        _read_all(os.abort)


def test_the_childs_own_failure_comes_back_as_its_line():
    def refuse():
        raise QueryRefused("a value in column 's' is over 16 MiB")

    with pytest.raises(QueryRefused, match=r"^a value in column 's' is over 16 MiB$"):
        _read_all(refuse)
    assert _read_all(lambda: None) == ["x" * 10] * 2


def test_the_cap_holds_in_the_child():
    """64 MiB more allowed, 512 MiB asked for: a MemoryError in the child, not 512 MiB taken."""
    with pytest.raises(QueryRefused, match=r"^the query's process ran out of memory: it passed its bound of TEST$"):
        _read_all(lambda: bytearray(512 * 1024**2), extra=64 * 1024**2)


def test_big_batches_travel_in_pieces():
    batch = _batches(1000, width=1000)  # ~1 MB
    cut = list(pieces(batch, max_bytes=100_000))
    assert len(cut) > 5 and all(p.nbytes <= 120_000 for p in cut)
    assert pa.Table.from_batches(cut).equals(pa.Table.from_batches([batch]))
    assert list(pieces(_batches(3))) == [_batches(3)]


def test_rows_kept_in_memory_are_bounded_and_an_early_stop_ends_the_child(project: Path):  # noqa: F811
    layout = Layout(project)
    with pytest.raises(QueryRefused, match="rows kept in memory passed the memory limit 64MiB"):
        query_rows(layout, "SELECT repeat('x', 1000000) AS s FROM range(200)", max_rows=None, memory_limit="64MiB")
    start = time.monotonic()
    result = query_rows(layout, "SELECT range AS i FROM range(1000000000000)", max_rows=5, timeout_s=0)
    assert result.truncated and result.frame["i"].to_list() == [0, 1, 2, 3, 4]
    assert time.monotonic() - start < 10


def test_a_reader_that_stops_early_kills_and_reaps_the_child():
    with forked_rows(lambda: _fake_stream(lambda: time.sleep(600)), GIB, QueryRefused, "TEST") as rows:
        pid = rows.pid
        assert next(iter(rows)).num_rows == 2
    with pytest.raises(ChildProcessError):  # reaped: neither running nor a zombie
        os.waitpid(pid, os.WNOHANG)
