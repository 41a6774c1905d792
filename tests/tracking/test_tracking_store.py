"""MLflow wrapper (temporary sqlite store per test), trajectory store, summaries and `dlab query`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.params.root import TrackingParams
from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.tracking.compare import compare_runs
from delegation_lab.query.sealed import run_query
from delegation_lab.pipeline.store import TrajectoryWriter, connect, write_summaries
from delegation_lab.tracking.tracker import Tracker, owner_is_gone, owner_tags, project_root, resolve_uri

from tests.conftest import BIN, REPO, run


@pytest.fixture
def tracker(tmp_path: Path) -> Tracker:
    return Tracker(TrackingParams(uri="sqlite:///mlflow.db"), root=tmp_path)


def test_uri_resolves_against_the_repo_root_also_from_dvc_exp_copies(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert resolve_uri("sqlite:///mlflow.db", tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert resolve_uri("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    assert resolve_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"
    temp_copy = tmp_path / ".dvc" / "tmp" / "exps" / "tmpab12cd"
    temp_copy.mkdir(parents=True)
    monkeypatch.setenv("DVC_ROOT", str(temp_copy))
    assert project_root() == tmp_path.resolve()


def test_parent_and_child_runs_with_series(tracker: Tracker, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DVC_EXP_NAME", "exp-1")
    artifact = tmp_path / "plot.csv"
    artifact.write_text("x,y\n1,2\n")
    with tracker.stage_run("coordinator", "coordinator", {"lr": 0.001, "nested": {"a": 1}}) as stage:
        for seed in (0, 1):
            with stage.child("dqn_map", seed=seed, params={"hidden": 128}) as child:
                child.log_series({"train/return": [float(seed + k) for k in range(1500)]})
                child.log_metrics({"eval/accuracy": 0.9 + seed / 100})
                child.log_artifact(artifact)
        with stage.child("always_a", seed=0) as child:
            child.log_metrics({"eval/accuracy": 0.97})
    client = tracker.client
    exp = client.get_experiment_by_name("coordinator")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert parent.data.tags["dvc_exp_name"] == "exp-1" and len(parent.data.tags["params_hash"]) == 16
    assert parent.data.params["nested.a"] == "1" and parent.info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 3
    child = next(r for r in children if r.data.tags.get("seed") == "1")
    history = client.get_metric_history(child.info.run_id, "train/return")
    # at most series_points (30) points, each the mean of its 50 episodes at the last one's step
    assert len(history) == 30 and history[-1].step == 1499 and history[-1].value == pytest.approx(1 + 1474.5)
    assert sorted(a.path for a in client.list_artifacts(child.info.run_id)) == ["curves.parquet", "plot.csv"]
    full = pl.read_parquet(client.download_artifacts(child.info.run_id, "curves.parquet", str(tmp_path)))
    assert full.height == 1500 and full["step"].max() == 1499 and full["value"].max() == 1500.0
    table = compare_runs(tracker.uri, "coordinator", ["eval/accuracy"])
    dqn = table.filter(pl.col("method") == "dqn_map").row(0, named=True)
    assert dqn["n_seeds"] == 2 and dqn["eval/accuracy mean"] == pytest.approx(0.905)
    with pytest.raises(InputError, match="unknown metric"):
        compare_runs(tracker.uri, "coordinator", ["nope"])

    # the same table through `dlab runs compare`, with the store found from a params file
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    cli = CliRunner()
    base = ["runs", "compare", "--study", "coordinator", "--params", str(tmp_path / "params.yaml")]
    result = cli.invoke(app, [*base, "--metric", "eval/accuracy", "--format", "csv", "--out", str(tmp_path / "t.csv")])
    assert result.exit_code == 0, result.output
    csv = pl.read_csv(tmp_path / "t.csv")
    assert csv.filter(pl.col("method") == "dqn_map")["eval/accuracy mean"].item() == pytest.approx(0.905)
    shown = cli.invoke(app, base)
    assert shown.exit_code == 0 and "| always_a |" in shown.output and "eval/accuracy std" in shown.output
    bad = cli.invoke(app, [*base, "--format", "xlsx"])
    assert bad.exit_code == 1 and "--format 'xlsx'" in bad.output


def test_failed_stage_marks_runs_failed(tracker: Tracker):
    with pytest.raises(RuntimeError):
        with tracker.stage_run("s", "stage") as stage:
            with stage.child("m", seed=0):
                raise RuntimeError("boom")
    runs = tracker.client.search_runs([tracker.experiment_id("s")])
    assert {r.info.status for r in runs} == {"FAILED"}


STAGE_THEN_HANG = """
import sys, time
from pathlib import Path
from delegation_lab.params.root import TrackingParams
from delegation_lab.tracking.tracker import Tracker

