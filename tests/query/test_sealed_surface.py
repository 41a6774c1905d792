"""`dlab query` as a hostile user would use it: every attack is refused and no file changes."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.pipeline.layout import Layout
from delegation_lab.query.sealed import QueryRefused, check_statement, connect_sealed, query_rows, run_query
from delegation_lab.pipeline.store import TrajectoryWriter, write_summaries
from delegation_lab.pipeline.tables import write_parquet_atomic

from tests.conftest import BIN, run


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    answers = pl.DataFrame({"solver": ["A", "A"], "item_id": ["i1", "i2"], "answer_text": ["42", "7"],
                            "tags": [["x", "y"], []]})
    write_parquet_atomic(answers, tmp_path / "data" / "answers" / "A.parquet")
    write_summaries(Layout(tmp_path), "s", [{"study": "s", "method": "m", "seed": 0, "split": "test",
                                             "operating_point": "default", "accuracy": 0.9, "cost_per_item_usd": 0.001,
                                             "n_items": 10, "dataset": "arith"}])
    return tmp_path


def dlab_query(project: Path, *args: str):
    return CliRunner().invoke(app, ["query", "--root", str(project), *args])


def test_explain_analyze_copy_cannot_forge_the_answer_cache(project: Path):
    target = project / "data" / "answers" / "A.parquet"
    before = digest(target)
    forge = (f"EXPLAIN ANALYZE COPY (SELECT * REPLACE ('forged' AS answer_text) FROM answers WHERE solver='A') "
             f"TO '{target}' (FORMAT parquet)")
    for sql in [forge, forge.replace("EXPLAIN ANALYZE", "EXPLAIN"), forge.replace("EXPLAIN ANALYZE ", ""),
                f"/* hi */ explain analyse (format json) {forge.removeprefix('EXPLAIN ANALYZE ')}",
                f"SELECT * FROM query('COPY (SELECT 1) TO ''{target}''')"]:
        result = dlab_query(project, sql)
        assert result.exit_code == 2, (sql, result.output)
        assert "error:" in result.output
    assert digest(target) == before
    assert dlab_query(project, "select answer_text from answers order by item_id", "--format", "csv").output == "answer_text\n42\n7\n"


def test_the_sealed_connection_itself_cannot_write_or_read_any_file(project: Path):
    """Defence in depth: even a statement that got past the parser check opens no file."""
    target = project / "data" / "answers" / "A.parquet"
    before = digest(target)
    con = connect_sealed(Layout(project))
    try:
        for sql in [f"EXPLAIN ANALYZE COPY (SELECT 'forged' AS answer_text) TO '{target}' (FORMAT parquet)",
                    f"COPY answers TO '{project}/out.csv'", f"ATTACH '{project}/x.db'", f"SELECT * FROM read_parquet('{target}')",
                    "SET enable_external_access = true", "INSTALL httpfs", "LOAD httpfs"]:
            with pytest.raises(duckdb.Error):
                con.sql(sql).fetchall()
        assert con.sql("select count(*) from answers").fetchall() == [(2,)]
    finally:
        con.close()
    assert digest(target) == before
    assert not (project / "out.csv").exists() and not (project / "x.db").exists()


@pytest.mark.parametrize("sql, message", [
    ("select 1; select 2", "exactly one statement"),
    ("attach 'x.db' as x", "not ATTACH"),
    ("copy answers to 'x.csv'", "not COPY"),
    ("install httpfs", "not"),
    ("load httpfs", "not"),
    ("set enable_external_access = true", "not SET"),
    ("pragma version", "not PRAGMA"),
    ("create table t as select 1", "not CREATE"),
    ("drop view answers", "not DROP"),
    ("explain analyze create table t as select 1", "EXPLAIN ANALYZE of a single SELECT, not of CREATE"),
    ("explain (select 1) union select 2", "cannot parse"),
    ("selec 1", "cannot parse"),
])
def test_anything_but_one_select_is_refused_by_the_parser_check(sql: str, message: str):
    with pytest.raises(QueryRefused, match=message):
        check_statement(sql)


def test_reads_and_their_explain_are_allowed(project: Path):
    for sql in ["select 1", "with a as (select 2) select * from a", "describe answers", "from answers",
                "explain select * from answers", "explain analyze select count(*) from answers"]:
        check_statement(sql)
    plan = query_rows(Layout(project), "explain analyze select count(*) from answers").frame
    assert plan.columns == ["explain_key", "explain_value"] and plan.height == 1


def test_timeout_stops_a_huge_scan(project: Path):
    start = time.monotonic()
    result = dlab_query(project, "SELECT count(*) FROM range(1000000000000)", "--timeout", "1")
    assert result.exit_code == 2 and "stopped after 1 s" in result.output
    assert time.monotonic() - start < 20


def test_row_cap_truncates_with_a_notice(project: Path):
    result = dlab_query(project, "SELECT range AS i FROM range(1000000000)", "--max-rows", "5", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["i", "0", "1", "2", "3", "4"]
    assert "stopped at --max-rows 5 rows" in result.stderr
    assert len(run_query(Layout(project), "select * from range(20000)")) == 20000  # the Python API: no cap


def test_lists_and_structs_render_in_csv_and_json(project: Path):
    sql = "select item_id, tags, {'n': 1, 'l': [1.5]} as s, interval 2 day as i from answers order by item_id"
    csv = dlab_query(project, sql, "--format", "csv")
    assert csv.exit_code == 0, csv.output
    header, first, second = csv.output.splitlines()
    assert header == "item_id,tags,s,i"
    assert first.startswith('i1,"[""x"", ""y""]","{""n"": 1, ""l"": [1.5]}"')
    assert second.startswith("i2,[],")
    out = dlab_query(project, sql, "--format", "json")
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert rows[0]["tags"] == ["x", "y"] and rows[0]["s"] == {"n": 1, "l": [1.5]} and rows[0]["i"]["days"] == 2  # INTERVAL: an object, like a struct
    table = dlab_query(project, sql)
    assert table.exit_code == 0 and "i1" in table.output


def test_views_read_parquet_files_symlinked_into_the_dvc_cache(project: Path):
    """`dvc config cache.type symlink`: data files are links into .dvc/cache; the views still work."""
    answers = project / "data" / "answers" / "A.parquet"
    cached = project / ".dvc" / "cache" / "files" / "md5" / "ab" / "cdef0123"
    cached.parent.mkdir(parents=True)
    answers.rename(cached)
    answers.symlink_to(cached)
    summaries = project / "results" / "summaries" / "s.parquet"
    cached_summary = project / ".dvc" / "cache" / "files" / "md5" / "ab" / "4567"
    summaries.rename(cached_summary)
    summaries.symlink_to(cached_summary)
    result = dlab_query(project, "select count(*) as n, (select accuracy from summaries) as a from answers", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.output == "n,a\n2,0.9\n"
    # a link that leads out of the project is not followed
    outside = project.parent / f"{project.name}-outside.parquet"
    pl.DataFrame({"solver": ["B"]}).write_parquet(outside)
    (project / "data" / "answers" / "B.parquet").symlink_to(outside)
    refused = dlab_query(project, "select count(*) from answers")
    assert refused.exit_code == 2 and "outside the project's data/, results/ and DVC cache" in refused.output


def test_hive_partitioned_trajectories_and_a_corrupt_file(project: Path):
    with TrajectoryWriter(Layout(project), "study1") as w:
        w.add("m", 3, [{"episode": 0, "step": s, "split": "test", "item_id": "i", "action": "a", "executors": ["A"],
                        "correct": True, "cost_usd": 0.1, "reward": 1.0, "calls": 1, "extra": "{}"} for s in range(4)])
    frame = run_query(Layout(project), "select study, method, seed, count(*) as n from trajectories group by all")
    assert frame.to_dicts() == [{"study": "study1", "method": "m", "seed": 3, "n": 4}]
    assert frame["seed"].dtype == pl.Int64
    (project / "data" / "answers" / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(QueryRefused, match=r"bad\.parquet: not a readable Parquet file"):
        run_query(Layout(project), "select 1")


def test_dlab_query_refusal_exits_non_zero_from_the_shell(project: Path):
    target = project / "data" / "answers" / "A.parquet"
    before = digest(target)
    proc = run([str(BIN / "dlab"), "query", "--root", str(project),
                f"EXPLAIN ANALYZE COPY (SELECT 'forged' AS answer_text) TO '{target}' (FORMAT parquet)"], project, check=False)
    assert proc.returncode == 2 and "EXPLAIN ANALYZE of a single SELECT" in proc.stderr
    assert digest(target) == before
