"""history_game: the stage — bad input fails before any work; the smoke DAG's `history_game` stage
(the session's `smoke_dag`) writes metrics (paper beside ours), plots, trajectories and the MLflow
experiment."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.reporting.paper import paper_vs_ours

from tests.conftest import BIN, REPO, run, stage_here, upstream

RAW = yaml.safe_load((REPO / "params.yaml").read_text())


def stage_in(tmp_path: Path, section: dict) -> tuple[int, str]:
    raw = copy.deepcopy(RAW)
    raw["history_game"] = section
    raw["tracking"] = {"enabled": False}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    proc = stage_here(tmp_path, "history_game")
    return proc.returncode, proc.stderr


def test_bad_specs_fail_before_any_work(tmp_path: Path):
    code, err = stage_in(tmp_path, {"equilibria": {"games": ["motivating_example", "nope.yaml"]}})
    assert code == 1 and "history_game.equilibria.games[1]: nope.yaml: no such spec file" in err
    spec = yaml.safe_load((REPO / "src/delegation_lab/games/builtin/motivating_example.yaml").read_text())
    spec["transitions"][0]["next"] = {"s1": 0.5, "s3": 0.5}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(spec))
    code, err = stage_in(tmp_path, {"equilibria": {"games": ["bad.yaml"]}})
    assert code == 1 and "transitions[0].next.s3: unknown state" in err and "bad.yaml" in err
    code, err = stage_in(tmp_path, {"equilibria": {"favour": "C"}})
    assert code == 1 and "history_game.equilibria.favour: player 'C' is not in game 'motivating_example'" in err
    code, err = stage_in(tmp_path, {"iql": {"episodes": 0}})
    assert code == 2 and "history_game.iql.episodes" in err
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "plots").exists() and not (tmp_path / "results").exists()


@pytest.fixture(scope="module")
def repro(smoke_dag) -> Path:
    project, out = smoke_dag
    assert "Running stage 'history_game'" in out and upstream(project, "history_game") == {"history_game"}  # no data deps
    return project


@pytest.mark.slow
def test_repro_writes_metrics_plots_trajectories_and_mlflow(repro: Path):
    project = repro
    metrics = json.loads((project / "metrics" / "history_game.json").read_text())
    me = metrics["equilibria"]["motivating_example"]
    assert me["history"] == me["paper"]["history"] and me["markov"] == me["paper"]["markov"]
    assert me["favoured"] == me["paper"]["favoured"] == {"player": "B", "values": {"A": 8.9, "B": 6.0}}
    money = metrics["money"]
    assert money["no_transfer"]["return_mean"] == money["paper"]["no_transfer"]["return_mean"] == 0.0
    assert money["transfer"]["return_mean"] == money["paper"]["transfer"]["return_mean"] == 990.0
    assert money["transfer"]["return_std"] == 0.0 and money["transfer"]["seeds"] == 3
    assert money["transfer"]["return_mean_ci"] == [money["transfer"]["return_mean"]] * 2  # every seed the same: a point interval
    lo, hi = money["no_transfer"]["train_late_return_mean_ci"]
    assert lo <= money["no_transfer"]["train_late_return_mean"] <= hi
    sweep = money["gamma_sweep"]
    assert set(sweep) == {"gamma_0p5", "gamma_0p8", "gamma_0p9", "gamma_0p99"}
    assert sweep["gamma_0p5"]["no_transfer"]["return_mean"] == money["no_transfer"]["return_mean"]
    learner = metrics["history_learner"]
    assert set(learner) == {"last_action", "last_action_untimed"} and set(learner["last_action"]) == {"gamma_0p5", "gamma_0p9"}
    assert metrics["provenance"]["money.no_transfer.return_mean"]["kind"] == "calibrated"
    assert metrics["equilibria"]["help_game_6"]["history"]["values"] == [[0.0, 0.0]]
    assert metrics["equilibria"]["reciprocity_finale"]["history_only_count"] == 3
    rows = {r["metric"]: r for r in paper_vs_ours(metrics)}
    assert rows["money.transfer.return_mean"]["difference"] == 0.0
    assert rows["equilibria.motivating_example.history.count"]["ours"] == 5

    plots = project / "plots" / "history_game"
    curve = pl.read_csv(plots / "return_transfer.csv")
    assert curve.height == 1000 and {"episode", "return", "return_std", "epsilon"} <= set(curve.columns)
    assert curve["return"][-50:].mean() > curve["return"][:50].mean()
    assert pl.read_csv(plots / "return_no_transfer.csv")["return"][-50:].mean() < 50
    assert (plots / "figure5.png").stat().st_size > 10_000 and (plots / "equilibria.png").stat().st_size > 5_000
    eq = pl.read_csv(plots / "equilibria.csv").filter(pl.col("game") == "motivating_example")
    assert eq.filter(pl.col("kind") == "history").height == 5 and eq.filter(pl.col("kind") == "markov").height == 3
    solution = json.loads((project / "results" / "history_game" / "motivating_example.json").read_text())
    assert len(solution["history"]) == 5 and solution["favoured"]["values"] == {"A": 8.9, "B": 6.0}

    q = run([str(BIN / "dlab"), "query", "--format", "json",
             "SELECT method, count(DISTINCT seed) AS seeds, count(*) AS n, "
             "sum(CASE WHEN split = 'eval' THEN reward ELSE 0 END) AS eval_reward "
             "FROM trajectories WHERE study = 'history_game' GROUP BY method ORDER BY method"], project).stdout
    got = {r["method"]: r for r in json.loads(q)}
    # smoke: 3 seeds, every 5th of 1000 episodes + the greedy episode, 20 steps each
    assert got["iql_no_transfer"]["seeds"] == 3 and got["iql_no_transfer"]["n"] == 3 * (200 + 1) * 20
    assert got["iql_transfer"]["eval_reward"] == 3 * 2 * 990 and got["iql_no_transfer"]["eval_reward"] == 0

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    exp = client.get_experiment_by_name("history_game")
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2 * 3 + 3  # per method x seed, and one per game
    child = next(r for r in children if r.data.tags.get("method") == "iql_transfer")
    assert child.data.metrics["eval/return"] == 990.0
    assert len(client.get_metric_history(child.info.run_id, "train/return")) == min(1000 // 20, 30)  # tracking.series_points


@pytest.mark.slow
def test_second_repro_is_a_noop(repro: Path):
    again = run([str(BIN / "dvc"), "repro", "history_game"], repro).stdout
    assert "Running stage" not in again


def test_two_workers_give_the_single_process_figures(tmp_path: Path):
    """history_game.workers: the transfer condition trained in a spawned process changes no figure."""
    out = {}
    for workers in (1, 2):
        folder = tmp_path / f"w{workers}"
        folder.mkdir()
        code, err = stage_in(folder, {"iql": {"episodes": 200, "seeds": 2}, "workers": workers})
        assert code == 0, err
        metrics = json.loads((folder / "metrics" / "history_game.json").read_text())
        metrics.pop("timing")
        out[workers] = (metrics, [(folder / "plots" / "history_game" / f"return_{c}.csv").read_text()
                                  for c in ("no_transfer", "transfer")])
    assert out[1] == out[2]
