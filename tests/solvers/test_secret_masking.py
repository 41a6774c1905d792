"""An endpoint that echoes the API key — in a padded 400 body, or inside the completion text —
leaves no 8-character run of it in any file the pipeline writes (answers, journal, metrics, the
DVC cache, mlflow.db) or in anything it prints."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.solvers.base import MASK, mask_secrets, mask_value

from tests.conftest import BIN, make_project, run
from tests.solvers.test_backend_openai_compat import FakeServer, make_solver
from tests.solvers.test_solve_stage import KEY_ENV, stage_in, write_project

KEY = "sk-proj-Q7vR2mXw9LpT4sKd8ZbN1cYh6FgJ3eUa5WoIq0"  # 46 characters, like the issue's
assert len(KEY) == 46


def fragments(secret: str, n: int = 8) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def texts_in(path: Path) -> str:
    """A file's bytes as text, plus every cell when it is Parquet (compressed pages hide strings)."""
    raw = path.read_bytes()
    text = raw.decode("latin-1")
    if raw[:4] == b"PAR1":
        df = pl.read_parquet(path)
        text += "\n".join(str(v) for col in df.columns for v in df[col].to_list())
    return text


def leaks(text: str) -> list[str]:
    return sorted(f for f in fragments(KEY) if f in text)


def leaking_files(root: Path) -> dict[str, list[str]]:
    found = {}
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(root).parts[:1] and path.name != "params.yaml":
            hits = leaks(texts_in(path))
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


# ---------------------------------------------------------------------------------------------
# the masking function


def test_the_whole_key_and_any_8_char_run_of_it_are_masked():
    assert mask_secrets(f"bad key {KEY}!", [KEY]) == f"bad key {MASK}!"
    assert mask_secrets(f"cut: {KEY[:44]}", [KEY]) == f"cut: {MASK}"  # what a truncation used to leave
    assert mask_secrets(f"tail {KEY[-8:]} and {KEY[10:30]}.", [KEY]) == f"tail {MASK} and {MASK}."
    assert mask_secrets(f"{KEY}{KEY}", [KEY]) == MASK
    assert mask_secrets(f"short {KEY[:7]} stays", [KEY]) == f"short {KEY[:7]} stays"
    text = "Counting carefully.\n#### 42"
    assert mask_secrets(text, [KEY]) == text and mask_secrets(None, [KEY]) is None
    assert mask_secrets("pin 12345 and abc", ["12345", "ab"]) == f"pin {MASK} and abc"  # < 4 chars: no secret
    assert mask_value({"reason": KEY, KEY: [1, f"x{KEY}"]}, [KEY]) == {"reason": MASK, MASK: [1, f"x{MASK}"]}


def test_padded_400_and_echoed_completion_are_masked_in_every_field(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    items = generate(ArithParams(), 4, seed=31)
    solver = make_solver(server.url, api_key_env=KEY_ENV, max_retries=0)
    server.mode = "echo_auth_400_padded"
    rejected = solver.solve(items[:2])
    server.mode = "echo_auth_text"
    echoed = solver.solve(items[2:])
    for a in rejected:
        assert a.error.startswith("HTTP 400: ") and "Bearer ***" in a.error, a.error
    for a in echoed:
        assert a.error is None and "Your header was Bearer ***." in a.answer_text and a.parsed_answer
    for a in rejected + echoed:
        assert not leaks(a.model_dump_json())


def test_secret_envs_and_a_password_in_base_url_are_masked_too(server, monkeypatch):
    monkeypatch.setenv("DLAB_TEST_ORG", "org-ZZ81fk2MbWq5Tn")
    server.reply_extra = {"choices": [{"index": 0, "finish_reason": "org-ZZ81fk2MbWq5Tn user:hunter2pass",
                                       "message": {"content": "org-ZZ81fk2MbWq5Tn #### 1"}}]}
    url = server.url.replace("http://", "http://user:hunter2pass@")
    answer = make_solver(url, secret_envs=["DLAB_TEST_ORG"], max_retries=0).solve(generate(ArithParams(), 1, seed=32))[0]
    assert answer.error is None and answer.answer_text == f"{MASK} #### 1"
    assert json.loads(answer.extra)["finish_reason"] == f"{MASK} user:{MASK}"


# ---------------------------------------------------------------------------------------------
# the real stage, every file it writes and everything it prints


def test_solve_stage_keeps_the_key_out_of_every_file_and_output(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, KEY)
    server.mode = "echo_auth_mixed"
    project = write_project(tmp_path / "p", server.url)
    assert stage_in(project, "solve", ["--solver", "A"]) == 0  # some answered, some 400
    printed = capsys.readouterr()
    rows = pl.read_parquet(project / "data" / "answers" / "A.parquet")
    assert rows["error"].null_count() == 4 and rows.height == 9  # both shapes really happened
    assert rows["answer_text"].drop_nulls().str.contains("Bearer \\*\\*\\*", literal=False).all()
    assert not leaks(printed.out + printed.err), printed
    assert "Bearer ***" in printed.out  # the error examples were printed, masked
    assert leaking_files(project) == {}


@pytest.mark.slow
def test_dvc_repro_keeps_the_key_out_of_dvc_cache_and_mlflow(server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    server.mode = "echo_auth_mixed"
    project = make_project(tmp_path / "p")
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["data"].update(ability_size=4, train_size=4, test_size=4)
    raw["portfolio"].update(router_folds=2, cv_folds=2)  # a fold needs an item: params check refuses more folds than train items
    raw["solvers"]["A"] = {
        "backend": "openai_compat", "model": "fake-model",
        "price": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 3.0},
        "openai_compat": {"base_url": server.url, "api_key_env": KEY_ENV, "max_retries": 0, "timeout_s": 10.0},
    }
    raw["tracking"]["enabled"] = True
    (project / "params.yaml").write_text(yaml.safe_dump(raw))
    proc = run([str(BIN / "dvc"), "repro", "solve"], project)
    assert server.calls == 12
    assert (project / "mlflow.db").exists() and any((project / ".dvc" / "cache").rglob("*"))
    assert not leaks(proc.stdout + proc.stderr)
    assert leaking_files(project) == {}
