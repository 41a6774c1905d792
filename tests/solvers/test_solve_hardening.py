"""The solve stage never loses an answer it paid for, and never bills an absurd number (issue 42):
a reply holding a lone surrogate is stored with U+FFFD (flagged), a row whose values no table can hold
becomes an error row instead of sinking the part it is in, and an endpoint's usage (1e30, negative,
NaN, 90 M tokens for `#### 42`) passes the one boundary `dlab serve` uses too (`solvers.usage`)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve import calls as serve_calls
from delegation_lab.solvers import usage
from delegation_lab.solvers.base import Generation, Solver
from delegation_lab.solvers.cache import AnswerCache
from delegation_lab.solvers.params import SolverParams

from tests.solvers.test_backend_openai_compat import make_solver, server  # noqa: F401 - `server` is a fixture
from tests.solvers.test_solve_stage import stage_in, write_project

PRICE = {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 3.0}


@pytest.fixture(scope="module")
def items():
    return generate(ArithParams(min_steps=1, max_steps=3), 6, seed=5)


def test_serve_and_solve_share_one_usage_boundary():
    assert serve_calls.checked_generation is usage.checked_generation


def test_a_reply_with_a_lone_surrogate_is_stored_replaced_and_flagged(server, items, tmp_path):
    server.content = lambda text: text + " \ud800"
    solver = make_solver(server.url, max_retries=0)
    cache = AnswerCache(tmp_path / "a.parquet", tmp_path / "journal")
    run = cache.fill(solver, [solver.request(i) for i in items], progress=False)
    df = cache.read()
    assert run.backend_calls == len(items) and df.height == len(items) and df["error"].null_count() == len(items)
    assert all(t.endswith("\ufffd") for t in df["answer_text"])
    assert all(json.loads(e)["text_replaced"] for e in df["extra"])


@pytest.mark.parametrize("usage_reply", [
    {"prompt_tokens": 5, "completion_tokens": 1e30},
    {"prompt_tokens": 5, "completion_tokens": -1},
    {"prompt_tokens": -5, "completion_tokens": 7},
    {"prompt_tokens": 90_000_000, "completion_tokens": 90_000_000},
], ids=["1e30", "negative_out", "negative_in", "90M"])
def test_absurd_usage_is_estimated_and_flagged_not_billed(server, items, usage_reply):
    server.reply_extra = {"usage": usage_reply}
    answers = make_solver(server.url, max_retries=0).solve(items[:2])
    for a in answers:
        assert a.error is None and a.parsed_answer is not None
        assert 0 < a.tokens_in < 1000 and 0 < a.tokens_out < 200 and a.cost_usd < 1e-3
        assert json.loads(a.extra)["tokens_estimated"] is True


def test_a_nan_usage_is_estimated(server, items):
    server.raw = None
    server.reply_extra = {"usage": {"prompt_tokens": 5, "completion_tokens": float("nan")}}  # json.dumps writes NaN
    a = make_solver(server.url, max_retries=0).solve(items[:1])[0]
    assert a.error is None and json.loads(a.extra)["tokens_estimated"] is True and a.cost_usd < 1e-3


class _Backend:
    """A batch backend: generation i is `make(i)`; raises after `fail_after` generations when set."""

    def __init__(self, make, fail_after=None):
        self.make, self.fail_after = make, fail_after

    def fingerprint(self):
        return {}

    def generate(self, requests):
        if self.fail_after is not None and self.fail_after == 0:
            raise RuntimeError("backend died")
        if self.fail_after is not None:
            self.fail_after -= 1
        return [self.make(i) for i in range(len(requests))]


def _solver(backend) -> Solver:
    return Solver("fake", SolverParams(backend="openai_compat", model="m", price=PRICE, openai_compat={"base_url": "http://127.0.0.1:9", "api_key_env": None}), backend)


def test_a_row_no_table_can_hold_becomes_an_error_row_and_its_batch_is_kept(items, tmp_path):
    # tokens_out beyond int64: the part cannot be built from these rows; before, the whole part (and
    # every answer paid for beside it) was lost with a traceback
    backend = _Backend(lambda i: Generation(text="#### 1", tokens_in=3, tokens_out=10**30 if i == 1 else 2))
    solver = _solver(backend)
    cache = AnswerCache(tmp_path / "a.parquet", tmp_path / "journal")
    run = cache.fill(solver, [solver.request(i) for i in items], batch_size=3, progress=False)
    df = cache.read()
    assert df.height == len(items) and run.error_rows == 2  # item 1 of each batch of 3
    bad = df.filter(pl.col("error").is_not_null())
    assert bad["error"].str.starts_with("answer could not be stored").all() and (bad["tokens_out"] == 0).all()


def test_answers_paid_for_are_written_before_a_backend_error_propagates(items, tmp_path):
    solver = _solver(_Backend(lambda i: Generation(text="#### 1", tokens_in=3, tokens_out=2), fail_after=1))
    cache = AnswerCache(tmp_path / "a.parquet", tmp_path / "journal")
    with pytest.raises(RuntimeError, match="backend died"):
        cache.fill(solver, [solver.request(i) for i in items], batch_size=3, progress=False)
    assert cache.read().height == 3


def test_the_solve_stage_against_a_surrogate_endpoint_writes_every_answer(server, tmp_path, capsys):
    server.content = lambda text: "\ud800 " + text
    root = write_project(tmp_path / "p", server.url, per_split=4)
    assert stage_in(root, "solve", ["--solver", "A"]) == 0
    df = pl.read_parquet(Layout(root).answers("A"))
    assert df.height == server.calls == 12 and df["error"].null_count() == 12
    assert "\ufffd" in df["answer_text"][0]


def test_the_solve_stage_with_usage_1e30_prints_a_sane_spend(server, tmp_path, capsys):
    server.reply_extra = {"usage": {"prompt_tokens": 1e30, "completion_tokens": 1e30}}
    root = write_project(tmp_path / "p", server.url, per_split=2)
    assert stage_in(root, "solve", ["--solver", "A"]) == 0
    out = capsys.readouterr().out
    spent = float(out.split("$")[1].split()[0])
    assert spent < 0.01, out
    stats = json.loads(Layout(root).solve_run("A").read_text())
    assert stats["cost_usd_this_run"] < 0.01


# ------------------------------------------------------------ prices and imported numbers


def test_params_check_refuses_an_absurd_price_naming_the_key(tmp_path):
    import yaml
    from typer.testing import CliRunner

    from delegation_lab.cli import app

    from tests.conftest import REPO

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    solver = next(iter(raw["solvers"]))
    raw["solvers"][solver]["price"] = {"input_usd_per_mtok": 1.7e308, "output_usd_per_mtok": 1.0, "source": "typo"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["params", "check", "--path", str(tmp_path / "params.yaml")])
    assert result.exit_code == 2, result.output
    assert "input_usd_per_mtok" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("check", ["cost", "score", "correct", "tokens"])
def test_a_nan_in_an_import_is_refused_not_re_priced(tmp_path, check):
    from delegation_lab.solvers.replay.records import ReplayError, correctness, cost_value, token_count, unit_score

    fn = {"cost": cost_value, "score": unit_score, "correct": correctness, "tokens": token_count}[check]
    with pytest.raises(ReplayError, match=r"f\.json: record 3.*NaN"):
        fn(float("nan"), tmp_path / "f.json", "record 3")
    if check != "tokens":  # RouterBench's pandas frames: NaN is its empty cell
        assert fn(float("nan"), tmp_path / "f.pkl", "row 1", nan_is_empty=True) is None
    assert fn(None, tmp_path / "f.json", "record 3") is None


def test_a_nan_cost_in_a_routerarena_file_is_one_line(tmp_path):
    from delegation_lab.solvers.replay.records import ReplayError
    from delegation_lab.solvers.replay.routerarena_jsonl import read_routerarena_jsonl

    line = ('{"global_index": 1, "question": "q", "generated_answer": "a", "token_usage": {}, '
            '"evaluation_result": {"score": 1, "inference_cost": NaN}, "success": true}')
    (tmp_path / "m.jsonl").write_text(line + "\n")
    with pytest.raises(ReplayError, match="m.jsonl: line 1.*inference_cost.*NaN"):
        read_routerarena_jsonl(tmp_path / "m.jsonl")
