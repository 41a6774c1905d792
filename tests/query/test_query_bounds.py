"""`dlab query` bounded in memory and time on single values and absurd options (issue 42): a huge
value is refused where DuckDB makes it (one line, exit 2) instead of being copied to Arrow, Python
and the output; the table format holds at most TABLE_MAX_ROWS rows; --timeout stops a cross join
in the table format too; --timeout, --memory-limit and duplicate column names are one-line errors."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from delegation_lab.pipeline.layout import Layout
from delegation_lab.query.sealed import MAX_CELL_BYTES, QueryRefused, query_rows

from tests.conftest import BIN, env_with_venv
from tests.query.test_memory_limits import dlab_peak, project  # noqa: F401 - the fixture: a project with one answers file


def dlab_query(project: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dlab"), "query", "--root", str(project), *args], capture_output=True, text=True,
                          env=env_with_venv(), timeout=timeout)


def one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.processes
@pytest.mark.parametrize("fmt", ["csv", "table"])
def test_a_single_huge_value_is_refused_before_it_is_copied(project: Path, tmp_path: Path, fmt: str):  # noqa: F811
    """A 200 MB value took ~2 GB (DuckDB's copy, Arrow's, Python's, the csv row's); refused where it
    is made, the command stays near DuckDB's own copies."""
    code, err, peak = dlab_peak(project, tmp_path / "out", "SELECT repeat('x', 200000000) AS s", "--format", fmt,
                                "--max-rows", "0")
    print(f"peak {peak} MiB")
    assert code == 2 and err.strip().splitlines() == [err.strip()] and "column 's'" in err and "MiB" in err, err
    assert peak < 1000, f"peak {peak} MiB"


def test_values_up_to_the_cap_pass_and_nested_big_values_are_refused_per_batch(project: Path):  # noqa: F811
    layout = Layout(project)
    assert query_rows(layout, "SELECT repeat('x', 1000) AS s, 1 AS i ORDER BY i").frame["s"][0] == "x" * 1000
    with pytest.raises(QueryRefused, match="over 16 MiB"):
        query_rows(layout, f"SELECT repeat('y', {MAX_CELL_BYTES + 1}) AS t")
    with pytest.raises(QueryRefused, match="over 16 MiB"):  # a blob, checked by octet_length
        query_rows(layout, f"SELECT repeat('y', {MAX_CELL_BYTES + 1})::BLOB AS b")


@pytest.mark.processes
def test_table_format_is_bounded_and_honours_the_timeout(project: Path):  # noqa: F811
    one_line_error(dlab_query(project, "SELECT 1", "--limit", "1000000000"), "--limit 1000000000", "--format csv")
    start = time.monotonic()
    done = dlab_query(project, "SELECT count(*) FROM range(100000000) a, range(100000000) b", "--timeout", "3")
    one_line_error(done, "--timeout")
    assert time.monotonic() - start < 30


@pytest.mark.processes
@pytest.mark.parametrize("args, words", [
    (["--memory-limit=-5GB"], ["--memory-limit", "-5GB"]),
    (["--memory-limit=-1"], ["--memory-limit", "-1"]),
    (["--memory-limit", "lots"], ["--memory-limit", "lots"]),
    (["--timeout", "1e12"], ["--timeout"]),
    (["--timeout", "nan"], ["--timeout"]),
    (["--timeout=-3"], ["--timeout"]),
])
def test_absurd_limits_are_one_line_errors(project: Path, args: list[str], words: list[str]):  # noqa: F811
    done = dlab_query(project, "SELECT 1", *args)
    one_line_error(done, *words)
    assert done.stdout == "", "refused before the query ran: no row printed"


@pytest.mark.processes
def test_duplicate_column_names_are_one_line_errors(project: Path):  # noqa: F811
    one_line_error(dlab_query(project, "SELECT 1 AS x, 2 AS x", "--format", "csv"), "'x'", "AS")
    ok = dlab_query(project, "SELECT 1 AS x, 2 AS y;", "--format", "csv")
    assert ok.returncode == 0 and ok.stdout == "x,y\n1,2\n", ok.stderr
