"""The whole DAG on the smoke profile: every stage runs, every study's summaries reach the frontier,
every study's paper figures reach `dlab report`, and a second `dvc repro` does nothing."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
import yaml

from tests.conftest import BIN, REPO, run


@pytest.mark.slow
def test_full_dag_on_the_smoke_profile(smoke_dag):
    project, out = smoke_dag  # the session's `dvc repro` of the whole DAG in a fresh project
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert set(re.findall(r"Running stage '([^']+)'", out)) == set(stages)

    summary_studies = {p.stem for p in (project / "results" / "summaries").glob("*.parquet")}
    frontier = pl.read_parquet(project / "results" / "frontier.parquet")
    assert summary_studies and summary_studies <= set(frontier["study"].unique().to_list())
    frontier_metrics = json.loads((project / "metrics" / "frontier.json").read_text())
    on_main_task = {p.stem for p in (project / "results" / "summaries").glob("*.parquet")
                    if pl.read_parquet(p)["dataset"].unique().to_list() == [frontier_metrics["dataset"]]}
    assert {"coordinator", "market", "redref", "margent"} <= on_main_task
    assert all(any(key.startswith(f"{study}/") for key in frontier_metrics["methods"]) for study in on_main_task)
    other_tasks = frontier.filter(pl.col("dataset") != frontier_metrics["dataset"])
    assert set(other_tasks["study"].unique().to_list()) == summary_studies - on_main_task  # their own Pareto sets

    report = run([str(BIN / "dlab"), "report"], project).stdout
    for study in ("coordinator", "history_game", "market", "redref", "margent"):
        assert f"## {study}" in report
    query = run([str(BIN / "dlab"), "query", "--format", "csv",
                 "select study, count(*) as n from trajectories group by 1 order by 1"], project).stdout
    with_steps = {line.split(",")[0] for line in query.strip().splitlines()[1:]}
    assert {"coordinator", "history_game", "market", "redref", "margent"} <= with_steps

    again = run([str(BIN / "dvc"), "repro"], project).stdout
    assert re.findall(r"Running stage '([^']+)'", again) == []
