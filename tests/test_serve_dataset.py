"""Served traffic as the next offline dataset: requests `dlab serve` answered (gold from the client's
metadata) become the `served` dataset's items; `solve` adopts the server's answers under the same
request hash (no backend call), and `label` grades them against that gold."""

from __future__ import annotations

import json
import os
import sys

import polars as pl
import pytest
import yaml

from delegation_lab.layout import Layout

from .conftest import REPO, run
from .serve_fixtures import FakeBackend, ServeProcess, fake_answer, write_project

openai = pytest.importorskip("openai")


@pytest.mark.processes
@pytest.mark.timeout(600)
def test_served_traffic_is_solved_from_the_journal_and_labelled(tmp_path):
    fake = FakeBackend()
    root = write_project(tmp_path / "project", fake.url)
    server = ServeProcess(root, "--model", "solver:fake")
    questions = [f"served question {i}: how long is this text?" + " pad" * i for i in range(12)]
    golds = [fake_answer(q).split("#### ")[1] if i % 3 else "-1" for i, q in enumerate(questions)]  # a third wrong
    try:
        client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
        for q, g in zip(questions, golds, strict=True):
            client.chat.completions.create(model="solver:fake", messages=[{"role": "user", "content": q}],
                                           metadata={"gold": g})
    finally:
        server.stop()
        fake.close()  # from here on, a backend call would fail: every answer must come from the journal

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["project"]["repo"] = os.path.relpath(REPO, root)
    params["data"].update({"dataset": "served", "ability_size": 4, "train_size": 4, "test_size": 4})
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run([sys.executable, str(REPO / "stages/prepare.py")], root)
    for solver in ["A", "B", "C", "fake"]:
        run([sys.executable, str(REPO / "stages/solve.py"), "--solver", solver], root)
    run([sys.executable, str(REPO / "stages/label.py")], root)

    layout = Layout(root)
    stats = json.loads(layout.solve_run("fake").read_text())
    assert stats["backend_calls"] == 0 and stats["cached"] == 12 and stats["errors"] == 0
    answers = pl.read_parquet(layout.answers("fake"))
    served = pl.read_parquet(layout.served_answers("fake"))
    assert answers.select("item_id", "request_hash").sort("item_id").equals(served.select("item_id", "request_hash").sort("item_id"))
    labels = pl.read_parquet(layout.labels).filter(pl.col("solver") == "fake")
    assert labels.height == 12 and labels["correct"].sum() == 8  # the gold clients sent: a third says -1
