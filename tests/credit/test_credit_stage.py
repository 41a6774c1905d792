"""The `credit` stage end to end on the smoke profile (the session's `smoke_dag`): metrics with the paper's figures beside ours,
summaries for the frontier (their own dataset), trajectories with per-agent credit, the replayed
credit table, plots, the MLflow experiment; bad params fail before any work."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.params.root import deep_merge, read_yaml
from delegation_lab.pipeline.layout import Layout
from delegation_lab.reporting.paper import paper_vs_ours
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA
from delegation_lab.pipeline.store import connect

from tests.conftest import BIN, REPO, run, stage_here

SMOKE_METHODS = ["single", "broadcast", "no_shapley", "planner_only", "worker_only", "sharp", "sharp_loo",
                 "sharp_team_norm", "sharp_p0.5"]


def smoke_params(**credit) -> dict:
    raw = deep_merge(read_yaml(REPO / "params.yaml"), read_yaml(REPO / "profiles" / "smoke.yaml"))
    raw["credit"].update(credit)
    return raw


@pytest.fixture
def stage_root(smoke_dag) -> Path:
    return smoke_dag[0]  # the session's smoke DAG ran the stage on these params (params.yaml + smoke + overlay)


def credit_params(project: Path) -> dict:
    """The `credit` section the project's DAG ran with (its sizes: seeds, iterations, tasks)."""
    return yaml.safe_load((project / "params.yaml").read_text())["credit"]


@pytest.mark.slow
def test_metrics_hold_every_method_and_the_paper_beside_ours(stage_root):
    m = json.loads((stage_root / "metrics" / "credit.json").read_text())
    params = credit_params(stage_root)
    for method in SMOKE_METHODS:
        assert 0 <= m[method]["accuracy"] <= 100
        assert m[method]["n_seeds"] == params["seeds"]
    for key in ("sharp", "broadcast", "single", "no_shapley", "planner_only", "worker_only"):
        assert isinstance(m[key]["accuracy"], float)
    assert m["sharp"]["paper"]["accuracy"] == 50.76 and m["no_shapley"]["paper"]["accuracy"] == 47.00
    assert set(m["p_sweep"]) >= {"p=0", "p=0.5", "p=1", "paper"}
    assert m["p_sweep"]["p=0"]["coalitions_per_batch"] == 0 < m["p_sweep"]["p=0.5"]["coalitions_per_batch"]
    assert m["gaps"]["sharp_minus_no_shapley"] == pytest.approx(m["sharp"]["accuracy"] - m["no_shapley"]["accuracy"])
    # intervals: item (question x seed) bootstrap per method, a paired test per gap
    for method in SMOKE_METHODS:
        lo, hi = m[method]["accuracy_ci"]
        assert lo <= m[method]["accuracy"] <= hi < lo + 30
    lo, hi = m["gaps"]["sharp_minus_worker_only_ci"]
    assert lo <= m["gaps"]["sharp_minus_worker_only"] <= hi and 0 <= m["gaps"]["sharp_minus_worker_only_p_value"] <= 1
    assert m["verifier"] == "environment"
    rows = {r["metric"]: r for r in paper_vs_ours(m)}
    assert rows["sharp.accuracy"]["paper"] == 50.76 and rows["sharp.accuracy"]["ours"] == m["sharp"]["accuracy"]
    assert rows["p_sweep.p=1.tokens_per_task"]["paper"] == 8300.0
    # the per-seed paired interval beside the bootstrap: the spread of training runs
    lo, hi = m["gaps"]["sharp_minus_worker_only_seed_ci"]
    assert lo <= m["gaps"]["sharp_minus_worker_only"] <= hi
    # leave-one-out training beside exact Shapley, and the normalisation-only control
    loo = m["loo"]
    assert loo["accuracy"] == m["sharp_loo"]["accuracy"] and loo["exact_accuracy"] == m["sharp"]["accuracy"]
    assert loo["minus_exact"] == pytest.approx(loo["accuracy"] - loo["exact_accuracy"])
    assert loo["minus_exact_ci"][0] <= loo["minus_exact"] <= loo["minus_exact_ci"][1]
    assert 0 < loo["coalitions_per_batch"] < loo["exact_coalitions_per_batch"]
    assert loo["credit_abs_error"] > 0 and 0 < loo["credit_same_sign_share"] <= 100
    norm = m["normalisation_only"]
    assert norm["agent_minus_team"] == pytest.approx(norm["agent_accuracy"] - norm["team_accuracy"])
    assert norm["team_accuracy"] == m["sharp_team_norm"]["accuracy"] and "agent_minus_team_seed_ci" in norm
    # the longer run (long_run.iterations_factor x iterations, long_run.seeds seeds)
    long, long_params = m["long_run"], params["long_run"]
    assert long["iterations"] == long_params["iterations_factor"] * params["iterations"] > params["iterations"]
    assert long["seeds"] == list(range(long_params["seeds"]))
    assert set(long) >= {*long_params["methods"], "sharp", "sharp_minus_broadcast_ci"}
    # provenance: the token levels are calibrated inputs; rows not listed are computed
    assert m["provenance"]["p_sweep.p=1.tokens_per_task"]["kind"] == "calibrated"
    assert all(v["kind"] in ("calibrated", "setting") and v["why"] for v in m["provenance"].values())
    assert m["replay"]["max_abs_diff_vs_training_code"] < 1e-9
    assert m["replay"]["matched_rows"] == m["replay"]["agent_rows"] > 0


