"""Imports bounded (issue 42): the memory budget counts every file a format reads (LLMRouter's query
files), a cache naming absurdly many models is refused before its rows are built, files that are not
regular files (/dev/zero, a FIFO named *.json) are refused before they are opened, and JSON nested
100k deep or holding a 5,000-digit integer is one line naming the file and the depth or digits, exit 2,
in every reader: routerarena, llmrouterbench, zeroeval (file and reply), LLMRouter's query files, a
dataset's JSON lines (through stages/prepare.py) and a price table."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN, REPO, env_with_venv, run
from tests.memory_probe import peak_rss_mib

DEEP = 100_000
DEEP_JSON = "[" * DEEP + "]" * DEEP
LONG_INT = "7" * 5000


def dlab_import(tmp_path: Path, path: Path | str, fmt: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`dlab import` in a child process (a hang fails the test instead of stalling it)."""
    items = tmp_path / "no_items"
    items.mkdir(exist_ok=True)
    return subprocess.run([str(BIN / "dlab"), "import", str(path), "--format", fmt, "--items-dir", str(items), *args],
                          cwd=tmp_path, env=env_with_venv(), capture_output=True, text=True, timeout=timeout)


def assert_one_line(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    message = proc.stderr.strip()
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], message[-2000:])
    assert "Traceback" not in message and len(message.splitlines()) == 1, message[-2000:]
    for needle in needles:
        assert needle in message, message
    return message


def write_llmrouter(root: Path, scores: dict[str, float], queries: list[dict] | None = None) -> Path:
    data = root / "data"
    (data / "dcrouter_preprocessed").mkdir(parents=True)
    (data / "example_data" / "query_data").mkdir(parents=True)
    score_file = data / "dcrouter_preprocessed" / "train.json"
    score_file.write_text(json.dumps([{"question": "q", "scores": scores}]), encoding="utf-8")
    lines = [json.dumps(q) for q in (queries or [{"query": "q", "task_name": "t"}])]
    (data / "example_data" / "query_data" / "default_query_train.jsonl").write_text("\n".join(lines) + "\n")
    return score_file


# ------------------------------------------------------------------------------------- budget


def test_llmrouter_query_files_count_in_the_memory_budget(tmp_path):
    """A 1 KB score file whose query file is 3 MB: 60 MB estimated, over a 0.05 GB budget (the score
    file alone was estimated at 20 KB and the import went on)."""
    filler = "x" * 3000
    score_file = write_llmrouter(tmp_path, {"m": 1.0}, [{"query": f"q{i}", "task_name": "t", "pad": filler} for i in range(1000)])
    proc = dlab_import(tmp_path, score_file, "llmrouter", "--max-memory-gb", "0.05")
    assert_one_line(proc, 1, "2 file(s)", "over the budget of 0.05 GB")


def test_a_cache_naming_a_million_models_is_refused_before_its_rows_are_built(tmp_path):
    """One 16 MB LLMRouter record naming 1e6 models was estimated at 0.32 GB and reached 5.5 GB (and
    100 k models: 1 GB and 126 s of per-model work); now refused once the record is read."""
    score_file = write_llmrouter(tmp_path, {f"m{i}": 0.5 for i in range(200_000)})
    items = tmp_path / "no_items"
    items.mkdir()
    env = {**env_with_venv(), "PYTHONPATH": os.pathsep.join(sys.path)}
    mib, rc, err = peak_rss_mib([sys.executable, "-m", "delegation_lab.cli", "import", str(score_file), "--format",
                                 "llmrouter", "--items-dir", str(items)], env, timeout=60)
    assert rc == 1 and "record 0: the scores name more than 1000 models" in err, err[-2000:]
    assert mib < 1024, mib


def test_a_cache_of_more_models_than_the_limit_is_refused_by_any_format(tmp_path):
    from delegation_lab.solvers.replay.cache import read_cache
    from delegation_lab.solvers.replay.records import MAX_MODELS, ReplayError

    cache = tmp_path / "wide.csv"
    cache.write_text("question,model,correct\n" + "".join(f"q,m{i},1\n" for i in range(MAX_MODELS + 1)))
    with pytest.raises(ReplayError, match=rf"wide\.csv: the long_table cache names {MAX_MODELS + 1} models"):
        read_cache(cache, "long_table")
    cache.write_text("question,model,correct\n" + "".join(f"q,m{i},1\n" for i in range(MAX_MODELS)))
    assert read_cache(cache, "long_table").height == MAX_MODELS


# ---------------------------------------------------------------------------- not regular files


def test_dev_zero_is_refused_before_it_is_read(tmp_path):
    proc = dlab_import(tmp_path, "/dev/zero", "routellm_csv", timeout=30)
    assert_one_line(proc, 2, "/dev/zero: a device, not a regular file")


@pytest.mark.parametrize("fmt", ["zeroeval", "llmrouterbench_json", "routerarena_jsonl"])
def test_a_fifo_named_like_a_cache_file_does_not_hang(tmp_path, fmt):
    fifo = tmp_path / ("m.jsonl" if fmt.endswith("jsonl") else "m.json")
    os.mkfifo(fifo)
    proc = dlab_import(tmp_path, fifo, fmt, timeout=30)
    assert_one_line(proc, 2, f"{fifo}: a FIFO (named pipe), not a regular file")


