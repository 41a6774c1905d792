"""`dlab query` on hostile input (issue 32): memory bounded while rows stream, a private spill folder,
and one clean error line (exit 2, no traceback) for non-UTF-8 SQL, a timeout mid-stream and a query
past its memory limit. Peak memory is the command's own (`memory_probe.peak_rss_mib`)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import polars as pl
import pytest

from delegation_lab.pipeline.layout import Layout
from delegation_lab.query.output import write_rows
from delegation_lab.query.sealed import default_memory_limit, machine_memory, stream_query
from delegation_lab.pipeline.tables import write_parquet_atomic

from tests.conftest import BIN, env_with_venv
from tests.memory_probe import peak_rss_mib

MIB = 1024**2


def run_with_peak(cmd: list[str | bytes], out: Path) -> tuple[int, str, int]:
    """(exit code, stderr, peak MiB) of `cmd > out` (through `sh -c exec`, so the command itself is
    the process measured)."""
    peak, code, err = peak_rss_mib(["sh", "-c", 'out="$1"; shift; exec "$@" > "$out"', "sh", str(out), *cmd],
                                   env=env_with_venv(), timeout=300)
    return code, err, int(peak)


def dlab_peak(project: Path, out: Path, *args: str | bytes) -> tuple[int, str, int]:
    """(exit code, stderr, peak MiB) of `dlab query --root project ARGS > out`."""
    return run_with_peak([str(BIN / "dlab"), "query", "--root", str(project), *args], out)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"  # the outputs go beside it, in tmp_path
    write_parquet_atomic(pl.DataFrame({"solver": ["A"], "item_id": ["i1"], "answer_text": ["42"]}),
                         root / "data" / "answers" / "A.parquet")
    return root


def test_a_gigabyte_of_csv_streams_in_bounded_memory(project: Path, tmp_path: Path):
    """1 GB of rows (1M rows of 1 kB): kept in Python, as before, the process passed 1 GB."""
    out = tmp_path / "out.csv"
    code, err, peak = dlab_peak(project, out, "select range as i, repeat('x', 1000) as pad from range(1000000)",
                                "--format", "csv", "--max-rows", "0", "--timeout", "0")
    assert code == 0, err
    assert out.stat().st_size > 1000 * MIB // 1.05
    with out.open() as f:
        assert f.readline() == "i,pad\n" and f.readline().startswith("0,xxx")
    print(f"peak {peak} MiB")
    assert peak < 500, f"peak {peak} MiB"


def test_json_streams_too_and_stays_one_valid_document(project: Path, tmp_path: Path):
    out = tmp_path / "out.json"
    code, err, peak = dlab_peak(project, out, "select range as i, repeat('y', 1000) as pad from range(300000)",
                                "--format", "json", "--max-rows", "0", "--timeout", "0")
    assert code == 0, err
    rows = json.loads(out.read_text())
    assert len(rows) == 300000 and rows[-1]["i"] == 299999
    assert peak < 500, f"peak {peak} MiB"


def test_a_sort_larger_than_the_memory_limit_spills_to_a_private_folder(project: Path, tmp_path: Path):
    """ORDER BY over ~500 MB with 100 MiB for DuckDB: it spills under the system temp folder (not
    the project's), finishes, and leaves no spill file behind."""
    before = set(Path(tempfile.gettempdir()).glob("dlab-query-*"))
    files_before = sorted(p for p in project.rglob("*"))
    out = tmp_path / "sorted.csv"
    code, err, peak = dlab_peak(project, out, "select range as i, md5(range::varchar) || repeat('z', 200) as pad "
                                "from range(2000000) order by pad desc", "--format", "csv", "--max-rows", "0",
                                "--timeout", "0", "--memory-limit", "100MiB")
    assert code == 0, err
    with out.open() as f:
        assert f.readline() == "i,pad\n"
        pads = [f.readline().split(",")[1] for _ in range(3)]
    assert pads == sorted(pads, reverse=True) and pads[0].startswith("fffff")  # the largest md5 first
    print(f"peak {peak} MiB")
    assert peak < 600, f"peak {peak} MiB"
    assert set(Path(tempfile.gettempdir()).glob("dlab-query-*")) == before
    assert sorted(p for p in project.rglob("*")) == files_before


def test_past_the_memory_limit_is_one_clean_line(project: Path, tmp_path: Path):
    code, err, _ = dlab_peak(project, tmp_path / "o", "select list(range) as l from range(100000000)",
                             "--format", "csv", "--memory-limit", "64MiB")
    assert code == 2 and "Traceback" not in err
    assert err.startswith("error: query needs more than its memory limit 64MiB") and len(err.strip().splitlines()) == 1


def test_a_timeout_while_rows_stream_is_one_clean_line(project: Path, tmp_path: Path):
    """The timer fires after rows started to arrive: it was `OSError: INTERRUPT` with a traceback."""
    out = tmp_path / "o.csv"
    code, err, _ = dlab_peak(project, out, "select range as i from range(1000000000000)", "--format", "csv",
                             "--max-rows", "0", "--timeout", "1")
    assert code == 2 and "Traceback" not in err, err
    assert err.strip() == "error: query stopped after 1 s (--timeout); narrow it or raise the limit"
    assert out.read_text().startswith("i\n0\n1\n")  # rows were streaming when it stopped


def test_sql_that_is_not_utf8_is_one_clean_line(project: Path, tmp_path: Path):
    code, err, _ = dlab_peak(project, tmp_path / "o", b"select '\xff\xfe' as x", "--format", "csv")
    assert code == 2 and "Traceback" not in err
    assert "not valid UTF-8" in err and len(err.strip().splitlines()) == 1


def test_a_bad_memory_limit_is_refused(project: Path, tmp_path: Path):
    code, err, _ = dlab_peak(project, tmp_path / "o", "select 1", "--memory-limit", "lots")
    assert code == 2 and "Traceback" not in err and err.startswith("error: --memory-limit 'lots':")


def test_default_memory_limit_is_a_share_of_the_machine():
    limit = int(default_memory_limit().removesuffix("MiB"))
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < machine_memory() <= physical
    assert limit == min(1024, machine_memory() // 4 // MIB)


def test_streamed_output_matches_and_max_rows_cuts_exactly(project: Path, tmp_path: Path):
    """The writers see each batch once (1024 rows by default): a cut inside a batch keeps exactly
    max_rows rows and reports the truncation."""
    out = tmp_path / "o.csv"
    with stream_query(Layout(project), "select range as i from range(5000)", batch_rows=1000) as stream, out.open("w") as f:
        written = write_rows("csv", stream.schema, stream, f, max_rows=2500)
    assert (written.rows, written.truncated) == (2500, True)
    assert out.read_text().splitlines() == ["i", *map(str, range(2500))]
    with stream_query(Layout(project), "select range as i from range(3)") as stream, out.open("w") as f:
        written = write_rows("json", stream.schema, stream, f, max_rows=3)
    assert (written.rows, written.truncated) == (3, False) and json.loads(out.read_text()) == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_a_reader_that_stops_early_is_no_error(project: Path):
    """`dlab query ... --format csv | head -2`: the closed pipe ends the query quietly."""
    import subprocess

    proc = subprocess.Popen([str(BIN / "dlab"), "query", "--root", str(project), "select range as i from range(100000000)",
                             "--format", "csv", "--max-rows", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_with_venv())
    assert proc.stdout.readline() == b"i\n"
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    err = proc.stderr.read()
    assert b"Traceback" not in err and b"Broken pipe" not in err, err
