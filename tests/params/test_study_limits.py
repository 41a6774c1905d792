"""Every solver set a study can take: routers on all N, the coordinator, the market and REDEREF on
any named subset of `solvers`; a set above a limit the method needs, or naming an unknown solver,
fails the params check with one line naming the key (and the limit)."""

from __future__ import annotations

import copy

import numpy as np
import polars as pl
import pytest
import yaml

from delegation_lab.params.root import parse_params
from delegation_lab.coordinator.actions import (
    delegation_actions,
    fixed_order_count,
    joint_action_count,
    management_actions,
)
from delegation_lab.coordinator.baselines import fixed_orders
from delegation_lab.coordinator.params import JOINT_ACTIONS_CEILING
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation import Verifier
from delegation_lab.routers import Inputs
from delegation_lab.routers import ROUTERS
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.study import RoutingData, carve_dev, run_study, summary_rows

from tests.conftest import REPO

RAW = yaml.safe_load((REPO / "params.yaml").read_text())
MANY = [f"m{i:02d}" for i in range(42)]


def with_solvers(names: list[str], **sections: dict) -> dict:
    """The committed params with `names` as simulated solvers (copies of solver C) and `sections` merged in."""
    raw = copy.deepcopy(RAW)
    raw["solvers"] = {name: copy.deepcopy(RAW["solvers"]["C"]) for name in names}
    for section, values in sections.items():
        raw[section] = {**raw.get(section, {}), **values}
    return raw


