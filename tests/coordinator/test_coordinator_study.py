"""The coordinator study in-process on a small fake cache: bad input refused before training, every
method run on matched packets, metrics / summaries / trajectories consistent with the episodes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
import yaml

from delegation_lab.params.root import load_params, parse_params
from delegation_lab.coordinator.params import CoordinatorParams, DqnParams, SweepParams
from delegation_lab.coordinator.results import (
    PAPER_TABLES,
    late_per_lane,
    outcome_frame,
    study_metrics,
    summary_rows,
    trajectory_frame,
)
from delegation_lab.coordinator.study import CoordinatorStudy, prepare_inputs
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA, TRAJECTORY_SCHEMA
from delegation_lab.pipeline.tables import write_parquet_atomic

from tests.conftest import REPO
from tests.fake_cache import write_fake_cache

SOLVERS = ["A", "B", "C"]


def small_params(**overrides) -> CoordinatorParams:
    base = dict(seeds=3, episodes=24, late_episodes=8, packet_size=8, checkpoint_every=6,
                dqn=DqnParams(learning_starts=30, epsilon_decay_steps=120, target_sync=20, batch_size=16, hidden=32),
                sweep=SweepParams(cost_weights=[10.0, 100.0, 1000.0], seeds=2, studies=["management"]))
    base.update(overrides)
    return CoordinatorParams(**base)


@pytest.fixture(scope="module")
def fake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fake")
    write_fake_cache(root)
    return root


@pytest.fixture(scope="module")
def finished(fake):
    torch.set_num_threads(1)
    params = small_params()
    from delegation_lab.pipeline.layout import Layout

    env_layout, data = prepare_inputs(params, SOLVERS, None, Layout(fake))
    study = CoordinatorStudy(params, data, env_layout, log=lambda _: None)
    return params, study, study.run()


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(("key", "value", "message"), [
    ("packet_size", 0, "coordinator.packet_size"),
    ("packet_size", -3, "coordinator.packet_size"),
    ("max_attempts", 0, "coordinator.max_attempts"),
    ("routes", [["A"], ["A", "A"]], "visits a solver twice"),
    ("routes", [["A", "B"]], "manager alone"),
    ("methods", ["mgmt_policy", "always_a"], "mgmt_policy rolls out"),
])
def test_bad_params_name_the_key(key, value, message):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["coordinator"][key] = value
    with pytest.raises(ConfigError) as e:
        parse_params(raw)
    assert message in str(e.value)


def test_a_route_naming_an_unknown_solver_is_refused(fake):
    from delegation_lab.pipeline.layout import Layout

    params = small_params(routes=[["A"], ["A", "D"]])
    with pytest.raises(InputError, match=r"coordinator.routes\[1\]: unknown solver\(s\) \['D'\]"):
        prepare_inputs(params, SOLVERS, None, Layout(fake))
    with pytest.raises(InputError, match="coordinator.agents: unknown solver"):
        prepare_inputs(small_params(agents=["A", "Z"]), SOLVERS, None, Layout(fake))


def test_use_map_without_an_ability_map_is_refused(tmp_path):
    layout = write_fake_cache(tmp_path, with_map=False)
    with pytest.raises(InputError, match=r"ability_map.parquet: not found.*dqn_map"):
        prepare_inputs(small_params(), SOLVERS, None, layout)
    env, data = prepare_inputs(small_params(methods=["dqn_nomap", "always_a", "oracle"]), SOLVERS, None, layout)
    assert not data.has_map and data.train.map_rate is None and data.train.expected_cost.min() > 0


def test_a_cache_missing_train_items_is_refused(tmp_path):
    layout = write_fake_cache(tmp_path)
    answers = pl.read_parquet(layout.answers("B"))
    train_ids = pl.read_parquet(layout.items("train"))["item_id"].head(5)
    write_parquet_atomic(answers.filter(~pl.col("item_id").is_in(train_ids.implode())), layout.answers("B"))
    with pytest.raises(InputError) as e:
        prepare_inputs(small_params(), SOLVERS, None, layout)
    assert "B.parquet" in str(e.value) and "5 of 160 train items" in str(e.value) and "stages/solve.py --solver B" in str(e.value)


def test_the_stage_exits_2_naming_the_route_at_the_params_check(tmp_path):
    write_fake_cache(tmp_path)
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["coordinator"]["routes"] = [["A"], ["A", "Q"]]
    raw["tracking"]["enabled"] = False
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    proc = subprocess.run([sys.executable, str(REPO / "stages" / "coordinator.py"), "--params", "params.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO / "src"), "DLAB_NO_PROGRESS": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert "coordinator.routes[1]: unknown solver(s) ['Q']" in proc.stderr
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "results").exists()


# ------------------------------------------------------------------------------ the study


def test_every_method_ran_on_the_same_training_packets(finished):
    params, study, runs = finished
    names = {(r.study, r.method) for r in runs if not r.sweep}
    assert names == {(s, m) for s in ("management", "delegation") for m in params.methods
                     if not (m == "mgmt_policy" and s == "management")} | {("delegation", "mgmt_policy_selected")}
    for env_study in ("management", "delegation"):
        mine = [r for r in runs if r.study == env_study and not r.sweep and r.train.record is not None]
        items = [r.train.record.lane(1)["item"] for r in mine]
        episodes = [r.train.record.lane(1)["episode"] for r in mine]
        packets = [[tuple(sorted(set(i[e == k]))) for k in range(params.episodes)] for i, e in zip(items, episodes, strict=True)]
        assert all(p == packets[0] for p in packets)
        # the fixed orders (no step record) drew the same packets for seed 1, once for all orders
        fixed = next(r for r in runs if r.study == env_study and r.method == "fixed_order")
        assert [tuple(sorted(p)) for p in fixed.train._packets[1]] == packets[0]


def test_oracle_bounds_every_method_and_always_a_pays_the_kickoff_fee(finished):
    params, study, runs = finished
    late = {(r.study, r.method): late_per_lane(r.train, params.late_episodes) for r in runs if not r.sweep}
    for (env_study, method), m in late.items():
        per_seed = m["return"].reshape(-1, params.seeds)  # fixed orders: one row of seeds per order
        assert (late[(env_study, "oracle")]["return"] >= per_seed - 1e-9).all(), (env_study, method)
    for env_study in ("management", "delegation"):  # the fixed order "A" is always-A, lane for lane
        fixed = next(r for r in runs if r.study == env_study and r.method == "fixed_order")
        lanes = [i for i in range(fixed.lanes) if fixed.operating_point(i) == "A"]
        assert len(lanes) == params.seeds
        np.testing.assert_allclose(late_per_lane(fixed.train, params.late_episodes)["return"][lanes],
                                   late[(env_study, "always_a")]["return"])
    mg, dg = late[("management", "always_a")], late[("delegation", "always_a")]
    np.testing.assert_allclose(dg["accuracy"], mg["accuracy"])  # same packets, same solver
    assert (dg["cost_per_episode"] > mg["cost_per_episode"]).all()  # plus alpha x E[cost of A] per attempt
    assert np.allclose(mg["share"][:, 0], 1.0)


def test_metrics_summaries_and_trajectories_agree(finished):
    params, study, runs = finished
    metrics = study_metrics(runs, params.late_episodes, params.packet_size)
    for env_study in ("management", "delegation"):
        block = metrics[env_study]
        for key in ("late_return_mean", "late_return_std", "late_accuracy_mean", "late_cost_per_episode_mean",
                    "cum_cost_mean", "wilcoxon_p_return", "seeds_better_return", "seeds_cheaper"):
            assert key in block["dqn_map"], key
        assert block["paper"]["always_a"] == PAPER_TABLES[env_study]["always_a"]
        assert 0 <= block["dqn_map"]["seeds_better_return"] <= params.seeds
    assert metrics["delegation"]["paper"]["mgmt_policy"]["late_return_mean"] == 28.70
    assert set(metrics["sweep"]["management.dqn_map"]) == {"lambda=10", "lambda=100", "lambda=1000"}
    json.dumps(metrics)
    for env_study, n_orders in (("management", 15), ("delegation", 15)):  # 3 + 6 + 6 orders of 3 elements
        block = metrics[env_study]
        best = block["best_fixed_order"]
        assert len(block["fixed_orders"]) == best["orders_compared"] == n_orders
        assert best["late_return_mean"] == max(o["late_return_mean"] for o in block["fixed_orders"].values())
        assert best["test_accuracy_mean"] == pytest.approx(block["fixed_orders"][best["order"]]["test_accuracy_mean"])
        for key in ("late_return_mean", "test_return_mean", "test_accuracy_mean", "test_cost_per_item_mean"):
            assert key in best, key
        for method in ("dqn_map", "best_fixed_order", "always_a"):
            for key in ("test_accuracy", "test_cost_per_item", "test_return"):
                lo, hi = block[method][f"{key}_ci"]
                assert lo <= block[method][f"{key}_mean"] + 1e-12 and block[method][f"{key}_mean"] <= hi + 1e-12, (method, key)
        vs = block["dqn_map"]["vs_best_fixed_order"]
        assert vs["return_difference"] == pytest.approx(block["dqn_map"]["test_return_mean"] - best["test_return_mean"])
        assert vs["return_difference_ci"][0] <= vs["return_difference"] <= vs["return_difference_ci"][1]
        assert 0 <= vs["return_p_value"] <= 1

    rows = summary_rows(runs, params.late_episodes, params.packet_size, "fake", {})
    frame = pl.DataFrame(rows)
    assert set(SUMMARY_SCHEMA) - {"run_id"} <= set(frame.columns)
    test_rows = frame.filter(pl.col("split") == "test")
    assert (test_rows["n_items"] == 64).all()
    sweep_points = test_rows.filter(pl.col("method") == "management.dqn_map")["operating_point"].value_counts()
    assert dict(sweep_points.iter_rows()) == {"lambda=100": 3, "lambda=10": 2, "lambda=1000": 2}
    orders = test_rows.filter(pl.col("method") == "management.fixed_order")
    assert orders.height == 15 * params.seeds and {"C>B>A", "B>A", "A"} <= set(orders["operating_point"])
    assert set(orders.filter(pl.col("operating_point") == "B>A")["solver_set"]) == {"A,B"}

    # item-level outcomes: one set of items per test summary row, agreeing with its accuracy and cost
    outcomes = outcome_frame(runs, "fake", "gold")
    keys = ["method", "operating_point", "seed"]
    per_row = outcomes.group_by(keys).agg(pl.col("correct").mean().alias("acc"), pl.col("cost_usd").mean().alias("cost"),
                                          pl.len().alias("n"))
    joined = test_rows.join(per_row, on=keys, how="left")
    assert joined.height == test_rows.height and (joined["n"] == 64).all()
    np.testing.assert_allclose(joined["acc"], joined["accuracy"])
    np.testing.assert_allclose(joined["cost"], joined["cost_per_item_usd"])

    run = next(r for r in runs if r.method == "dqn_map" and r.study == "delegation")
    train = trajectory_frame(run, 0, "train")
    test = trajectory_frame(run, 0, "test", params.episodes)
    assert set(train.columns) == set(TRAJECTORY_SCHEMA)
    assert train.height == run.train.stats["steps"][0].sum()
    assert train["reward"].sum() == pytest.approx(run.train.stats["return"][0].sum())
    assert train["cost_usd"].sum() == pytest.approx(run.train.stats["cost_usd"][0].sum())
    assert test["episode"].min() == params.episodes and test.filter(pl.col("step") == 0).height == 8  # 64 items / 8
    extra = json.loads(train["extra"][0])
    assert set(extra) == {"attempt", "position", "accepted", "dropped", "cost_weight", "epsilon"} and extra["epsilon"] == 1.0
    assert train.filter(pl.col("calls") > 0)["executors"].list.len().min() >= 1


def test_default_scale_params_are_the_papers():
    p = load_params(REPO / "params.yaml").coordinator
    assert (p.packet_size, p.max_attempts, p.cost_weight, p.handoff_fee, p.episodes, p.seeds) == (32, 3, 100, 0.05, 1000, 20)
    d = p.dqn
    assert (d.learning_rate, d.hidden, d.batch_size, d.buffer_size, d.target_sync, d.epsilon_decay_steps) == \
        (1e-3, 128, 32, 80_000, 200, 20_000)
    assert d.gamma == 1.0  # deliberately not Table 3's 0.99: we train on the undiscounted return we report


def test_mgmt_policy_under_delegation_rules_plays_routes_as_joint_actions(fake):
    from delegation_lab.coordinator.actions import delegation_actions, route_as_joint_action
    from delegation_lab.pipeline.layout import Layout

    params = small_params(seeds=2, methods=["dqn_map", "mgmt_policy", "always_a"], mgmt_policy_rules="delegation",
                          sweep=SweepParams(seeds=0))
    env_layout, data = prepare_inputs(params, SOLVERS, None, Layout(fake))
    runs = CoordinatorStudy(params, data, env_layout, log=lambda _: None).run()
    run = next(r for r in runs if r.method == "mgmt_policy")
    assert run.study == "delegation" and run.actions.n == 52  # the distinct joint actions in which somebody answers
    routes = {delegation_actions(tuple(SOLVERS)).names[route_as_joint_action(r, tuple(SOLVERS))] for r in env_layout.routes}
    frame = trajectory_frame(run, 0, "train")
    assert set(frame["action"]) <= routes and len(set(frame["action"])) >= 2
    # the same frozen policy under its own rule pays no kickoff fee: cheaper on the same packets
    own = small_params(seeds=2, methods=["dqn_map", "mgmt_policy", "always_a"], sweep=SweepParams(seeds=0))
    runs_own = CoordinatorStudy(own, data, env_layout, log=lambda _: None).run()
    mine = next(r for r in runs_own if r.method == "mgmt_policy")
    assert mine.actions.n == 3
    assert (mine.train.stats["cost_usd"].sum(axis=1) < run.train.stats["cost_usd"].sum(axis=1)).all()


def test_delegation_trained_in_a_second_process_gives_the_same_numbers(fake, finished):
    """workers: 2 (the default, as in `finished`) trains the delegation batch in a worker process;
    one process after the other gives every method the same training curves and held-out results."""
    params, _, runs = finished
    assert params.workers == 2
    from delegation_lab.pipeline.layout import Layout

    one = small_params(workers=1)
    env_layout, data = prepare_inputs(one, SOLVERS, None, Layout(fake))
    alone = CoordinatorStudy(one, data, env_layout, log=lambda _: None).run()
    key = lambda r: (r.study, r.method, r.sweep)  # noqa: E731 - the worker changes the order, not the runs
    alone, runs = sorted(alone, key=key), sorted(runs, key=key)
    assert [key(r) for r in alone] == [key(r) for r in runs]
    for a, b in zip(alone, runs, strict=True):
        np.testing.assert_array_equal(a.train.stats["return"], b.train.stats["return"])
        np.testing.assert_array_equal(a.test.item_outcomes["reward"], b.test.item_outcomes["reward"])


def test_effect_sizes_against_always_a_and_the_provenance_of_the_paper_rows(finished):
    from delegation_lab.coordinator.results import provenance

    params, _, runs = finished
    m = study_metrics(runs, params.late_episodes, params.packet_size)
    dqn, base = m["management"]["dqn_map"], m["management"]["always_a"]
    v = dqn["vs_always_a"]
    lo, hi = v["late_return_difference_ci"]
    assert lo < v["late_return_difference"] < hi
    assert v["late_return_difference"] == pytest.approx(dqn["late_return_mean"] - base["late_return_mean"])
    held = v["held_out"]
    assert held["return_difference"] == pytest.approx(dqn["test_return_mean"] - base["test_return_mean"])
    prov = provenance({k: m[k] for k in ("management", "delegation")}, params.dqn.learning_starts)
    assert prov["management.always_a.late_accuracy_mean"]["kind"] == "calibrated"
    assert prov["delegation.always_a.late_cost_per_episode_mean"]["kind"] == "calibrated"
    assert "management.dqn_map.late_return_mean" not in prov  # computed: an outcome of the method
    assert prov["setup.dqn_learning_starts"]["kind"] == "setting" and "our addition" in prov["setup.dqn_learning_starts"]["why"]
    for key in prov:  # every provenance row names a figure the paper gives
        if key.startswith(("management.", "delegation.")):
            study, method, metric = key.split(".")
            assert metric in m[study]["paper"][method]


def test_the_management_checkpoint_is_selected_on_the_dev_split(finished):
    """mgmt_policy plays the last weights, mgmt_policy_selected per seed the checkpoint (episodes
    12, 18 of 24 here, or the last) of highest greedy return on the dev (ability) split."""
    params, study, runs = finished
    m = study_metrics(runs, params.late_episodes, params.packet_size)
    picked = m["delegation"]["mgmt_policy_selected"]
    assert picked["checkpoints_compared"] == 3 and picked["dev_items"] == 120
    assert set(picked["checkpoint_episode"]) <= {12, 18, 24} and len(picked["checkpoint_episode"]) == params.seeds
    assert picked["dev_return_selected_mean"] >= picked["dev_return_last_mean"]
    last = next(r for r in runs if r.method == "mgmt_policy")
    chosen = next(r for r in runs if r.method == "mgmt_policy_selected")
    for lane, episode in enumerate(picked["checkpoint_episode"]):  # a seed that kept its last weights plays the same
        if episode == params.episodes:
            np.testing.assert_array_equal(chosen.test.item_outcomes["reward"][lane], last.test.item_outcomes["reward"][lane])


def test_the_paired_frozen_management_lanes_equal_each_policy_played_alone(finished):
    """mgmt_policy and mgmt_policy_selected play as lanes of one env: each lane's curve and held-out
    outcomes are those of its policy played alone (run_method)."""
    import copy

    params, study, runs = finished
    alone = copy.copy(study)
    alone.runs, alone.selected = list(study.runs), study.selected  # (a copy drops both, like a worker's)
    seeds = np.arange(params.first_seed, params.first_seed + params.seeds)
    weights = np.full(len(seeds), float(params.cost_weight))
    for method in ("mgmt_policy", "mgmt_policy_selected"):
        single = alone.run_method("delegation", method, seeds, weights, [method] * len(seeds))
        paired = next(r for r in runs if r.study == "delegation" and r.method == method)
        np.testing.assert_array_equal(single.train.stats["return"], paired.train.stats["return"])
        np.testing.assert_array_equal(single.test.item_outcomes["reward"], paired.test.item_outcomes["reward"])
        assert single.extra == paired.extra
