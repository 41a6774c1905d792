"""`dlab serve` never loses a record silently (issue 42): a value a journal table cannot hold (a lone
surrogate, 1e30 tokens, a NaN) is stored cleaned or as an error row, never kills a writer thread;
a journal that cannot be written turns the server unhealthy (503) and keeps its rows; the count
printed at shutdown is the count of decision rows on disk; stream events that are not objects are
journalled errors; a client's own key is masked; a solver named `decisions` has its own journal."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import polars as pl
import pytest
import yaml

from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.calls import checked_generation
from delegation_lab.serve.journal import (
    DECISIONS_JOURNAL,
    SafeWriter,
    ServedJournal,
    read_decisions,
    read_served_answers,
    storable_answer,
    storable_decision,
)
from delegation_lab.solvers.base import Answer, Generation

from tests.serve_fixtures import BACKEND_KEY, CLIENT_KEY, PRICE, FakeBackend, ServeProcess, write_project


def answer(**update) -> Answer:
    row = {"solver": "fake", "item_id": "i1", "request_hash": "h1", "role": "answer", "backend": "openai_compat",
           "model": "m", "answer_text": "#### 4", "parsed_answer": "4", "tokens_in": 3, "tokens_out": 2, "cost_usd": 1e-6,
           "latency_s": 0.1, "error": None, "created_at": datetime.now(UTC), "extra": None}
    return Answer.model_construct(**{**row, **update})


def decision(**update) -> dict:
    row = {"request_id": "r1", "created_at": datetime.now(UTC), "model": "solver:fake", "policy": "solver",
           "item_id": "i1", "question": "q", "gold": None, "answered_by": "fake", "called": ["fake"],
           "request_hashes": ["h1"], "cost_usd": 1e-6, "tokens_in": 3, "tokens_out": 2, "latency_s": 0.1,
           "status": 200, "error": None, "decision": "{}"}
    return {**row, **update}


# ----------------------------------------------------------------------------------------- units


def test_values_a_table_cannot_hold_are_cleaned_or_become_error_rows():
    clean = storable_answer(answer(answer_text="a \ud800 b " + CLIENT_KEY, extra='{"x": "\udfff"}'), [CLIENT_KEY])
    assert clean.answer_text == "a \ufffd b ***" and clean.error is None and "\ufffd" in clean.extra
    huge = storable_answer(answer(tokens_out=10**30, cost_usd=2e24), [])
    assert huge.error.startswith("not journalled as returned: tokens_out=") and huge.tokens_out == 0
    assert storable_answer(answer(cost_usd=float("nan")), []).error is not None
    assert storable_answer(answer(tokens_in=-3), []).error is not None
    row = storable_decision(decision(question="\ud800?" + CLIENT_KEY, gold="\udc00", tokens_out=10**30,
                                     cost_usd=float("inf"), called=["fa\ud800ke"]), [CLIENT_KEY])
    assert row["question"] == "\ufffd?***" and row["gold"] == "\ufffd" and row["called"] == ["fa\ufffdke"]
    assert row["tokens_out"] is None and row["cost_usd"] is None and "tokens_out" in row["error"]


@pytest.mark.parametrize("usage, flagged", [((3, 10**30), True), ((3, -5), True), ((3, float("nan")), True),
                                             ((3, "lots"), True), ((9 * 10**7, 9 * 10**7), True), ((3, 7), False)])
def test_an_endpoints_usage_is_checked_before_it_is_priced(usage, flagged):
    from delegation_lab.solvers.base import Request

    request = Request.model_construct(messages=[{"role": "user", "content": "what is 2+2?"}])
    gen = Generation.model_construct(text="#### 4", tokens_in=usage[0], tokens_out=usage[1], latency_s=0.0, error=None,
                                     cost_usd=None, parsed_answer=None, source_parsed=False, extra={})
    checked = checked_generation(gen, request, max_tokens=512)
    assert bool(checked.extra.get("tokens_estimated")) is flagged
    assert isinstance(checked.tokens_out, int) and 0 <= checked.tokens_out <= 2 * 512 + 64
    assert 0 <= checked.tokens_in <= 4096 + 100


def test_a_reply_with_a_lone_surrogate_is_stored_with_a_replacement():
    from delegation_lab.solvers.base import Request

    request = Request.model_construct(messages=[{"role": "user", "content": "hi"}])
    gen = Generation(text="#### 4 \ud800", tokens_in=1, tokens_out=3)
    checked = checked_generation(gen, request, max_tokens=16)
    assert checked.text == "#### 4 \ufffd" and checked.extra["text_replaced"] is True
    checked.text.encode("utf-8")


class FlakyTable:
    """A table whose append refuses a row holding BAD, and every row while `down` is set."""

    def __init__(self) -> None:
        self.rows: list = []
        self.down = False

    def append(self, rows: list) -> None:
        if self.down:
            raise OSError(28, "No space left on device")
        if any(r.get("question") == "BAD" for r in rows):
            raise ValueError("cannot store BAD")
        self.rows += rows


def test_a_writer_stores_what_it_can_keeps_the_rest_and_never_dies():
    table = FlakyTable()
    writer = SafeWriter(table, rows=1000, interval_s=0.05,
                        error_row=lambda row, e: {"request_id": row["request_id"], "question": None, "error": str(e)},
                        what="decisions")
    try:
        writer.add([{"request_id": "a", "question": "ok"}, {"request_id": "b", "question": "BAD"}])
        writer.flush()
        assert [r["request_id"] for r in table.rows] == ["a", "b"] and table.rows[1]["error"] == "cannot store BAD"
        assert writer.failure is None and writer.written == 2
        table.down = True
        writer.add([{"request_id": "c", "question": "ok"}])
        time.sleep(0.3)  # the background thread tries, fails, and stays alive
        assert writer.failure and "No space left" in writer.failure and writer.pending == 1 and writer._thread.is_alive()
        table.down = False
        time.sleep(0.3)
        assert writer.pending == 0 and writer.written == 3 and [r["request_id"] for r in table.rows][-1] == "c"
        assert writer.failure  # the server was told, and keeps saying so
    finally:
        writer.close()


def test_a_solver_named_decisions_has_its_own_journal(tmp_path: Path):
    layout = Layout(tmp_path)
    journal = ServedJournal(layout, ["decisions"], rows=1, interval_s=60)
    journal.record([answer(solver="decisions")], decision(answered_by="decisions", called=["decisions"]))
    journal.close()
    assert journal.failure is None and journal.rows == 1
    assert read_decisions(layout).height == 1 and read_served_answers(layout, "decisions").height == 1
    assert layout.served_journal(DECISIONS_JOURNAL) != layout.served_journal("decisions")


# ------------------------------------------------------------------------------------ the server


def decision_rows(root: Path) -> int:
    return pl.read_parquet(Layout(root).served_decisions).height


def printed_count(server: ServeProcess) -> int:
    return int(re.search(r"stopped by SIGTERM; (\d+) requests journalled", server.log.read_text()).group(1))


def post(server: ServeProcess, content: bytes | str, model: str = "solver:fake", stream: bool = False) -> httpx.Response:
    """A chat request; `content` as raw JSON text when bytes (so a lone surrogate escape reaches the server)."""
    text = content.decode() if isinstance(content, bytes) else json.dumps(content)
    body = f'{{"model": "{model}", "stream": {str(stream).lower()}, "messages": [{{"role": "user", "content": {text}}}]}}'
    return httpx.post(f"{server.url}/chat/completions", content=body.encode(), timeout=60,
                      headers={"content-type": "application/json", "Authorization": f"Bearer {CLIENT_KEY}"})


def health(server: ServeProcess) -> httpx.Response:
    return httpx.get(server.url.removesuffix("/v1") + "/health", timeout=10)


@pytest.fixture
def hostile(tmp_path: Path):
    """A project whose solvers `fake` and `decisions` both call the fake backend."""
    fake = FakeBackend()
    root = write_project(tmp_path / "project", fake.url)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["solvers"]["decisions"] = {**params["solvers"]["fake"], "price": PRICE}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    yield root
    fake.close()


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_hostile_values_are_journalled_and_the_count_printed_is_the_count_on_disk(hostile: Path):
    """Before: a lone surrogate in a client body killed the decisions writer, later decisions never
    reached disk, and the server still printed "N requests journalled"."""
    server = ServeProcess(hostile, "--model", "solver:fake", "--model", "solver:decisions",
                          "--api-key-env", "DLAB_CLIENT_KEY")
    try:
        statuses = [post(server, b'"what is \\ud800 plus one?"').status_code]  # kills the writer's input, before
        time.sleep(1.5)  # past the journal's flush interval: a dead writer would show now
        statuses += [post(server, "SURROGATE reply please").status_code,
                     post(server, "HUGEUSAGE reply please").status_code,
                     post(server, "NEGUSAGE reply please").status_code,
                     post(server, f"ECHOQ my key is {CLIENT_KEY}").status_code,
                     post(server, "a question for the solver named decisions", model="solver:decisions").status_code]
        huge = post(server, "HUGEUSAGE again")
        assert huge.json()["usage"]["completion_tokens"] < 10**4 and huge.json()["dlab"]["cost_usd"] < 1
        statuses.append(huge.status_code)
        for key in ("JUNKLIST", "JUNKCONTENT", "JUNKUSAGE", "NANUSAGE"):
            streamed = post(server, f"{key} stream please", stream=True)
            assert streamed.status_code == 200 and "Traceback" not in streamed.text
            assert streamed.text.rstrip().endswith("data: [DONE]"), streamed.text[-300:]
            statuses.append(streamed.status_code)
        deep = httpx.post(f"{server.url}/chat/completions", content=b"[" * 100_000 + b"]" * 100_000, timeout=60,
                          headers={"Authorization": f"Bearer {CLIENT_KEY}"})  # was a plain-text 500
        assert deep.status_code == 400 and deep.json()["error"]["code"] == "too_deep"
        time.sleep(1.5)
        assert health(server).json()["status"] == "ok"
        after = post(server, "an ordinary question after all that")  # nothing lost afterwards
        assert after.status_code == 200
        statuses.append(after.status_code)
        assert statuses.count(500) == 0 and statuses.count(200) >= 9, statuses
        server.terminate()
        assert server.wait() == 0, server.log.read_text()[-3000:]
    finally:
        server.stop()
    log = server.log.read_text()
    assert "Traceback" not in log and "Application shutdown failed" not in log, log[-3000:]
    assert printed_count(server) == decision_rows(hostile) == len(statuses)
    layout = Layout(hostile)
    decisions = read_decisions(layout)
    assert decisions.filter(pl.col("question").str.contains("\ufffd")).height == 1
    answers = pl.concat([read_served_answers(layout, s) for s in ("fake", "decisions")])
    assert answers.height == len(statuses)
    assert answers.filter(pl.col("extra").str.contains("text_replaced")).height == 1
    assert answers.filter(pl.col("extra").str.contains("tokens_estimated")).height >= 4
    assert answers["tokens_out"].max() < 10**4 and answers["cost_usd"].max() < 1 and answers["cost_usd"].min() >= 0
    assert answers.filter(pl.col("error").str.contains("malformed stream event")).height == 2  # JUNKLIST, JUNKCONTENT
    on_disk = b"".join(p.read_bytes() for p in layout.served_dir.rglob("*.parquet"))
    for key in (CLIENT_KEY, BACKEND_KEY):
        assert key.encode() not in on_disk and key[:16].encode() not in on_disk


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_a_journal_that_cannot_be_written_turns_the_server_unhealthy_and_loses_nothing(hostile: Path):
    """The decisions journal's folder made unwritable (a file in its place): /health turns 503, new
    requests get 503, the rows already answered are kept and written once the folder can be made;
    the count printed is the count on disk and the exit code says a write failed."""
    blocker = Layout(hostile).served_journal(DECISIONS_JOURNAL)
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a folder")
    server = ServeProcess(hostile, "--model", "solver:fake")
    try:
        assert post(server, "answered before the failure shows").status_code == 200
        deadline = time.monotonic() + 30
        while health(server).status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        sick = health(server)
        assert sick.status_code == 503 and sick.json()["status"] == "unhealthy" and "decisions" in sick.json()["error"]
        refused = post(server, "asked while the journal is down")
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "journal_failed"
        blocker.unlink()  # the disk is back: the kept row is written at the next flush
        time.sleep(1.5)
        server.terminate()
        assert server.wait() == 1
    finally:
        server.stop()
    assert printed_count(server) == decision_rows(hostile) == 1
    assert "NOT journalled" in server.log.read_text()


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_a_client_that_hangs_up_mid_stream_still_has_its_backend_call_journalled(hostile: Path):
    server = ServeProcess(hostile, "--model", "solver:fake")
    try:
        body = {"model": "solver:fake", "stream": True, "messages": [{"role": "user", "content": "SLOWSTREAM " * 8}]}
        with httpx.stream("POST", f"{server.url}/chat/completions", json=body, timeout=60) as response:
            for line in response.iter_lines():
                if "content" in line:
                    break  # hang up after the first piece
        time.sleep(2.5)
        server.terminate()
        assert server.wait() == 0, server.log.read_text()[-3000:]
    finally:
        server.stop()
    assert printed_count(server) == decision_rows(hostile) == 1
    decisions = read_decisions(Layout(hostile))
    assert decisions["status"].to_list() == [499]
    calls = read_served_answers(Layout(hostile), "fake")
    assert calls.height == 1 and "disconnected" in calls["error"][0] and calls["tokens_in"][0] > 0
