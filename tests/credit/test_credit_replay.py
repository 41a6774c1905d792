"""`dlab credit`: per-agent Shapley credit of stored trajectories replayed coalition by coalition —
the coordinator's attempts (on a fake answer cache) and this study's own team rollouts — checked
against the stored rewards, the axioms and a by-hand value function; and the refusals."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
import yaml
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.coordinator.actions import delegation_actions
from delegation_lab.coordinator.params import CoordinatorParams, DqnParams, SweepParams
from delegation_lab.coordinator.results import trajectory_frame
from delegation_lab.coordinator.study import CoordinatorStudy, prepare_inputs
from delegation_lab.credit.params import CreditParams, TrajectoryParams
from delegation_lab.credit.replay import compute_credit
from delegation_lab.credit.report import test_frames as study_test_frames
from delegation_lab.credit.report import train_frames as study_train_frames
from delegation_lab.credit.shapley import shapley_by_definition
from delegation_lab.credit.study import run_study
from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.store import TrajectoryWriter, connect
from delegation_lab.pipeline.tables import read_labeled_answers

from tests.conftest import REPO
from tests.fake_cache import write_fake_cache

SOLVERS = ["A", "B", "C"]


@pytest.fixture(scope="module")
def coordinator_project(tmp_path_factory) -> Path:
    """A fake cache, a tiny coordinator run of both environments, its trajectories and a params.yaml."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("coord")
    layout = write_fake_cache(root)
    params = CoordinatorParams(seeds=2, episodes=12, late_episodes=4, packet_size=8,
                               methods=["dqn_map", "always_a", "random", "mgmt_policy"],
                               dqn=DqnParams(learning_starts=20, epsilon_decay_steps=60, target_sync=20, batch_size=8, hidden=16),
                               sweep=SweepParams(seeds=0))
    env_layout, data = prepare_inputs(params, SOLVERS, None, layout)
    runs = CoordinatorStudy(params, data, env_layout, log=lambda _: None).run()
    with TrajectoryWriter(layout, "coordinator") as writer:
        for run in runs:
            for lane in range(run.lanes):
                for which, offset in (("train", 0), ("test", params.episodes)):
                    writer.add(run.names[lane], int(run.seeds[lane]), trajectory_frame(run, lane, which, offset))
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["tracking"]["enabled"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    return root


def credit_of(root: Path, **kwargs) -> pl.DataFrame:
    return compute_credit(Layout(root), "coordinator", params_path=root / "params.yaml", **kwargs).frame


def joined(root: Path, frame: pl.DataFrame) -> pl.DataFrame:
    """Each attempt's credit rows beside its stored trajectory row."""
    con = connect(Layout(root))
    try:
        rows = con.sql("SELECT method, seed, split, episode, step, action, reward, extra FROM trajectories "
                       "WHERE study = 'coordinator'").pl()
    finally:
        con.close()
    return frame.join(rows, on=["method", "seed", "split", "episode", "step"], how="left")


def test_coordinator_credit_replays_the_stored_rewards_and_is_efficient(coordinator_project):
    frame = credit_of(coordinator_project, split="all")
    assert set(frame["agent"].unique()) == set(SOLVERS) and set(frame["role"].unique()) == {"solver"}
    assert (frame["n_agents"] == 3).all() and (frame["estimator"] == "exact").all()
    per = joined(coordinator_project, frame).group_by("method", "seed", "split", "episode", "step").agg(
        pl.col("credit").sum(), pl.col("v_full").first(), pl.col("v_empty").first(), pl.col("reward").first(),
        pl.col("extra").first())
    assert per["reward"].null_count() == 0
    np.testing.assert_allclose(per["v_full"], per["reward"], atol=1e-12)  # v(N) is the stored reward
    np.testing.assert_allclose(per["credit"], per["v_full"] - per["v_empty"], atol=1e-12)  # efficiency
    # the item's last attempt: the 3rd, or the 1st where the route is one attempt long (always-A, the oracle)
    limit = per["extra"].str.json_path_match("$.attempt_limit").cast(pl.Int64).fill_null(3)
    last = per["extra"].str.json_path_match("$.attempt").cast(pl.Int64) == limit
    assert (limit == 1).any()
    np.testing.assert_allclose(per["v_empty"], np.where(last, -1.0, 0.0))  # nobody answers: fail, no cost


def test_always_a_gives_everything_to_a(coordinator_project):
    frame = credit_of(coordinator_project, methods=["management.always_a", "delegation.always_a"])
    others = frame.filter(pl.col("agent") != "A")
    assert (others["credit"].abs() < 1e-15).all()  # null players
    a = frame.filter(pl.col("agent") == "A")
    np.testing.assert_allclose(a["credit"], a["v_full"] - a["v_empty"])


def test_delegation_credit_matches_a_value_function_written_by_hand(coordinator_project):
    """An independent v(S) from the History Matters rules: answerers in S answer; the edge fee into a
    member of S is alpha x its expected cost; failure on the last attempt costs the penalty."""
    root = coordinator_project
    frame = credit_of(root, methods=["delegation.random"], seeds=[0])
    rows = joined(root, frame).filter(pl.col("agent") == "A").head(40)
    table = delegation_actions(tuple(SOLVERS))
    labeled = read_labeled_answers(Layout(root))
    from delegation_lab.coordinator.data import load_coordinator_data

    data = load_coordinator_data(Layout(root), SOLVERS, False, None)
    expected = {i: data.test.expected_cost[k] for k, i in enumerate(data.test.item_ids)}
    checked = 0
    for r in rows.iter_rows(named=True):
        a = table.names.index(r["action"])
        ans, edges = table.answers[a], table.edges[a]
        item = labeled.filter(pl.col("item_id") == r["item_id"]).sort("solver")
        right = dict(zip(item["solver"], item["correct"], strict=True))
        cost = dict(zip(item["solver"], item["cost_usd"], strict=True))
        last = '"attempt":3' in r["extra"]

        def v(s: frozenset, ans=ans, edges=edges, right=right, cost=cost, last=last, item_id=r["item_id"]) -> float:
            members = [SOLVERS[i] for i in s]
            success = any(ans[SOLVERS.index(m)] and right[m] for m in members)
            solve = sum(cost[m] for m in members if ans[SOLVERS.index(m)])
            fee = 0.05 * sum(edges[SOLVERS.index(m)] * expected[item_id][SOLVERS.index(m)] for m in members)
            return float(success) - 100.0 * (solve + fee) - (1.0 if (last and not success) else 0.0)

        phi = shapley_by_definition(v, 3)
        got = frame.filter((pl.col("episode") == r["episode"]) & (pl.col("step") == r["step"])).sort("agent")["credit"]
        np.testing.assert_allclose(got.to_numpy(), phi, atol=1e-12)
        assert v(frozenset({0, 1, 2})) == pytest.approx(r["reward"], abs=1e-12)
        checked += 1
    assert checked == 40


def test_a_changed_fee_no_longer_replays_and_says_why(coordinator_project, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(coordinator_project, root)
    raw = yaml.safe_load((root / "params.yaml").read_text())
    raw["coordinator"]["handoff_fee"] = 0.2
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError, match=r"do not replay to their stored reward.*handoff_fee"):
        credit_of(root)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"methods": ["management.nope"]}, "not among the coordinator trajectories' methods"),
    ({"seeds": [7]}, "not among the coordinator trajectories' seeds"),
    ({"split": "dev"}, "--split must be train, test or all"),
    ({"estimator": "exact", "exact_max": 2}, "above the exact limit of 2 agents"),
    ({"estimator": "auto", "exact_max": 2}, "pass --samples N"),
])
def test_bad_requests_are_refused(coordinator_project, kwargs, message):
    with pytest.raises(InputError, match=message):
        credit_of(coordinator_project, **kwargs)


