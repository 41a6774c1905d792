"""Fixed policies and the rollout loop shared by every non-learning method.

- `always_a`: every attempt to the manager alone (route [A]; in the delegation env kickoff {A}, A
  answers — so it pays the kickoff fee there, as in the paper).
- `random`: uniform over the action space, from the lane's own stream ([seed, 5]; [seed, 6] on the test split).
- `oracle`: the action of highest immediate reward knowing the labels (the cheapest correct option;
  the cheapest option when nobody is right) — an upper bound, not a policy one could deploy.
- `mgmt_policy`: the frozen, greedy management coordinator on the delegation study's packets
  (every method with the same seed sees the same packets), under its own management rule
  (`mgmt_policy_rules: management`, the paper's matched comparison) or with each route sent as the
  matching joint action of the delegation env (`delegation`: kickoff the manager, pass down the
  route, paying the delegation edge fees).
- a trained DQN's greedy policy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from delegation_lab.coordinator.actions import ActionTable, joint_index, route_as_joint_action
from delegation_lab.coordinator.dqn import GreedyPolicy, LaneUniforms
from delegation_lab.coordinator.envs import VecCoordinatorEnv, lane_rng

POLICY_STREAM = 5
TEST_POLICY_STREAM = 6

Policy = Callable[[np.ndarray, VecCoordinatorEnv], np.ndarray]


def always_manager(kind: str, actions: ActionTable, manager: str) -> Policy:
    if kind == "management":
        index = actions.names.index(manager)
    else:
        index = joint_index((actions.solvers.index(manager),), (0,) * len(actions.solvers), len(actions.solvers))
    return lambda obs, env: np.full(env.L, index, dtype=np.int64)


def uniform_random(seeds: np.ndarray, n_actions: int, stream: int = POLICY_STREAM) -> Policy:
    draws = LaneUniforms([lane_rng(int(s), stream) for s in seeds], 1)
    return lambda obs, env: np.minimum((draws.next()[:, 0] * n_actions).astype(np.int64), n_actions - 1)


def oracle() -> Policy:
    return lambda obs, env: env.oracle_actions()


def greedy(policy: GreedyPolicy) -> Policy:
    return lambda obs, env: policy(obs)


def management_in_delegation(policy: GreedyPolicy, routes: list[list[str]], agents: tuple[str, ...]) -> Policy:
    table = np.array([route_as_joint_action(r, agents) for r in routes], dtype=np.int64)
    return lambda obs, env: table[policy(obs)]


def rollout(env: VecCoordinatorEnv, policy: Policy) -> VecCoordinatorEnv:
    """Play every lane of `env` until each has finished its episodes; returns the env (stats, record)."""
    obs = env.reset()
    while env.active.any():
        obs, *_ = env.step(policy(obs, env))
    return env
