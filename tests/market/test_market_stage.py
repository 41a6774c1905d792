"""Stage `market`: bad input fails before any work; the smoke DAG's `market` stage (the session's
`smoke_dag`) writes every contract (slow)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.reporting.paper import paper_vs_ours
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA, TRAJECTORY_SCHEMA

from tests.conftest import BIN, REPO, run, stage_here

RAW = yaml.safe_load((REPO / "params.yaml").read_text())


def run_stage(tmp_path: Path, mutate) -> tuple[int, str]:
    raw = copy.deepcopy(RAW)
    raw["tracking"]["enabled"] = False
    mutate(raw)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    proc = stage_here(tmp_path, "market")
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "results").exists(), "nothing may be written"
    return proc.returncode, proc.stderr


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda r: r["market"]["chain"]["graph"].update(targets=["Ko", "Jp"]), "'Jp' is unreachable from the source 'Fr'"),
        (lambda r: r["market"]["chain"]["graph"]["edges"][0].update(cost=-0.5), "market.chain.graph.edges.0.cost"),
        (lambda r: r["market"]["chain"].update(densities=[0]), "market.chain.densities.0"),
        (lambda r: r["market"].update(protocols=["english"]), "market.protocols.0"),
        (lambda r: r["market"].update(bidders=["ucb"]), "market.bidders.0"),
    ],
)
def test_bad_params_exit_2_naming_the_key(tmp_path, mutate, needle):
    code, err = run_stage(tmp_path, mutate)
    assert code == 2 and needle in err, err


def test_unknown_solver_exits_2_and_missing_labels_exit_1_before_any_work(tmp_path):
    code, err = run_stage(tmp_path, lambda r: r["market"]["answers"].update(solvers=["A", "Z"]))
    assert code == 2 and "market.answers.solvers: unknown solver(s) ['Z']" in err
    code, err = run_stage(tmp_path, lambda r: None)
    assert code == 1 and "labels not found" in err and "dvc repro" in err


@pytest.fixture(scope="module")
def repro(smoke_dag) -> Path:
    project, out = smoke_dag
    assert "Running stage 'market'" in out
    return project


@pytest.mark.slow
def test_repro_market_writes_metrics_summaries_trajectories_plots(repro):
    project = repro
    metrics = json.loads((project / "metrics" / "market.json").read_text())
    params = yaml.safe_load((project / "params.yaml").read_text())["market"]
    for protocol in ("first_price", "second_price", "ccv"):
        for bidder in metrics["chain"][protocol]:
            for n in params["chain"]["densities"]:
                cell = metrics["chain"][protocol][bidder][f"N{n}"]
                assert {"success", "route_cost", "margin", "bankruptcies", "subsidy"} <= set(cell)
    assert set(metrics["chain"]["first_price"]) == {"mirror_descent", "thompson", "bayes_optimal", "ppo", "truthful"}
    assert set(metrics["chain"]["second_price"]) == {"truthful"} and set(metrics["chain"]["ccv"]) == {"truthful"}
    pairs = {r["metric"]: r for r in paper_vs_ours(metrics)}
    assert pairs["chain.first_price.mirror_descent.N2.route_cost"]["paper"] == 0.04
    assert isinstance(pairs["chain.first_price.mirror_descent.N2.route_cost"]["ours"], float)
    # summaries for the frontier: test split, one row per method x seed x operating point
    summaries = pl.read_parquet(project / "results" / "summaries" / "market.parquet")
    assert list(summaries.columns) == list(SUMMARY_SCHEMA)
    assert summaries.height == 7 * params["seeds"] * len(params["answers"]["reward_multiples"])
    assert set(summaries["split"]) == {"test"} and summaries.join(pl.read_parquet(project / "results" / "runs" / "market.parquet"), on=["study", "method", "seed", "split", "operating_point"], how="left")["run_id"].null_count() == 0
    assert summaries["verifier"].n_unique() == 1 and summaries["verifier"][0] == metrics["verifier"]["name"]
    outcomes = pl.read_parquet(project / "results" / "outcomes" / "market.parquet")
    keys = ["method", "operating_point", "seed"]
    assert outcomes.select(keys).unique().sort(keys).equals(summaries.select(keys).sort(keys))
    cell = next(iter(metrics["answers"]["first_price"]["mirror_descent"].values()))
    assert cell["accuracy_ci"][0] <= cell["accuracy"] <= cell["accuracy_ci"][1]
    # trajectories: every auction of the final / test rounds, queried through DuckDB
    query = run([str(BIN / "dlab"), "query", "--format", "json",
                 "SELECT count(*) AS n, count(DISTINCT method) AS methods FROM trajectories WHERE study = 'market'"], project)
    stats = json.loads(query.stdout)[0]
    assert stats["n"] == metrics["run"]["trajectory_rows"] and stats["methods"] == 7 * 3 + 7 * 2
    parts = list((project / "results" / "trajectories" / "study=market").rglob("*.parquet"))
    assert parts and list(pl.read_parquet(parts[0]).columns) == list(TRAJECTORY_SCHEMA)
    for name in ("chain_density.png", "chain_curves.png", "chain_prices.png", "answers_frontier.png", "answers_frontier.csv"):
        assert (project / "plots" / "market" / name).stat().st_size > 500
    assert len(list((project / "plots" / "market" / "chain_curves").glob("*.csv"))) == 21
    # MLflow: experiment `market`, a child per chain cell x seed and per answers method x seed
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    exp = client.get_experiment_by_name("market")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == (7 * 3 + 7) * params["seeds"]
    chain_child = next(r for r in children if r.data.tags.get("domain") == "chain")
    assert "final/success" in chain_child.data.metrics
    assert len(client.get_metric_history(chain_child.info.run_id, "train/success")) > 10


@pytest.mark.slow
def test_second_repro_is_a_noop(repro):
    again = run([str(BIN / "dvc"), "repro", "market"], repro).stdout
    assert "Running stage" not in again