def test_monte_carlo_beyond_the_limit_brackets_the_exact_credit(coordinator_project):
    exact = credit_of(coordinator_project, methods=["delegation.random"], seeds=[1])
    mc = credit_of(coordinator_project, methods=["delegation.random"], seeds=[1], exact_max=2, samples=300,
                   confidence=0.999)
    both = exact.join(mc, on=["split", "episode", "step", "agent"], suffix="_mc")
    assert (both["estimator_mc"] == "monte_carlo").all()
    inside = (both["credit"] >= both["ci_low_mc"] - 1e-12) & (both["credit"] <= both["ci_high_mc"] + 1e-12)
    assert inside.mean() > 0.99


def test_studies_without_a_replayer_or_trajectories_are_refused(coordinator_project, tmp_path):
    with pytest.raises(InputError, match="cannot replay a coalition.*coordinator, credit"):
        compute_credit(Layout(coordinator_project), "market", params_path=coordinator_project / "params.yaml")
    shutil.copytree(coordinator_project, tmp_path / "p", ignore=shutil.ignore_patterns("results"))
    with pytest.raises(InputError, match="no trajectories of study 'coordinator'.*dvc repro coordinator"):
        credit_of(tmp_path / "p")


def test_the_cli_writes_a_table_duckdb_reads(coordinator_project):
    runner = CliRunner()
    res = runner.invoke(app, ["credit", "--study", "coordinator", "--root", str(coordinator_project),
                              "--method", "delegation.dqn_map"])
    assert res.exit_code == 0, res.output
    assert "coalitions/s" in res.output and "delegation.dqn_map" in res.output
    path = Layout(coordinator_project).credit("coordinator")
    assert path.exists()
    con = connect(Layout(coordinator_project))
    try:
        n = con.sql("SELECT count(DISTINCT (seed, episode, step)) n, count(*) m FROM credit WHERE method = 'delegation.dqn_map'").fetchall()[0]
        stored = con.sql("SELECT count(*) FROM trajectories WHERE method = 'delegation.dqn_map' AND split = 'test'").fetchall()[0][0]
    finally:
        con.close()
    assert n[1] == 3 * n[0] and n[0] == stored  # every held-out attempt once, three agents each
    bad = runner.invoke(app, ["credit", "--study", "history_game", "--root", str(coordinator_project)])
    assert bad.exit_code == 1 and "cannot replay a coalition" in bad.output
    bad = runner.invoke(app, ["credit", "--study", "coordinator", "--root", str(coordinator_project), "--estimator", "nope"])
    assert bad.exit_code == 2