def test_a_dataset_fifo_does_not_hang(tmp_path):
    fifo = tmp_path / "items.jsonl"
    os.mkfifo(fifo)
    code = ("from pathlib import Path; from delegation_lab.data.sources import read_jsonl\n"
            f"read_jsonl(Path({str(fifo)!r}))")
    proc = subprocess.run([sys.executable, "-c", code], env=env_with_venv(), capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "a FIFO (named pipe), not a regular file" in proc.stderr, proc.stderr[-2000:]


# ------------------------------------------------------------------------------- deep JSON


def _cache_with(fmt: str, tmp_path: Path, value: str) -> Path:
    """A cache file of `fmt` holding the raw JSON text `value` where a record's value goes."""
    if fmt == "routerarena_jsonl":
        path = tmp_path / "m.jsonl"
        path.write_text('{"global index": 0, "question": "q", "evaluation_result": ' + value + "}\n")
    elif fmt == "llmrouterbench_json":
        path = tmp_path / "m.json"
        path.write_text('[{"origin_query": "q", "prediction": "1", "score": ' + value + "}]")
    elif fmt == "zeroeval":
        path = tmp_path / "m.json"
        path.write_text('[{"id": 0, "question": "q", "answer": "# 1", "output": ' + value + "}]")
    else:  # llmrouter: the query file
        path = write_llmrouter(tmp_path, {"m": 1.0})
        queries = path.parent.parent / "example_data" / "query_data" / "default_query_train.jsonl"
        queries.write_text('{"query": "q", "task_name": "t", "metric": ' + value + "}\n")
    return path


@pytest.mark.parametrize("fmt", ["routerarena_jsonl", "llmrouterbench_json", "zeroeval", "llmrouter"])
def test_json_nested_100k_deep_is_one_line_naming_file_and_depth(tmp_path, fmt):
    path = _cache_with(fmt, tmp_path, DEEP_JSON)
    depth = DEEP + (2 if fmt in ("llmrouterbench_json", "zeroeval") else 1)  # the record (and its list) around it
    proc = dlab_import(tmp_path, path, fmt)
    assert_one_line(proc, 2, f"JSON nested {depth} levels deep", ".json")


@pytest.mark.parametrize("fmt", ["routerarena_jsonl", "llmrouterbench_json", "zeroeval", "llmrouter"])
def test_a_5000_digit_integer_is_one_line_naming_file_and_line(tmp_path, fmt):
    path = _cache_with(fmt, tmp_path, LONG_INT)
    proc = dlab_import(tmp_path, path, fmt)
    assert_one_line(proc, 2, "line 1", "an integer of 5000 digits")


def test_a_zeroeval_reply_nested_100k_deep_names_file_record_and_depth(tmp_path):
    path = tmp_path / "m.json"
    reply = '{"a": ' * DEEP + "1" + "}" * DEEP
    path.write_text(json.dumps([{"id": "gsm8k-main-test-#0", "question": "q", "answer": "# 1", "output": [reply]}]))
    proc = dlab_import(tmp_path, path, "zeroeval")
    assert_one_line(proc, 2, f"{path}: record 0 (gsm8k-main-test-#0): the reply: JSON nested {DEEP} levels deep")


def test_the_depth_scan_skips_brackets_inside_strings():
    from delegation_lab.json_input import json_depth

    assert json_depth('{"a": "[[[[", "b": [[1], {"c": "}}}"}]}') == 3
    assert json_depth('x {"a": {"b": 1}} {"c": [[[1]]]}', 2) == 2  # from `start`: that value only


def test_a_deep_dataset_jsonl_fails_prepare_with_one_line_exit_2(tmp_path):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw = copy.deepcopy(raw)
    data = tmp_path / "items.jsonl"
    data.write_text('{"question": "1+1", "answer": "2"}\n{"question": ' + DEEP_JSON + "}\n")
    raw["data"]["dataset"] = "jsonl"
    raw["data"]["table"] = {"path": str(data)}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    proc = run([str(BIN / "python"), str(REPO / "stages" / "prepare.py")], tmp_path, check=False)
    assert_one_line(proc, 2, f"prepare: error: {data}: line 2: JSON nested {DEEP + 1} levels deep")
    assert not (tmp_path / "data").exists()


def test_a_deep_price_table_is_refused_naming_the_file_and_depth(tmp_path):
    from pydantic import ValidationError

    from delegation_lab.solvers.params import Price

    table = tmp_path / "prices.json"
    table.write_text('{"m": ' + DEEP_JSON + "}")
    with pytest.raises(ValidationError) as caught:
        Price.model_validate({"table": str(table), "model": "m"})
    (err,) = caught.value.errors()
    assert err["loc"] == ("table",) and err["msg"].startswith(f"price table {table}: JSON nested {DEEP + 1} levels deep")
    table.write_text('{"m": {"input_token_price_per_million": ' + LONG_INT + "}}")
    with pytest.raises(ValidationError, match=r"line 1: an integer of 5000 digits"):
        Price.model_validate({"table": str(table), "model": "m"})
