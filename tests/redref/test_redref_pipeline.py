"""End to end: the smoke DAG's `redref` stage (the session's `smoke_dag`), its outputs and contracts,
and bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.reporting.paper import paper_vs_ours
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA, TRAJECTORY_SCHEMA

from tests.conftest import BIN, run, stage_here


@pytest.fixture
def redref_project(smoke_dag) -> tuple[Path, str]:
    return smoke_dag


@pytest.mark.slow
def test_repro_redref_writes_metrics_summaries_trajectories_plots(redref_project):
    project, out = redref_project
    assert "Running stage 'redref'" in out
    metrics = json.loads((project / "metrics" / "redref.json").read_text())
    rq1 = metrics["rq1"]
    for key in ("success_redref", "success_random", "tokens_ratio", "calls_ratio", "time_ratio"):
        assert key in rq1 and key in rq1["paper"]
    for key in ("tokens_ratio", "calls_ratio", "time_ratio"):
        assert rq1[f"{key}_ci"][0] <= rq1[key] <= rq1[f"{key}_ci"][1]
    assert 0 <= rq1["success_redref"] <= 100 and rq1["bad_uses_random"] > 0
    assert set(metrics["rq2"]["paper"]) <= set(metrics["rq2"]) and metrics["rq2"]["belief_start"] == 0.5
    assert metrics["rq3"]["contributions_impaired"] == 0.0 and metrics["rq3"]["contributions_normal"] > 0
    assert set(metrics["judge_noise"]["by_delta"]) == {"1.00", "0.50", "0.20"} and "paper" not in metrics["judge_noise"]
    for name in ("single_verdict", "task_conditional"):  # the paper's one-verdict loop and our per-domain beliefs
        block = rq1[name]
        for key in ("tokens_ratio", "calls_ratio", "time_ratio"):
            assert block[f"{key}_ci"][0] <= block[key] <= block[f"{key}_ci"][1]
        assert 0 <= block["success_redref"] <= 100
    assert rq1["paper"]["calls_ratio"] == 0.83 and metrics["rq3"]["paper"]["belief_decline_pct"] == -34.29
    assert metrics["provenance"]["judge.calibration.examples"]["kind"] == "setting"
    assert metrics["provenance"]["rq2.belief_start"]["kind"] == "setting"
    assert metrics["embedding"]["backend"].startswith("hashing")
    assert metrics["protocol"]["tasks"] == 4 and metrics["judge"]["calibration"]["n"] == 80
    rows = paper_vs_ours(metrics)
    assert {r["metric"] for r in rows} >= {"rq1.tokens_ratio", "rq2.belief_end", "rq3.belief_decline_pct", "judge.calibration.examples"}
    assert all(r["ours"] is not None for r in rows)

    summaries = pl.read_parquet(project / "results" / "summaries" / "redref.parquet")
    assert list(summaries.columns) == list(SUMMARY_SCHEMA)
    assert set(summaries["method"]) == {"redref", "redref-budget-aware", "random-delegation"}
    assert set(summaries["operating_point"]) == {"B=0.5x", "B=1x", "B=inf"}
    assert summaries.height == 3 * 3 * 3 and (summaries["split"] == "test").all() and (summaries["n_items"] == 300).all()
    assert summaries.join(pl.read_parquet(project / "results" / "runs" / "redref.parquet"), on=["study", "method", "seed", "split", "operating_point"], how="left")["run_id"].null_count() == 0 and summaries["solver_set"].unique().to_list() == ["A,B,C"]
    assert summaries["accuracy"].is_between(0, 1).all() and (summaries["calls_per_item"] >= 1).all()
    unlimited = summaries.filter((pl.col("operating_point") == "B=inf") & (pl.col("method") == "redref"))
    assert unlimited["accuracy"].mean() > 0.9
    assert summaries["verifier"].unique().to_list() == [metrics["cached"]["verifier"]["name"]]
    # item-level outcomes: every summary row's items, whose means are the row's accuracy and cost
    outcomes = pl.read_parquet(project / "results" / "outcomes" / "redref.parquet")
    keys = ["method", "operating_point", "seed"]
    per_row = outcomes.group_by(keys).agg(pl.col("correct").mean().alias("acc"), pl.col("cost_usd").mean().alias("cost"), pl.len().alias("n"))
    joined = summaries.join(per_row, on=keys)
    assert joined.height == summaries.height and (joined["n"] == joined["n_items"]).all()
    assert ((joined["acc"] - joined["accuracy"]).abs() < 1e-9).all() and ((joined["cost"] - joined["cost_per_item_usd"]).abs() < 1e-12).all()
    point = metrics["cached"]["redref"]["B=inf"]
    assert point["accuracy_ci"][0] <= point["accuracy"] <= point["accuracy_ci"][1]

    root = project / "results" / "trajectories" / "study=redref"
    methods = {p.name.removeprefix("method=") for p in root.iterdir()}
    assert {"rq1.redref", "rq1.random", "rq2.redref", "rq3.redref", "cached.redref.binf", "cached.random-delegation.b0.5x"} <= methods
    part = pl.read_parquet(next((root / "method=rq1.redref" / "seed=0").glob("*.parquet")))
    assert list(part.columns) == list(TRAJECTORY_SCHEMA)
    extra = json.loads(part.filter(pl.col("calls") == 1)["extra"][0])
    assert {"theta", "verdict", "alpha", "beta", "tokens"} <= set(extra)
    cached = pl.read_parquet(next((root / "method=cached.redref.b1x" / "seed=0").glob("*.parquet")))
    assert set(cached["split"]) == {"train", "test"} and set(cached["action"]) <= {"A", "B", "C"}

    for name in ("rq1_efficiency", "rq2_belief", "rq3_belief", "judge_noise", "cached_frontier"):
        assert (project / "plots" / "redref" / f"{name}.csv").stat().st_size > 50
        assert (project / "plots" / "redref" / f"{name}.png").stat().st_size > 10_000

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    exp = client.get_experiment_by_name("redref")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    names = {r.info.run_name for r in runs}
    assert {"redref", "rq1.redref/seed=0", "rq1.random/seed=3", "cached.redref/seed=2", "judge_noise"} <= names
    parent = next(r for r in runs if r.info.run_name == "redref")
    assert [a.path for a in client.list_artifacts(parent.info.run_id, "beliefs")] == ["beliefs/beliefs_protocol_seed0.json"]


@pytest.mark.slow
def test_second_repro_is_a_noop(redref_project):
    project, _ = redref_project
    again = run([str(BIN / "dvc"), "repro", "redref"], project).stdout
    assert "Running stage" not in again


@pytest.mark.slow
def test_bad_params_and_missing_labels_fail_clearly(redref_project, tmp_path):
    project, _ = redref_project
    params = yaml.safe_load((project / "params.yaml").read_text())
    bad_yaml = tmp_path / "bad.yaml"  # beside the shared project, which stays as the DAG left it
    bad = dict(params, redref={**params["redref"], "controller": {"max_depth": 0}})
    bad_yaml.write_text(yaml.safe_dump(bad))
    proc = stage_here(project, "redref", "--params", str(bad_yaml))
    assert proc.returncode == 2 and "redref.controller.max_depth" in proc.stderr
    bad = dict(params, redref={**params["redref"], "cached": {**params["redref"]["cached"], "solvers": ["A", "Q"]}})
    bad_yaml.write_text(yaml.safe_dump(bad))
    proc = stage_here(project, "redref", "--params", str(bad_yaml))
    assert proc.returncode == 2 and re.search(r"redref.cached.solvers: unknown solver\(s\) \['Q'\]", proc.stderr)

    copy = tmp_path / "nolabels"
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("labels.parquet", "mlflow.db"))
    proc = stage_here(copy, "redref")
    assert proc.returncode == 1 and "labels.parquet" in proc.stderr and "Traceback" not in proc.stderr