tracker = Tracker(TrackingParams(uri="sqlite:///mlflow.db"), root=Path(sys.argv[1]))
with tracker.stage_run("study", "stage") as stage:
    with stage.child("m", seed=0) as child:
        child.log_metrics({"score": 99.0})  # a partial result that must never be reported
        print("running", flush=True)
        time.sleep(600)
"""


def start_hanging_stage(root: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", STAGE_THEN_HANG, str(root)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "running"
    return proc


@pytest.mark.processes
def test_runs_of_a_killed_stage_are_marked_failed_and_never_compared(tmp_path: Path):
    tracker = Tracker(TrackingParams(uri="sqlite:///mlflow.db", keep_runs=10), root=tmp_path)  # no replacing here
    with tracker.stage_run("study", "stage") as stage, stage.child("m", seed=0) as child:
        child.log_metrics({"score": 1.0})
    killed = start_hanging_stage(tmp_path)
    alive = start_hanging_stage(tmp_path)  # a concurrent run whose process still lives
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    try:
        client, exp = tracker.client, tracker.experiment_id("study")

        def by_status() -> dict[str, list]:
            runs = client.search_runs([exp])
            return {s: sorted(r.data.tags.get("dlab.pid", "") for r in runs if r.info.status == s)
                    for s in ("RUNNING", "FAILED", "FINISHED")}

        assert by_status()["RUNNING"] == sorted([str(killed.pid)] * 2 + [str(alive.pid)] * 2)
        # the killed run started last, yet the table is the finished run's
        assert compare_runs(tracker.uri, "study", ["score"])["score mean"].to_list() == [1.0]

        with tracker.stage_run("study", "stage"):
            status = by_status()
            assert status["FAILED"] == [str(killed.pid)] * 2  # its parent and its child
            assert sorted(set(status["RUNNING"])) == sorted({str(alive.pid), str(os.getpid())})
            failed = [r for r in client.search_runs([exp]) if r.info.status == "FAILED"]
            assert all("ended without closing this run" in r.data.tags["dlab.failure"] for r in failed)
            assert all(r.info.end_time for r in failed)
        assert compare_runs(tracker.uri, "study", ["score"])["score mean"].to_list() == [1.0]
    finally:
        alive.kill()
        alive.wait(timeout=30)


def test_runs_of_another_host_or_without_owner_are_left_alone():
    mine = {"dlab.host": socket.gethostname(), "dlab.pid": "999999999", "dlab.pid_start": "1"}
    assert owner_is_gone(mine)
    assert not owner_is_gone({**mine, "dlab.host": "elsewhere"})
    assert not owner_is_gone({})
    here = owner_tags()
    assert not owner_is_gone(here)
    assert owner_is_gone({**here, "dlab.pid_start": "0"})  # the pid now belongs to another process


def test_experiment_creation_race(tracker: Tracker):
    ids, errors = [], []

    def create():
        try:
            ids.append(Tracker(tracker.params, tracker.root).experiment_id("raced"))
        except Exception as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(ids)) == 1


def test_disabled_tracking_is_a_noop(tmp_path: Path):
    off = Tracker(TrackingParams(enabled=False), root=tmp_path)
    with off.stage_run("s", "stage") as stage, stage.child("m", seed=0) as child:
        child.log_series({"x": [1.0]})
        child.log_metrics({"y": 2})
    assert not (tmp_path / "mlflow.db").exists()


def steps(n: int, episode: int = 0) -> list[dict]:
    return [{"episode": episode, "step": k, "split": "train", "item_id": f"i{k}", "action": "A", "executors": ["A"],
             "correct": k % 2 == 0, "cost_usd": 0.001, "reward": 1.0, "calls": 1, "extra": {"attempt": 1}} for k in range(n)]


def test_trajectory_writer_partitions_and_replaces(tmp_path: Path):
    layout = Layout(tmp_path)
    with TrajectoryWriter(layout, "study1", flush_rows=5) as w:
        for episode in range(3):
            w.add("m1", 0, steps(4, episode))  # 8 rows buffered -> one part flushed, 4 left for commit
        w.add("m1", 1, steps(3))
        w.add("m2", 0, pl.DataFrame(steps(4)).with_columns(pl.lit('{"attempt": 1}').alias("extra")))
    parts = sorted(p.relative_to(layout.trajectories_dir).as_posix() for p in layout.trajectories_dir.rglob("*.parquet"))
    assert parts[0] == "study=study1/method=m1/seed=0/part-00000.parquet" and len(parts) == 4
    con = connect(layout)
    assert con.sql("select count(*) from trajectories").fetchall() == [(19,)]
    assert con.sql("select seed, count(*) from trajectories where method='m1' group by 1 order by 1").fetchall() == [(0, 12), (1, 3)]
    assert con.sql("select executors[1] from trajectories limit 1").fetchall() == [("A",)]
    with TrajectoryWriter(layout, "study1") as w:
        w.add("m3", 0, steps(2))
    con = connect(layout)
    assert con.sql("select distinct method from trajectories").fetchall() == [("m3",)]  # old rows gone
    with pytest.raises(RuntimeError):
        with TrajectoryWriter(layout, "study1") as w:
            w.add("m4", 0, steps(2))
            raise RuntimeError("crash mid-study")
    assert connect(layout).sql("select distinct method from trajectories").fetchall() == [("m3",)]  # old kept
    assert not list(layout.trajectories_dir.glob(".staging-*"))


def test_trajectory_writer_rejects_bad_columns(tmp_path: Path):
    with TrajectoryWriter(Layout(tmp_path), "s") as w:
        with pytest.raises(InputError, match=r"unknown column\(s\) \['rewards'\]"):
            w.add("m", 0, [{**steps(1)[0], "rewards": 1.0}])
        bad = steps(1)[0]
        del bad["calls"]
        with pytest.raises(InputError, match=r"missing column\(s\) \['calls'\]"):
            w.add("m", 0, [bad])
        with pytest.raises(InputError, match="wrong type"):
            w.add("m", 0, [{**steps(1)[0], "reward": "high"}])
        with pytest.raises(InputError, match="cost_usd is Boolean, the contract says Float64"):
            w.add("m", 0, [{**steps(1)[0], "cost_usd": True}])
        with pytest.raises(InputError, match="item_id is Int64, the contract says String"):
            w.add("m", 0, [{**steps(1)[0], "item_id": 5}])
    with pytest.raises(InputError, match="cannot name a partition"):
        TrajectoryWriter(Layout(tmp_path), "a/b")


def test_summaries_and_query_refusals(tmp_path: Path):
    layout = Layout(tmp_path)
    write_summaries(layout, "s", [{"study": "s", "method": "m", "seed": 0, "split": "test", "operating_point": "default",
                                   "accuracy": 0.9, "cost_per_item_usd": 0.001, "n_items": 10, "dataset": "arith"}])
    assert run_query(layout, "select accuracy, return from summaries").to_dicts() == [{"accuracy": 0.9, "return": None}]
    assert run_query(layout, "select count(*) as n from frontier")["n"][0] == 0  # missing table: an empty view
    for bad in ["drop view summaries", "copy summaries to 'x.csv'", "select 1; select 2", "attach 'x.db'"]:
        with pytest.raises(InputError):
            run_query(layout, bad)
    # the views are readable, no file is: not on the machine, not even the views' own files
    outside = tmp_path.parent / f"{tmp_path.name}-outside.csv"
    outside.write_text("secret\n1\n")
    summary_file = next((tmp_path / "results" / "summaries").glob("*.parquet"))
    for peek in [f"select * from read_csv('{outside}')", "select * from read_text('/etc/hostname')",
                 f"select count(*) as n from read_parquet('{summary_file}')"]:
        with pytest.raises(InputError, match="disabled by configuration"):
            run_query(layout, peek)
    with pytest.raises(InputError):
        run_query(layout, "select current_setting('enable_external_access') as x; set enable_external_access = true")
    with pytest.raises(InputError, match="summaries of s"):
        write_summaries(layout, "s", [{"study": "s", "method": "m"}])
    proc = run([str(BIN / "dlab"), "query", "--root", str(tmp_path), "--format", "csv", "select method, accuracy from summaries"], tmp_path)
    assert proc.stdout.strip().splitlines() == ["method,accuracy", "m,0.9"]
    refused = run([str(BIN / "dlab"), "query", "--root", str(tmp_path), "delete from summaries"], tmp_path, check=False)
    assert refused.returncode == 2 and "only read queries" in refused.stderr


def test_paper_figures_pair_with_ours_and_dlab_report(tmp_path: Path):
    from delegation_lab.reporting.paper import paper_vs_ours

    metrics = {"management": {"paper": {"dqn_map": {"ret": 27.56, "note": "table 1"}}, "dqn_map": {"ret": 27.0}}}
    rows = {r["metric"]: r for r in paper_vs_ours(metrics)}
    assert rows["management.dqn_map.ret"]["difference"] == pytest.approx(-0.56)
    assert rows["management.dqn_map.note"]["ours"] is None and rows["management.dqn_map.note"]["difference"] is None
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "coordinator.json").write_text(__import__("json").dumps(metrics))
    (tmp_path / "metrics" / "solve.json").write_text('{"A": {"accuracy": 0.9}}')
    out = run([str(BIN / "dlab"), "report"], tmp_path).stdout
    assert "## coordinator" in out and "| management.dqn_map.ret | 27.56 | 27 | -0.56 |" in out and "solve" not in out


def test_a_password_in_a_url_param_is_masked_before_logging():
    from delegation_lab.tracking.tracker import without_url_passwords

    assert without_url_passwords("https://bob:s3cr3t-key@api.example/v1") == "https://bob:***@api.example/v1"
    assert without_url_passwords('{"base_url": "http://u:p@127.0.0.1:8000"}') == '{"base_url": "http://u:***@127.0.0.1:8000"}'
    assert without_url_passwords("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_a_stage_rerun_replaces_its_runs_and_prune_keeps_the_newest(tracker: Tracker, tmp_path: Path):
    def stage_run(value: float, fail: bool = False) -> None:
        with tracker.stage_run("study", "stage") as stage:
            for seed in (0, 1):
                with stage.child("m", seed=seed) as child:
                    child.log_series({"train/x": [value] * 300})
                    child.log_metrics({"eval/x": value})
            if fail:
                raise RuntimeError("boom")

    def runs() -> list:
        return tracker.client.search_runs([tracker.client.get_experiment_by_name("study").experiment_id], run_view_type=3)

    stage_run(1.0)
    stage_run(2.0)
    assert len(runs()) == 3  # the second run replaced the first: one parent, two children
    assert compare_runs(tracker.uri, "study", ["eval/x"])["eval/x mean"].item() == 2.0
    with pytest.raises(RuntimeError):
        stage_run(3.0, fail=True)  # a failed rerun deletes nothing
    assert len(runs()) == 6
    assert compare_runs(tracker.uri, "study", ["eval/x"])["eval/x mean"].item() == 2.0
    rows = connect_sqlite(tracker).execute("SELECT count(*) FROM metrics").fetchone()[0]
    assert rows == 4 * (30 + 1)  # four children x (a 30-point curve + one final); parents log none
    assert len(tracker.prune("study", keep=1)) == 1 and len(runs()) == 3


def test_a_rerun_replaces_only_the_runs_of_its_own_dvc_experiment(tracker: Tracker, monkeypatch):
    """`dvc queue start -j 2` runs the same stage for two experiments: each keeps its run."""
    def stage_run(exp_name: str) -> None:
        monkeypatch.setenv("DVC_EXP_NAME", exp_name)
        with tracker.stage_run("data", "solve@A", {"skill": exp_name}):
            pass

    def names() -> list[str]:
        found = tracker.client.get_experiment_by_name("data")
        return sorted(r.data.tags["dvc_exp_name"] for r in tracker.client.search_runs([found.experiment_id], run_view_type=3))

    for exp_name in ("skill-a", "skill-b", "skill-a", ""):
        stage_run(exp_name)
    assert names() == ["", "skill-a", "skill-b"]  # skill-a's rerun replaced its first run only
    assert len(tracker.prune("data", keep=1)) == 2 and len(names()) == 1  # `dlab runs prune`: per stage


def connect_sqlite(tracker: Tracker):
    import sqlite3

    return sqlite3.connect(tracker.uri[len("sqlite:///"):])
