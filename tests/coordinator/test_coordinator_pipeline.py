"""End to end: the smoke DAG's `coordinator` stage (the session's `smoke_dag`: every output contract,
MLflow children, the frontier reading our summaries) and `dvc repro coordinator` on RouteLLM's real
GSM8K answers replayed (two solvers)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA, TRAJECTORY_SCHEMA
from delegation_lab.query.sealed import run_query

from tests.conftest import BIN, make_project, run

MIX = "mistralai/Mixtral-8x7B-Instruct-v0.1"
GPT = "gpt-4-1106-preview"


@pytest.fixture
def smoke(smoke_dag) -> tuple[Path, str]:
    return smoke_dag


@pytest.mark.slow
def test_smoke_repro_writes_every_output(smoke):
    project, out = smoke
    params = yaml.safe_load((project / "params.yaml").read_text())["coordinator"]
    seeds, episodes = params["seeds"], params["episodes"]
    metrics = json.loads((project / "metrics" / "coordinator.json").read_text())
    for env_study in ("management", "delegation"):
        block = metrics[env_study]
        assert {"dqn_map", "dqn_nomap", "always_a", "random", "oracle", "paper"} <= set(block)
        for key in ("late_return_mean", "late_return_std", "late_accuracy_mean", "late_cost_per_episode_mean",
                    "cum_cost_mean", "wilcoxon_p_return", "seeds_better_return", "seeds_cheaper"):
            assert key in block["dqn_map"]
        assert block["paper"]["dqn_map"]["late_return_mean"] in (27.56, 25.20)
    assert "mgmt_policy" in metrics["delegation"] and metrics["delegation"]["paper"]["mgmt_policy"]["late_return_mean"] == 28.70
    assert metrics["management"]["oracle"]["late_return_mean"] >= metrics["management"]["dqn_map"]["late_return_mean"]

    for env_study in ("management", "delegation"):  # the strong baseline and the paired test against it
        best = metrics[env_study]["best_fixed_order"]
        assert best["order"] in metrics[env_study]["fixed_orders"] and len(best["test_accuracy_ci"]) == 2
        assert set(metrics[env_study]["dqn_map"]["vs_best_fixed_order"]) >= {"return_difference", "return_difference_ci",
                                                                            "return_p_value"}
    assert metrics["verifier"]["kind"] == "judge" and metrics["verifier"]["name"].startswith("judge(")
    timings = json.loads((project / "metrics" / "timings" / "coordinator.json").read_text())
    assert {"train_and_evaluate", "trajectories", "mlflow_wait", "summaries_and_plots", "dqn_batch_management",
            "dqn_batch_delegation"} <= set(timings["phases"])
    assert timings["phases"]["train_and_evaluate"] <= timings["seconds"]

    summaries = pl.read_parquet(project / "results" / "summaries" / "coordinator.parquet")
    assert list(summaries.columns) == list(SUMMARY_SCHEMA)
    assert set(summaries["verifier"]) == {metrics["verifier"]["name"]}
    test = summaries.filter(pl.col("split") == "test")
    orders = test.filter(pl.col("method").str.ends_with(".fixed_order"))
    test = test.filter(~pl.col("method").str.ends_with(".fixed_order"))  # baselines without MLflow runs
    assert orders.height == 2 * 15 * seeds and orders.join(pl.read_parquet(project / "results" / "runs" / "coordinator.parquet"), on=["study", "method", "seed", "split", "operating_point"], how="left")["run_id"].is_null().all()
    assert (test["n_items"] == 300).all() and test.join(pl.read_parquet(project / "results" / "runs" / "coordinator.parquet"), on=["study", "method", "seed", "split", "operating_point"], how="left")["run_id"].is_not_null().all()
    sweep = len(params["sweep"]["cost_weights"]) - 1
    n_main = 5 * seeds + 7 * seeds  # learned and single baselines: management 5 methods, delegation 7 (mgmt_policy: last and dev-selected)
    assert test.height == n_main + sweep * params["sweep"]["seeds"]
    outcomes = pl.read_parquet(project / "results" / "outcomes" / "coordinator.parquet")
    assert outcomes.height == (test.height + orders.height) * 300
    assert set(outcomes["verifier"]) == {metrics["verifier"]["name"]}
    assert set(test.filter(pl.col("method") == "management.dqn_map")["operating_point"]) == {"lambda=10", "lambda=100", "lambda=1000"}

    layout = Layout(project)
    steps = run_query(layout, "SELECT method, seed, count(*) AS n, sum(reward) AS r FROM trajectories "
                              "WHERE study = 'coordinator' AND split = 'train' GROUP BY ALL")
    assert steps.height == n_main + sweep * params["sweep"]["seeds"]
    one = run_query(layout, "SELECT * FROM trajectories WHERE method = 'delegation.dqn_map' AND seed = 0 LIMIT 5")
    assert set(TRAJECTORY_SCHEMA) <= set(one.columns)
    per_episode = run_query(layout, "SELECT count(DISTINCT episode) AS e FROM trajectories "
                                    "WHERE method = 'management.always_a' AND seed = 1 AND split = 'train'")
    assert per_episode["e"][0] == episodes

    for name in ("management_return.csv", "management_cost.csv", "delegation_return.csv", "delegation_cost.csv",
                 "lambda_sweep.csv", "figures/management_training.png", "figures/delegation_solver_share.png",
                 "figures/lambda_sweep.png", "figures/management_share.csv"):
        assert (project / "plots" / "coordinator" / name).stat().st_size > 100, name
    curve = pl.read_csv(project / "plots" / "coordinator" / "management_return.csv")
    assert curve.height == episodes and {"episode", "dqn_map", "always_a", "oracle"} <= set(curve.columns)

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["coordinator"], output_format="list")
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == n_main + sweep * params["sweep"]["seeds"]
    child = next(r for r in children if r.data.tags["mlflow.runName"] == "management.dqn_map/seed=0")
    history = mlflow.MlflowClient().get_metric_history(child.info.run_id, "train/return")
    cap = yaml.safe_load((project / "params.yaml").read_text()).get("tracking", {}).get("series_points", 30)
    points = min(episodes, params.get("mlflow_points", 200), cap)  # curves are downsampled to at most the cap
    assert len(history) == points and "eval/accuracy" in child.data.metrics

    # the frontier stage (the DAG ran it on this stage's summaries) puts our held-out points beside the solver baselines
    frontier = pl.read_parquet(project / "results" / "frontier.parquet")
    ours = frontier.filter(pl.col("study") == "coordinator")
    assert {"management.dqn_map", "delegation.dqn_map", "delegation.mgmt_policy"} <= set(ours["method"])
    assert ours.filter(pl.col("method") == "management.dqn_map").height == 3  # three cost weights

    again = run([str(BIN / "dvc"), "repro", "coordinator"], project).stdout
    assert "Running stage 'coordinator'" not in again


def _without_timings(obj):
    """Metrics minus what measures the machine rather than the run (seconds, timing)."""
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items() if k not in ("seconds", "timing")}
    return obj


@pytest.mark.slow
def test_the_stage_is_deterministic(smoke, tmp_path):
    """The coordinator stage again on the same inputs in a second folder: identical metrics,
    summaries (bar MLflow run ids) and item-level outcomes."""
    project, _ = smoke
    again = tmp_path / "again"
    shutil.copytree(project, again, ignore=shutil.ignore_patterns("mlflow.db", "mlruns", "__pycache__"))
    run([str(BIN / "python"), "stages/coordinator.py"], again)
    read = lambda p: json.loads((p / "metrics" / "coordinator.json").read_text())  # noqa: E731
    assert _without_timings(read(again)) == _without_timings(read(project))
    for table in ("summaries", "outcomes"):
        a = pl.read_parquet(project / "results" / table / "coordinator.parquet").drop("run_id", strict=False)
        b = pl.read_parquet(again / "results" / table / "coordinator.parquet").drop("run_id", strict=False)
        assert a.equals(b), table


@pytest.mark.slow
def test_on_routellm_gsm8k_answers_the_learned_policy_beats_always_gpt4_per_dollar(shared_data, tmp_path):
    csv = shared_data / "routellm_gsm8k" / "gsm8k_responses.csv"
    if not csv.exists():
        pytest.skip(f"{csv} is absent")
    project = make_project(tmp_path / "p", profile=None)
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["data"].update(dataset="replay", ability_size=300, train_size=700, test_size=319,
                       replay={"path": str(csv), "format": "routellm_csv"})
    prices = {"gpt4": (GPT, 10.0, 30.0), "mixtral": (MIX, 0.6, 0.6)}  # $ per 1M input / output tokens
    raw["solvers"] = {
        name: {"backend": "replay", "model": model,
               "price": {"input_usd_per_mtok": p_in, "output_usd_per_mtok": p_out},
               "replay": {"path": str(csv), "format": "routellm_csv", "source_model": model}}
        for name, (model, p_in, p_out) in prices.items()  # gpt4 first: the manager of the chain
    }
    raw["label"]["judge"]["sample_size"] = 0
    # nothing is judged, so no judge rates are measured: the shared verifier's rates are configured
    raw["evaluation"]["verifier"].update(false_positive_rate=0.03, false_negative_rate=0.03)
    raw["tracking"] = {"enabled": False}
    raw["coordinator"].update(seeds=3, episodes=120, late_episodes=30,
                              dqn={"learning_starts": 200, "epsilon_decay_steps": 1500, "target_sync": 100},
                              sweep={"seeds": 0})
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    out = run([str(BIN / "dvc"), "repro", "coordinator"], project).stdout
    print(out[-3000:])
    metrics = json.loads((project / "metrics" / "coordinator.json").read_text())
    assert metrics["setup"]["agents"] == ["gpt4", "mixtral"] and metrics["setup"]["routes"] == ["gpt4", "gpt4>mixtral"]
    for env_study in ("management", "delegation"):
        block = metrics[env_study]
        learned, always = block["dqn_map"], block["always_a"]
        assert learned["test_accuracy_per_dollar_mean"] > always["test_accuracy_per_dollar_mean"], env_study
        assert learned["late_return_mean"] > block["random"]["late_return_mean"], env_study
        # Mixtral first, GPT-4 when it fails: more accurate than GPT-4 alone (0.86) at a fraction of its cost
        assert learned["test_accuracy_mean"] > always["test_accuracy_mean"], env_study
        assert learned["test_cost_per_item_mean"] < 0.5 * always["test_cost_per_item_mean"], env_study
    summaries = pl.read_parquet(project / "results" / "summaries" / "coordinator.parquet")
    assert set(summaries["dataset"]) == {"replay"} and set(summaries["solver_set"]) <= {"gpt4", "mixtral", "gpt4,mixtral"}