@pytest.mark.slow
def test_summaries_are_on_their_own_dataset(stage_root):
    s = pl.read_parquet(stage_root / "results" / "summaries" / "credit.parquet")
    params = credit_params(stage_root)
    assert list(s.columns) == list(SUMMARY_SCHEMA)
    assert set(s["dataset"].unique()) == {"sharp_multihop"}
    test = s.filter(pl.col("split") == "test")
    assert sorted(test["method"].unique()) == sorted(SMOKE_METHODS) and test.height == params["seeds"] * len(SMOKE_METHODS)
    assert (test["n_items"] == params["test_tasks"] * params["eval_replicates"]).all()
    assert test.join(pl.read_parquet(stage_root / "results" / "runs" / "credit.parquet"), on=["study", "method", "seed", "split", "operating_point"], how="left")["run_id"].null_count() == 0
    m = json.loads((stage_root / "metrics" / "credit.json").read_text())
    sharp = test.filter(pl.col("method") == "sharp")
    assert 100 * sharp["accuracy"].mean() == pytest.approx(m["sharp"]["accuracy"])
    assert sharp["cost_per_item_usd"].mean() == pytest.approx(m["sharp"]["tokens_per_task"] * 0.2 / 1e6)
    assert set(s["verifier"]) == {"environment"}
    # outcomes: every test row's questions (a question's share of right replicates), same keys and means
    out = pl.read_parquet(stage_root / "results" / "outcomes" / "credit.parquet")
    keys = ["method", "operating_point", "seed"]
    per = out.group_by(keys).agg(pl.col("correct").mean().alias("acc"), pl.col("cost_usd").mean().alias("cost"), pl.len().alias("n"))
    joined = test.join(per, on=keys)
    assert joined.height == test.height and (joined["n"] == params["test_tasks"]).all()
    assert ((joined["acc"] - joined["accuracy"]).abs() < 1e-9).all()
    assert ((joined["cost"] - joined["cost_per_item_usd"]).abs() < 1e-12).all()
    assert out["item_id"][0].startswith("mhq-test-")


@pytest.mark.slow
def test_trajectories_carry_per_agent_credit_and_the_credit_view_shows_it(stage_root):
    con = connect(Layout(stage_root))
    try:
        per_rollout = con.sql("""
            SELECT method, seed, episode, sum(CAST(json_extract(extra, '$.credit') AS DOUBLE)) AS credit_sum,
                   count(*) FILTER (WHERE json_extract_string(extra, '$.role') = 'planner') AS planners,
                   any_value(correct) AS correct
            FROM trajectories WHERE study = 'credit' AND split = 'test' AND method = 'sharp'
            GROUP BY ALL""").pl()
        credit = con.sql("SELECT method, role, count(*) n FROM credit WHERE study = 'credit' GROUP BY ALL").pl()
        train = con.sql("SELECT count(*) FROM trajectories WHERE study = 'credit' AND split = 'train'").fetchall()[0][0]
    finally:
        con.close()
    params = credit_params(stage_root)
    assert (per_rollout["planners"] == 1).all() and per_rollout.height == params["seeds"] * params["test_tasks"]
    assert train > 0
    assert set(credit["method"]) == set(SMOKE_METHODS) - {"single"}
    assert set(credit["role"]) == {"planner", "worker"}