def problems_for(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_params(raw)
    return err.value.problems


def test_joint_and_fixed_order_counts_are_what_the_code_enumerates():
    for n in (2, 3, 4):
        assert delegation_actions(tuple("ABCD"[:n])).n == joint_action_count(n)
    assert JOINT_ACTIONS_CEILING == joint_action_count(5) == 96_875
    actions = delegation_actions(("A", "B", "C"))
    routes = [["A"], ["A", "B"], ["A", "B", "C"], ["A", "C"]]
    names, _ = fixed_orders("management", management_actions(routes, ("A", "B", "C")), routes, 3)
    assert len(names) == fixed_order_count(4, 3) == 40
    assert len(fixed_orders("delegation", actions, routes[:3], 2)[0]) == fixed_order_count(3, 2) == 9


def test_coordinator_agents_above_the_joint_action_limit_fail_naming_key_and_limit():
    raw = with_solvers(MANY[:5], coordinator={"agents": MANY[:5]})
    (problem,) = problems_for(raw)
    assert problem.startswith("coordinator.agents: 5 agents give 96875 joint actions")
    assert "coordinator.max_joint_actions 3840 (4 agents" in problem
    # the limit is a documented key: raised to the method's ceiling, 5 agents pass
    raw["coordinator"]["max_joint_actions"] = JOINT_ACTIONS_CEILING
    assert parse_params(raw).coordinator.agents == MANY[:5]
    raw["coordinator"]["max_joint_actions"] = JOINT_ACTIONS_CEILING + 1
    (problem,) = problems_for(raw)
    assert problem.startswith("coordinator.max_joint_actions:") and str(JOINT_ACTIONS_CEILING) in problem


def test_coordinator_with_every_one_of_42_solvers_names_agents_and_routes():
    problems = problems_for(with_solvers(MANY))
    assert len(problems) == 2
    agents, routes = problems
    assert agents.startswith("coordinator.agents: null means every solver: 42 agents give") and "max_joint_actions 3840" in agents
    assert routes.startswith("coordinator.routes: null means one route per agent")
    assert "70644" in routes and "coordinator.max_fixed_orders 100" in routes and "[['m00'], ['m00', 'm01']" in routes


def test_coordinator_on_a_named_subset_of_42_solvers_passes():
    subset = ["m07", "m30", "m41", "m02"]
    routes = [["m07"], ["m07", "m30"], ["m07", "m30", "m41"]]
    params = parse_params(with_solvers(MANY, coordinator={"agents": subset, "routes": routes}))
    assert params.coordinator.agents == subset
    # management alone with explicit routes takes a route over any of the 42 solvers
    long = [MANY[:1], MANY[:10], MANY]
    parse_params(with_solvers(MANY, coordinator={"studies": ["management"], "routes": long, "sweep": {"studies": ["management"]}}))


def test_coordinator_too_many_fixed_orders_fail_naming_routes():
    routes = [MANY[:k] for k in range(1, 7)]  # 6 routes: 156 orders at 3 attempts
    raw = with_solvers(MANY, coordinator={"studies": ["management"], "routes": routes})
    (problem,) = problems_for(raw)
    assert problem.startswith("coordinator.routes: 6 routes, whose fixed orders at max_attempts 3 number 156")
    assert "coordinator.max_fixed_orders 100" in problem
    raw["coordinator"]["methods"] = ["dqn_map", "always_a"]
    parse_params(raw)


@pytest.mark.parametrize(("section", "values", "key"), [
    ("coordinator", {"agents": ["m00", "zz"]}, "coordinator.agents"),
    ("coordinator", {"agents": ["m00", "m01"], "routes": [["m00"], ["m00", "ghost"]]}, "coordinator.routes[1]"),
    ("market", {"answers": {"solvers": ["m00", "zz"]}}, "market.answers.solvers"),
    ("redref", {"cached": {"solvers": ["zz", "m01"]}}, "redref.cached.solvers"),
    ("routers", {"threshold": {"strong": "zz"}}, "routers.threshold.strong"),
])
def test_a_subset_naming_an_unknown_solver_fails_naming_key_and_name(section, values, key):
    (problem,) = problems_for(with_solvers(MANY[:3], **{section: values}))
    assert problem.startswith(f"{key}: unknown solver(s) [")
    assert "'zz'" in problem or "'ghost'" in problem


def test_routes_off_the_agents_fail_at_the_params_check():
    raw = with_solvers(MANY[:4], coordinator={"agents": MANY[:2], "routes": [["m00"], ["m00", "m03"]]})
    (problem,) = problems_for(raw)
    assert problem.startswith("coordinator.routes: use ['m03'], which coordinator.agents")


def test_a_switched_off_study_checks_nothing():
    raw = with_solvers(MANY, coordinator={"enabled": False}, redref={"cached": {"solvers": ["zz"]}, "enabled": False})
    assert len(parse_params(raw).solvers) == 42


def test_market_and_redref_take_every_one_of_42_solvers():
    raw = with_solvers(MANY, coordinator={"enabled": False}, market={"answers": {"solvers": MANY, "agents_per_solver": 20}},
                       redref={"cached": {"solvers": MANY}})
    params = parse_params(raw)
    assert len(params.market.answers.solvers) == 42 and params.market.answers.agents_per_solver == 20
    (problem,) = problems_for(with_solvers(MANY, coordinator={"enabled": False}, redref={"cached": {"solvers": ["m00"]}}))
    assert problem.startswith("redref.cached.solvers: needs at least 2 solvers")
    (problem,) = problems_for(with_solvers(MANY, coordinator={"enabled": False}, market={"answers": {"solvers": ["m00", "m00"]}}))
    assert problem.startswith("market.answers.solvers: names repeat")


def test_routers_route_among_42_solvers():
    params = parse_params(with_solvers(MANY, coordinator={"enabled": False}))
    assert params.routers.enabled and len(params.solvers) == 42
    rng = np.random.default_rng(0)
    n, s = 240, len(MANY)
    topic = rng.integers(0, 4, n)
    emb = rng.normal(size=(4, 16))[topic] + 0.3 * rng.normal(size=(n, 16))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    skill = np.linspace(0.3, 0.95, s)
    correct = rng.random((n, s)) < skill[None] - 0.05 * topic[:, None]
    cost = np.geomspace(1e-5, 1e-2, s)[None] * rng.uniform(0.8, 1.2, (n, s))
    text = np.stack([rng.integers(50, 300, n), topic + 1], axis=1).astype(float)
    ids = np.array([f"item{i:04d}" for i in range(n)])
    split = carve_dev(ids, np.where(np.arange(n) < 160, "train", "test"), 0.25, 0)
    data = RoutingData(ids, split, Inputs(emb.astype(np.float32), text), correct, cost, MANY, "synthetic42")
    fast = RoutersParams.model_validate({
        "seeds": 1, "mlp": {"epochs": 5}, "mf": {"epochs": 5}, "threshold": {"epochs": 5}, "learned_cascade": {"epochs": 5}, "irt": {"epochs": 5},
        "knn": {"k": 10, "search_dim": 8, "cells": 0}, "cluster": {"clusters": 4},
    })
    verifier = Verifier("judge", 0.02, 0.03, 0, "configured")
    rows = pl.DataFrame(summary_rows(run_study(data, fast, verifier), "synthetic42", verifier.name))
    assert set(rows["method"]) == set(ROUTERS.names())
    assert (rows["n_items"] == int((split == "test").sum())).all()
    assert rows["accuracy"].is_between(0, 1).all() and (rows["cost_per_item_usd"] > 0).all()