# ----------------------------------------------------------------------------- the credit study


@pytest.fixture(scope="module")
def credit_project(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("credit")
    p = CreditParams(seeds=2, iterations=4, tasks_per_batch=4, train_tasks=100, test_tasks=40, eval_replicates=2,
                     eval_every=2, methods=["single", "no_shapley", "sharp"], p_sweep=[],
                     trajectories=TrajectoryParams(train_every=2, train_tasks=2))
    study = run_study(p, log=lambda _: None)
    with TrajectoryWriter(Layout(root), "credit") as writer:
        for m in study.methods:
            for seed, frame in study_test_frames(m, study) + study_train_frames(m, study):
                writer.add(m.spec.name, seed, frame)
    return root, study


def test_own_trajectories_replay_to_the_credit_computed_in_training(credit_project):
    root, study = credit_project
    run = compute_credit(Layout(root), "credit", split="all")
    assert run.skipped == ["single/seed=0", "single/seed=1"]
    con = connect(Layout(root))
    try:
        stored = con.sql("""SELECT method, seed, split, episode, executors[1] AS agent,
                                   CAST(json_extract(extra, '$.rollout') AS BIGINT) AS rollout,
                                   CAST(json_extract(extra, '$.credit') AS DOUBLE) AS stored
                            FROM trajectories WHERE study = 'credit' AND method = 'sharp'""").pl()
    finally:
        con.close()
    both = run.frame.join(stored, on=["method", "seed", "split", "episode", "rollout", "agent"], how="inner")
    assert both.height == stored.height > 0
    np.testing.assert_allclose(both["credit"], both["stored"], atol=1e-12)  # sharp: p = 1, every agent credited
    sharp = run.frame.filter(pl.col("method") == "sharp", pl.col("split") == "test")
    assert set(sharp["role"].unique()) == {"planner", "worker"}
    assert sharp.filter(pl.col("role") == "planner").height == 2 * study.eval_set.n
    # efficiency per rollout
    per = run.frame.group_by("method", "seed", "split", "episode", "rollout").agg(
        pl.col("credit").sum(), pl.col("v_full").first(), pl.col("v_empty").first())
    np.testing.assert_allclose(per["credit"], per["v_full"] - per["v_empty"], atol=1e-12)


def test_a_single_agent_run_has_nothing_to_split(credit_project):
    root, _ = credit_project
    with pytest.raises(InputError, match="single agent"):
        compute_credit(Layout(root), "credit", methods=["single"])