@pytest.mark.slow
def test_plots_and_mlflow(stage_root):
    plots = stage_root / "plots" / "credit"
    for name in ("heldout_accuracy.csv", "train_accuracy.csv", "methods.csv", "p_sweep.csv",
                 "figures/methods.png", "figures/stability.png", "figures/p_sweep.png"):
        assert (plots / name).stat().st_size > 0, name
    sweep = pl.read_csv(plots / "p_sweep.csv")
    assert sweep["p"].to_list() == [0.0, 0.5, 1.0]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{stage_root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("credit")
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    params = credit_params(stage_root)
    assert len(children) == params["seeds"] * len(SMOKE_METHODS)
    child = next(r for r in children if r.data.tags["mlflow.runName"] == "sharp/seed=0")
    assert "eval/accuracy" in child.data.metrics and "credit/coalitions_per_batch" in child.data.metrics
    cap = yaml.safe_load((stage_root / "params.yaml").read_text())["tracking"]["series_points"]
    assert len(client.get_metric_history(child.info.run_id, "train/accuracy")) == min(params["iterations"], cap)


@pytest.mark.slow
def test_the_frontier_keeps_the_simulated_task_apart(stage_root):
    """credit's rows name their own dataset: they get their own Pareto set and never enter the cached
    answers' frontier, its methods summary or its picture."""
    from delegation_lab.params.root import FrontierParams
    from delegation_lab.frontier.build import build_frontier

    labeled = pl.DataFrame({"item_id": list("abcd") * 2, "solver": ["A"] * 4 + ["B"] * 4,
                            "correct": [True, True, True, False, True, False, False, False],
                            "cost_usd": [1e-3] * 4 + [1e-5] * 4})
    other = pl.DataFrame([{"study": "s", "method": "m", "seed": 0, "split": "test", "operating_point": "default",
                           "accuracy": 0.6, "cost_per_item_usd": 5e-4, "calls_per_item": 1.0, "return": None,
                           "n_items": 4, "dataset": "arith", "solver_set": "A,B"}], schema=SUMMARY_SCHEMA)
    credit = pl.read_parquet(stage_root / "results" / "summaries" / "credit.parquet")
    params = FrontierParams(mixture_points=1, cascade={"seeds": 1})
    alone, metrics_alone = build_frontier(labeled, other, params, "arith")
    table, metrics = build_frontier(labeled, pl.concat([other, credit]), params, "arith")
    main = table.filter(pl.col("dataset") == "arith")
    assert main.sort("method", "operating_point").equals(alone.sort("method", "operating_point"))
    assert metrics == metrics_alone
    mine = table.filter(pl.col("study") == "credit")
    assert set(mine["dataset"]) == {"sharp_multihop"} and mine.height == len(SMOKE_METHODS)
    assert mine["on_pareto"].any()
    best = mine.sort("accuracy", descending=True).row(0, named=True)
    assert best["on_pareto"]  # the most accurate point of its own task is on its own front


@pytest.mark.parametrize(("credit", "code", "message"), [
    ({"alpha": -0.5}, 2, "credit.alpha"),
    ({"p_sweep": [1.5]}, 2, "credit.p_sweep"),
    ({"device": "cuda:7"}, 1, "credit.device"),
])
def test_bad_params_fail_before_any_work(tmp_path, credit, code, message):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(smoke_params(**credit)))
    proc = stage_here(tmp_path, "credit")
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "results").exists()


@pytest.mark.slow
def test_dvc_repro_credit_on_the_smoke_profile(smoke_dag):
    project, _ = smoke_dag  # the session's smoke DAG ran `credit`
    m = json.loads((project / "metrics" / "credit.json").read_text())
    assert m["sharp"]["n_seeds"] == credit_params(project)["seeds"] and "p=0.5" in m["p_sweep"]
    status = run([str(BIN / "dvc"), "status", "credit"], project)
    assert "changed" not in status.stdout
    res = run([str(BIN / "dlab"), "query", "SELECT count(*) AS n FROM credit", "--format", "csv"], project)
    assert int(res.stdout.splitlines()[1]) > 0
