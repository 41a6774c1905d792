"""`dlab import` on hostile or broken caches (issue 32): impossible numbers, duplicated columns,
non-UTF-8 bytes, a `**` glob over a symlink loop, and a cache too large for the memory budget (with
the refusing process's peak memory measured). Each is one line naming file, row and column, a
non-zero exit, and no --json report half-written."""

from __future__ import annotations

import glob
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.solvers.replay.budget import BUDGET_ENV, text_bytes
from delegation_lab.solvers.replay.cache import glob_files, read_cache

from tests.memory_probe import peak_rss_mib

HEADER = "question,model,correct,tokens_in,tokens_out,cost_usd\n"


def run_import(tmp_path: Path, path: Path | str, *args: str, env: dict[str, str] | None = None):
    items = tmp_path / "no_items"
    items.mkdir(exist_ok=True)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["import", str(path), "--format", "long_table", "--items-dir", str(items),
                                      "--json", str(out), *args], env=env)
    return result, out


def assert_refused(result, out: Path, *needles: str) -> None:
    message = result.output.strip()
    assert result.exit_code != 0 and "Traceback" not in message, message
    assert len(message.splitlines()) == 1 and message.startswith("error: "), message
    for needle in needles:
        assert needle in message, message
    assert not out.exists()  # nothing half-written


@pytest.mark.parametrize(("row", "column"), [
    ("q,m,True,10,20,inf", "cost_usd"),
    ("q,m,True,10,20,-5", "cost_usd"),
    ("q,m,True,10,20,1e308", "cost_usd"),
    ("q,m,True,10,20,-inf", "cost_usd"),
    ("q,m,True,-10,20,0.1", "tokens_in"),
    ("q,m,True,10,1e12,0.1", "tokens_out"),
    ("q,m,True,ten,20,0.1", "tokens_in"),
    ("q,m,2,10,20,0.1", "correct"),
    ("q,m,1e9,10,20,0.1", "correct"),
    ("q,m,-1,10,20,0.1", "correct"),
    ("q,m,inf,10,20,0.1", "correct"),
], ids=["cost_inf", "cost_negative", "cost_1e308", "cost_minus_inf", "tokens_negative", "tokens_huge",
        "tokens_text", "correct_2", "correct_1e9", "correct_minus_1", "correct_inf"])
def test_impossible_numbers_are_refused_naming_file_row_and_column(tmp_path, row, column):
    cache = tmp_path / "cache.csv"
    cache.write_text(HEADER + "p,m,True,1,2,0.5\n" + row + "\n", encoding="utf-8")
    result, out = run_import(tmp_path, cache)
    assert_refused(result, out, str(cache), "row 3", f"column {column!r}")


def test_valid_labels_and_empty_numbers_are_accepted(tmp_path):
    cache = tmp_path / "cache.csv"
    cache.write_text(HEADER + "a,m,True,1,2,0.5\nb,m,false,,,\nc,m,1,0,0,0\nd,m,0.0,3.0,4,1e-9\n"
                     "e,m,0.75,5,6,0.1\nf,m,,7,8,0.2\n", encoding="utf-8")
    frame = read_cache(cache, "long_table").sort("prompt")
    assert frame["correct"].to_list() == [True, False, True, False, True, None]
    assert frame["tokens_in"].to_list() == [1, None, 0, 3, 5, 7]
    assert frame["cost_usd"].to_list() == [0.5, None, 0.0, 1e-9, 0.1, 0.2]


def test_json_lines_numbers_are_refused_naming_the_row(tmp_path):
    cache = tmp_path / "cache.jsonl"
    rows = [{"question": "a", "model": "m", "correct": True, "tokens_in": 3},
            {"question": "b", "model": "m", "correct": True, "tokens_in": -10}]
    cache.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result, out = run_import(tmp_path, cache)
    assert_refused(result, out, str(cache), "row 2", "column 'tokens_in'", "-10")


def test_a_duplicated_column_is_refused(tmp_path):
    cache = tmp_path / "cache.csv"
    cache.write_text("question,model,correct,correct\nq,m,True,False\n", encoding="utf-8")
    result, out = run_import(tmp_path, cache)
    assert_refused(result, out, str(cache), "column 'correct' appears more than once")


@pytest.mark.parametrize(("name", "fmt", "body", "line"), [
    ("cache.csv", "long_table", HEADER.encode() + b"a,m,True,1,2,0.5\nb\xff,m,True,1,2,0.5\n", 3),
    ("cache.jsonl", "long_table", b'{"question": "a", "model": "m", "correct": true}\n'
                                  b'{"question": "b\xe9", "model": "m", "correct": true}\n', 2),
    ("Model-A.json", "zeroeval", b'[\n {"id": 1,\n  "output": ["caf\xe9"]}\n]\n', 3),
], ids=["csv", "jsonl", "json"])
def test_non_utf8_bytes_are_refused_with_their_line(tmp_path, name, fmt, body, line):
    cache = tmp_path / name
    cache.write_bytes(body)
    items = tmp_path / "no_items"
    items.mkdir()
    result = CliRunner().invoke(app, ["import", str(cache), "--format", fmt, "--items-dir", str(items)])
    assert_refused(result, tmp_path / "none.json", str(cache), f"line {line}: not UTF-8")


