"""End to end: the data stages of the smoke DAG (the session's `smoke_dag`), and what a change reruns
(in a copy)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.pipeline.schemas import ABILITY_MAP_SCHEMA, ANSWERS_SCHEMA, ITEMS_SCHEMA, LABELS_SCHEMA

from tests.conftest import BIN, copy_project, ran, run, upstream

STAGES = ["prepare", "solve", "label", "ability_map"]


@pytest.mark.slow
def test_repro_writes_every_contract(smoke_dag, tmp_path):
    project, _ = smoke_dag
    assert upstream(project, "ability_map") == set(STAGES)
    for split, n in {"ability": 200, "train": 800, "test": 300}.items():
        items = pl.read_parquet(project / "data" / "items" / f"{split}.parquet")
        assert items.height == n and list(items.columns) == list(ITEMS_SCHEMA)
    for solver in "ABC":
        answers = pl.read_parquet(project / "data" / "answers" / f"{solver}.parquet")
        assert answers.height == 1300 and list(answers.columns) == list(ANSWERS_SCHEMA)
    labels = pl.read_parquet(project / "data" / "labels.parquet")
    assert labels.height == 3900 and list(labels.columns) == list(LABELS_SCHEMA)
    assert labels["judge_verdict"].is_not_null().sum() == 3 * 60  # the agreement sample
    amap = pl.read_parquet(project / "data" / "ability_map.parquet")
    assert list(amap.columns) == list(ABILITY_MAP_SCHEMA)
    assert ((amap["ci_low"] <= amap["success_rate"]) & (amap["success_rate"] <= amap["ci_high"])).all()
    assert amap.group_by("solver").agg(pl.col("n").sum())["n"].to_list() == [200, 200, 200]

    solve = json.loads((project / "metrics" / "solve.json").read_text())
    for solver in "ABC":
        assert set(solve[solver]) >= {"accuracy", "n_items", "cost_usd", "tokens_in", "tokens_out", "backend_calls"}
        assert solve[solver]["backend_calls"] == 1300 and solve[solver]["n_items"] == 1300
    assert solve["A"]["accuracy"] > solve["B"]["accuracy"] > solve["C"]["accuracy"]
    assert solve["A"]["cost_usd"] > solve["B"]["cost_usd"] > solve["C"]["cost_usd"]
    labels_metrics = json.loads((project / "metrics" / "labels.json").read_text())
    assert labels_metrics["agreement"]["all"]["n"] == 180 and labels_metrics["agreement"]["all"]["agreement"] > 0.9
    ability = json.loads((project / "metrics" / "ability_map.json").read_text())
    for solver in "ABC":
        for bucket in ability[solver]["by_bucket"].values():
            assert bucket["ci_low"] <= bucket["success_rate"] <= bucket["ci_high"] and bucket["n"] > 0
        assert sum(b["n"] for b in ability[solver]["by_bucket"].values()) == ability[solver]["n"] == 200
    # one line per solver: the custom template colours by the CSV's `series` column
    shown = json.loads(run([str(BIN / "dvc"), "plots", "show", "--json", "plots/ability_map/success_rate.csv"], project).stdout)
    (spec,) = shown["data"]["plots/ability_map/success_rate.csv"]
    assert spec["content"]["encoding"]["color"]["field"] == "series"
    assert {row["series"] for row in spec["content"]["data"]["values"]} == {"A", "B", "C"}

    # baselines only: the frontier in a copy where no study has run
    project = Path(shutil.copytree(project, tmp_path / "p", ignore=shutil.ignore_patterns("results", "mlflow.db", "mlartifacts")))
    run([str(BIN / "python"), "stages/frontier.py"], project)
    frontier = pl.read_parquet(project / "results" / "frontier.parquet")
    singles = {r["method"]: r["accuracy"] for r in frontier.filter(pl.col("kind") == "single").iter_rows(named=True)}
    test_acc = {s: solve[s]["accuracy_test"] for s in "ABC"}
    assert singles == pytest.approx({f"always-{s}": a for s, a in test_acc.items()}, abs=1e-6)
    oracle = frontier.filter(pl.col("kind") == "oracle").row(0, named=True)
    assert oracle["accuracy"] >= max(test_acc.values()) and oracle["cost_per_item_usd"] < solve["A"]["cost_usd"] / 1300
    fm = json.loads((project / "metrics" / "frontier.json").read_text())
    assert fm["strong_solver"] == "A" and fm["weak_solver"] == "C" and set(fm["methods"]) >= {"always-A", "oracle", "cascade:C>B>A"}
    # 3 solvers: every cascade built, none searched (frontier.exhaustive_limit)
    assert {k: fm["search"][k] for k in ("exhaustive", "cascades_possible", "cascades_kept", "search_split")} == {
        "exhaustive": True, "cascades_possible": 4, "cascades_kept": 4, "search_split": None}
    assert (project / "plots" / "frontier" / "frontier.png").stat().st_size > 10_000
    # the baselines' item-level outcomes (Compare pairs them with any point): they reproduce every
    # baseline row, and a rerun, which finds them on disk, neither reads them nor changes the frontier
    outcomes = pl.read_parquet(project / "results" / "outcomes" / "baselines.parquet")
    means = outcomes.group_by("method", "operating_point").agg(pl.col("correct").mean().alias("mean"))
    both = frontier.filter(pl.col("study") == "baselines").join(means, on=["method", "operating_point"])
    assert both.height == frontier.filter(pl.col("study") == "baselines").height
    assert both["mean"].to_numpy() == pytest.approx(both["accuracy"].to_numpy())
    run([str(BIN / "python"), "stages/frontier.py"], project)
    assert pl.read_parquet(project / "results" / "frontier.parquet").equals(frontier)


@pytest.mark.slow
def test_second_repro_is_a_noop_and_one_solver_change_sends_only_its_requests(smoke_dag, tmp_path):
    project = copy_project(smoke_dag[0], tmp_path / "p")
    cache = project / "src" / "delegation_lab" / "data" / "__pycache__"  # as running Python leaves it
    cache.mkdir(exist_ok=True)
    (cache / "stale.cpython-311.pyc").write_bytes(b"\x00" * 16)
    again = run([str(BIN / "dvc"), "repro", "ability_map"], project).stdout
    assert ran(again) == set()
    assert "up to date" in again

    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["solvers"]["B"]["simulated"]["tokens_out_base"] = 160
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    changed = run([str(BIN / "dvc"), "repro", "ability_map"], project).stdout
    assert ran(changed) == {"solve", "label", "ability_map"}
    runs = {s: json.loads((project / "metrics" / "solve_runs" / f"{s}.json").read_text()) for s in "ABC"}
    assert runs["B"]["backend_calls"] == 1300  # the changed settings are new requests
    assert runs["A"]["backend_calls"] == runs["C"]["backend_calls"] == 0  # the unchanged solvers send nothing
    assert runs["A"]["cached"] == 1300
    phases = json.loads((project / "metrics" / "timings" / "solve.json").read_text())["phases"]
    assert set(phases) == {"A", "B", "C"}  # each solver's seconds within the one stage
    answers_b = pl.read_parquet(project / "data" / "answers" / "B.parquet")
    assert answers_b.height == 2600  # the old answers stay cached under their own request hash
    labels = pl.read_parquet(project / "data" / "labels.parquet")
    assert labels.height == 3900  # labels grade only the current answers


@pytest.mark.slow
def test_label_stage_refuses_an_incomplete_cache(smoke_dag, tmp_path):
    project = copy_project(smoke_dag[0], tmp_path / "p")
    answers = pl.read_parquet(project / "data" / "answers" / "C.parquet")
    answers.head(100).write_parquet(project / "data" / "answers" / "C.parquet")
    proc = run([str(BIN / "python"), "stages/label.py"], project, check=False)
    assert proc.returncode == 1
    assert "items have no answer for the current settings of solver C" in proc.stderr
    assert "dvc repro solve" in proc.stderr and "stages/solve.py --solver C" in proc.stderr
