"""Fixed policies and the rollout loop shared by every non-learning method.

- `always_a`: every attempt to the manager alone (route [A]; in the delegation env kickoff {A}, A
  answers — so it pays the kickoff fee there, as in the paper). Under `rejected_last_answer: return`
  its route ends after one attempt: a rejected answer is returned, not re-asked (re-asking repeats
  the same cached answer and verdict), so in the management env it is solver A alone, item by item.
- `random`: uniform over the action space, from the lane's own stream ([seed, 5]; [seed, 6] on the test split).
- `oracle`: the action of highest immediate reward knowing the verdicts (the cheapest accepted
  option; the cheapest option when none is accepted) — an upper bound, not a policy one could deploy.
  Under `return` it stops after one attempt (when its choice is rejected, every option is).
- `mgmt_policy`: the frozen, greedy management coordinator on the delegation study's packets
  (every method with the same seed sees the same packets), under its own management rule
  (`mgmt_policy_rules: management`, the paper's matched comparison) or with each route sent as the
  matching joint action of the delegation env (`delegation`: kickoff the manager, pass down the
  route, paying the delegation edge fees).
- `fixed_order`: every fixed order of routes (management) or of solvers (delegation: kickoff the
  solver alone, it answers) — attempt k plays the order's k-th element; once the order is exhausted
  the item ends with its last answer under `return`, and under `wrong` the last element is re-asked
  up to max_attempts (repeating the same answer and verdict) — the strongest non-learning
  baselines; one lane per (order, seed), all orders batched in one environment.
- a trained DQN's greedy policy.
"""

from __future__ import annotations

import itertools
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
        index = actions.index_of(joint_index((actions.solvers.index(manager),), (0,) * len(actions.solvers), len(actions.solvers)))
    return lambda obs, env: np.full(len(obs), index, dtype=np.int64)


STOP_AFTER_ONE = ("always_a", "oracle")  # fixed policies whose route is one attempt long


def attempt_limit(method: str, rule: str, max_attempts: int) -> int:
    """Attempts a fixed policy makes on an item before a rejected answer ends it: under `return` one
    for always-A and the oracle (re-asking repeats the same cached answer and verdict); every other
    method, and every method under the paper's `wrong`, max_attempts."""
    return 1 if rule == "return" and method in STOP_AFTER_ONE else max_attempts


def order_limits(plan: np.ndarray, rule: str) -> np.ndarray:
    """Per fixed order (a row of `fixed_orders`' plan), its attempts before the item ends: the order's
    length under `return` (its elements are distinct; the rest is padding), the plan's width under `wrong`."""
    if rule != "return":
        return np.full(len(plan), plan.shape[1], dtype=np.int64)
    return np.array([len(set(row.tolist())) for row in plan], dtype=np.int64)


def uniform_random(seeds: np.ndarray, n_actions: int, stream: int = POLICY_STREAM) -> Policy:
    draws = LaneUniforms([lane_rng(int(s), stream) for s in seeds], 1)
    return lambda obs, env: np.minimum((draws.next()[:, 0] * n_actions).astype(np.int64), n_actions - 1)


def oracle(rows: np.ndarray | None = None) -> Policy:
    """The oracle of the lanes `rows` (all lanes when None)."""
    return lambda obs, env: env.oracle_actions(rows)


def side_by_side(parts: list[tuple[np.ndarray, Policy]]) -> Policy:
    """Several policies as lanes of one env: each plays its lanes (an index array) from their observations."""
    def act(obs: np.ndarray, env: VecCoordinatorEnv) -> np.ndarray:
        out = np.empty(len(obs), dtype=np.int64)
        for rows, policy in parts:
            out[rows] = policy(obs[rows], env)
        return out
    return act


def greedy(policy: GreedyPolicy) -> Policy:
    return lambda obs, env: policy(obs)


def management_in_delegation(policy: GreedyPolicy, routes: list[list[str]], actions: ActionTable) -> Policy:
    table = np.array([actions.index_of(route_as_joint_action(r, actions.solvers)) for r in routes], dtype=np.int64)
    return lambda obs, env: table[policy(obs)]


def fixed_orders(kind: str, actions: ActionTable, routes: list[list[str]], max_attempts: int) -> tuple[list[str], np.ndarray]:
    """(names, plan [n_orders, max_attempts] of action indices): every ordered sequence of distinct
    elements, 1 .. max_attempts long, padded with its last element. Management orders routes, named
    by their answering solver ("C>B>A": route A>B>C first, then A>B, then A) when those are distinct,
    else by route ("[A>B>C]>[A]"); delegation orders the solvers, each kicked off alone to answer."""
    if kind == "management":
        elements = list(range(actions.n))
        last = [r[-1] for r in routes]
        labels = last if len(set(last)) == len(last) else [f"[{n}]" for n in actions.names]
    else:
        n = len(actions.solvers)
        elements = [actions.index_of(joint_index((i,), (0,) * n, n)) for i in range(n)]
        labels = list(actions.solvers)
    names, plans = [], []
    for length in range(1, min(max_attempts, len(elements)) + 1):
        for order in itertools.permutations(range(len(elements)), length):
            names.append(">".join(labels[k] for k in order))
            seq = [elements[k] for k in order]
            plans.append(seq + [seq[-1]] * (max_attempts - length))
    return names, np.array(plans, dtype=np.int64)


def planned(plan: np.ndarray, lane_order: np.ndarray) -> Policy:
    """Lane l plays plan[lane_order[l], attempt] (its order's element for the current attempt)."""
    return lambda obs, env: plan[lane_order, np.minimum(env.attempt, plan.shape[1] - 1)]


def rollout(env: VecCoordinatorEnv, policy: Policy, observe: bool = True) -> VecCoordinatorEnv:
    """Play every lane of `env` until each has finished its episodes; returns the env (stats, record).
    `observe=False` for a policy that never reads the observation (always-A, random, the oracle, the
    fixed orders): the env skips building them, a fifth of its step."""
    obs = env.reset()
    while env.active.any():
        obs, *_ = env.step(policy(obs, env), observe=observe)
    return env