def test_a_utf8_character_across_the_read_block_is_not_an_error(tmp_path):
    cache = tmp_path / "cache.csv"
    pad = "x" * ((1 << 20) - len(HEADER) - 1)  # puts the 2-byte "é" across the 1 MiB block boundary
    cache.write_text(HEADER + f"{pad}é,m,True,1,2,0.5\n", encoding="utf-8")
    assert read_cache(cache, "long_table")["prompt"][0].endswith("é")


def _tree(root: Path) -> None:
    for rel in ("a/x.csv", "a/b/y.csv", "a/b/c/z.csv", "a/.hidden/h.csv", "a/.dot.csv", "top.csv", "a/b/note.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(HEADER + f"{rel},m,True,1,2,0.5\n", encoding="utf-8")


@pytest.mark.parametrize("pattern", ["**/*.csv", "a/**/*.csv", "a/**", "*/b/**/*.csv", "**/b/*.csv", "a/**/.*.csv"])
def test_double_star_globs_find_what_glob_finds(tmp_path, monkeypatch, pattern):
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    for spelled in (pattern, str(tmp_path / pattern)):
        expected = sorted(p for p in glob.glob(spelled, recursive=True) if Path(p).is_file())
        assert sorted(map(str, glob_files(spelled))) == expected


def test_a_double_star_glob_over_a_symlink_loop_ends(tmp_path):
    _tree(tmp_path)
    (tmp_path / "a" / "b" / "loop").symlink_to(tmp_path / "a")  # a folder linking to its ancestor
    (tmp_path / "a" / "self").symlink_to(".")
    (tmp_path / "no_items").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "delegation_lab.cli", "import", str(tmp_path / "a" / "**" / "*.csv"),
         "--format", "long_table", "--items-dir", str(tmp_path / "no_items")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert "3 file(s), 3 rows" in done.stdout, done.stdout  # x, y, z: hidden ones skipped as glob does


def _big_table(path: Path, megabytes: int) -> Path:
    row = "What is {i} plus seven asked at some length to make the row longer?,model-{m},True,120,240,0.0012\n"
    with path.open("w", encoding="utf-8") as f:
        f.write(HEADER)
        i = 0
        while f.tell() < megabytes << 20:
            f.write("".join(row.format(i=i + k, m=k % 3) for k in range(1000)))
            i += 1000
    return path


def test_a_cache_over_the_budget_is_refused_with_an_estimate(tmp_path):
    cache = _big_table(tmp_path / "big.csv", 2)
    result, out = run_import(tmp_path, cache, "--max-memory-gb", "0.01")
    assert_refused(result, out, str(cache), "would take about 0.04 GB", "over the budget of 0.01 GB",
                   "--max-memory-gb", BUDGET_ENV)
    result, out = run_import(tmp_path, cache, env={BUDGET_ENV: "0.01"})
    assert_refused(result, out, "over the budget of 0.01 GB")
    result, out = run_import(tmp_path, cache, env={BUDGET_ENV: "lots"})
    assert_refused(result, out, f"{BUDGET_ENV}='lots': expected a positive number of GB")
    result, out = run_import(tmp_path, cache, "--max-memory-gb", "1", env={BUDGET_ENV: "0.01"})
    assert result.exit_code == 0 and json.loads(out.read_text())["rows"] > 20_000, result.output


def test_a_gzip_file_is_estimated_at_its_uncompressed_size(tmp_path):
    packed = tmp_path / "m.json.gz"
    packed.write_bytes(gzip.compress(b"[" + b" " * 5_000_000 + b"]"))
    assert packed.stat().st_size < 100_000 and text_bytes(packed) == 5_000_002


def test_peak_memory_of_a_refused_import_stays_near_a_small_one(tmp_path):
    """A 24 MB table (well over 100 MB once read): refused under a 0.05 GB budget, the process peaks
    no higher than one importing a one-row table, give or take noise."""
    small = tmp_path / "small.csv"
    small.write_text(HEADER + "q,m,True,1,2,0.5\n", encoding="utf-8")
    big = _big_table(tmp_path / "big.csv", 24)
    (tmp_path / "no_items").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), BUDGET_ENV: "0.05"}

    def dlab_import(path: Path) -> list[str]:
        return [sys.executable, "-m", "delegation_lab.cli", "import", str(path), "--format", "long_table",
                "--items-dir", str(tmp_path / "no_items")]

    base_mib, rc, err = peak_rss_mib(dlab_import(small), env)
    assert rc == 0, err
    big_mib, rc, err = peak_rss_mib(dlab_import(big), env)
    assert rc == 1 and "over the budget of 0.05 GB" in err, err
    assert big_mib < base_mib + 16, (base_mib, big_mib)


def test_a_dataset_file_with_a_non_utf8_byte_names_file_and_line(tmp_path):
    """The data stage's JSON-lines reader (GSM8K, AQuA-RAT folders): one clear error, not a
    UnicodeDecodeError traceback."""
    from delegation_lab.data.sources import DataError, read_jsonl

    path = tmp_path / "test.jsonl"
    path.write_bytes(b'{"question": "1+1", "answer": "#### 2"}\n{"question": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"test\.jsonl: line 2: not UTF-8 text"):
        read_jsonl(path)
