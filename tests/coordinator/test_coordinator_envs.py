"""Coordinator environments: the action tables (routes, 189 joint actions, pass resolution), the
reward and cost rules on hand-made caches, Gymnasium compliance, lane independence, the oracle."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from delegation_lab.coordinator.actions import (
    answering_actions,
    delegation_actions,
    joint_index,
    kickoff_sets,
    management_actions,
    resolve,
    route_as_joint_action,
)
from delegation_lab.coordinator.data import SolverTable
from delegation_lab.coordinator.envs import DelegationEnv, EnvConfig, ManagementEnv, VecCoordinatorEnv, obs_dim

ROUTES = [["A"], ["A", "B"], ["A", "B", "C"]]
ABC = ("A", "B", "C")


def table(correct: list[list[bool]], cost: list[list[float]], difficulty: list[int] | None = None,
          expected: list[list[float]] | None = None, with_map: bool = True) -> SolverTable:
    c = np.array(correct, dtype=bool)
    k = np.array(cost, dtype=float)
    n = len(c)
    e = np.array(expected, dtype=float) if expected is not None else k.copy()
    rate = np.tile(c.mean(axis=0), (n, 1)) if with_map else None
    return SolverTable("train", ABC, np.array([f"i{i}" for i in range(n)]), np.array(difficulty or [1] * n),
                       c, k, e, rate, e.copy() if with_map else None)


# ---------------------------------------------------------------------------------- actions


def test_management_routes():
    acts = management_actions(ROUTES, ABC)
    assert acts.names == ["A", "A>B", "A>B>C"]
    assert acts.answers.tolist() == [[True, False, False], [False, True, False], [False, False, True]]
    assert acts.handoffs.tolist() == [0, 1, 2]
    assert acts.executors(2) == ["C"]


def test_delegation_has_189_joint_actions_in_the_papers_kickoff_order():
    acts = delegation_actions(ABC)
    assert acts.n == 189 == 7 * 3**3
    assert kickoff_sets(3) == [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
    assert acts.names[0] == "A|A:answer,B:answer,C:answer"
    assert acts.names[-1] == "ABC|A:to_C,B:to_C,C:to_B"
    assert len(set(acts.names)) == 189
    assert delegation_actions(("X", "Y")).n == 3 * 2**2


@pytest.mark.parametrize(
    ("kick", "choices", "answers", "edges"),
    [
        ((0,), (0, 0, 0), [True, False, False], [1, 0, 0]),  # A kicked off and answers; B, C never hold it
        ((0,), (1, 0, 0), [False, True, False], [1, 1, 0]),  # A passes to B (its 1st other), B answers
        ((0,), (1, 2, 0), [False, False, True], [1, 1, 1]),  # A -> B -> C (B's 2nd other is C), C answers
        ((0,), (1, 1, 0), [False, False, False], [2, 1, 0]),  # A -> B -> A: a cycle, nobody answers, 2 fees into A
        ((0,), (0, 2, 2), [True, False, False], [1, 0, 0]),  # B, C pass but never hold: no handoff, no fee
        ((0, 1), (0, 0, 0), [True, True, False], [1, 1, 0]),  # two answerers
        ((0, 2), (2, 0, 0), [False, False, True], [1, 0, 2]),  # C kicked off AND passed to by A: two fees into C
        ((2,), (0, 0, 1), [True, False, False], [1, 0, 1]),  # C passes to A (its 1st other)
    ],
)
def test_pass_resolution_is_a_fixed_point(kick, choices, answers, edges):
    got_answers, got_edges = resolve(kick, choices)
    assert got_answers == answers
    assert got_edges == edges
    acts = delegation_actions(ABC)
    i = joint_index(kick, choices, 3)
    assert acts.answers[i].tolist() == answers and acts.edges[i].tolist() == edges


def test_a_management_route_as_a_joint_action():
    acts = delegation_actions(ABC)
    for route, executor, edges in ((["A"], "A", [1, 0, 0]), (["A", "B"], "B", [1, 1, 0]), (["A", "B", "C"], "C", [1, 1, 1])):
        i = route_as_joint_action(route, ABC)
        assert acts.executors(i) == [executor] and acts.edges[i].tolist() == edges


# ------------------------------------------------------------------------------- the rewards


def one_item_env(kind: str, correct, cost, lam=100.0, alpha=0.05, attempts=3, expected=None) -> VecCoordinatorEnv:
    t = table([correct], [cost], expected=[expected] if expected else None)
    acts = management_actions(ROUTES, ABC) if kind == "management" else delegation_actions(ABC)
    cfg = EnvConfig(packet_size=1, max_attempts=attempts, fail_penalty=1.0, handoff_fee=alpha, use_map=True)
    env = VecCoordinatorEnv(t, acts, cfg, [0], lam, episodes=1)
    env.reset()
    return env


def test_management_reward_charges_solve_and_handoff_fees():
    cost = [0.002, 0.0004, 0.00003]
    for action, solver, n_e in ((0, 0, 0), (1, 1, 1), (2, 2, 2)):
        env = one_item_env("management", [True, True, True], cost)
        _, reward, done, _, _ = env.step(np.array([action]))
        expected = 1.0 - 100 * cost[solver] - 100 * n_e * 0.05 * cost[solver]
        assert reward[0] == pytest.approx(expected)
        assert env.stats["cost_usd"][0, 0] == pytest.approx(cost[solver] * (1 + 0.05 * n_e))
        assert done[0]


def test_a_wrong_cached_answer_repeats_and_three_failures_drop_the_item():
    env = one_item_env("management", [False, True, False], [0.002, 0.0004, 0.00003])
    rewards = []
    for _ in range(3):  # A three times: the same wrong cached answer each time
        _, r, done, _, _ = env.step(np.array([0]))
        rewards.append(r[0])
    assert rewards[0] == pytest.approx(-0.2) and rewards[1] == pytest.approx(-0.2)
    assert rewards[2] == pytest.approx(-0.2 - 1.0)  # the fail penalty on the third miss
    assert done[0] and env.stats["correct"][0, 0] == 0 and env.stats["steps"][0, 0] == 3


def test_tried_flags_and_attempt_index_in_the_observation():
    env = one_item_env("management", [False, True, False], [0.002, 0.0004, 0.00003])
    obs0 = env.observe()[0]
    # layout: rate (3), lambda * cost (3), attempt one-hot (3), tried (3), progress (1)
    assert obs_dim(3, 3, True) == len(obs0) == 13
    assert obs0[6:9].tolist() == [1, 0, 0] and obs0[9:12].tolist() == [0, 0, 0]
    assert obs0[3] == pytest.approx(100 * 0.002)
    obs1, *_ = env.step(np.array([0]))
    assert obs1[0, 6:9].tolist() == [0, 1, 0] and obs1[0, 9:12].tolist() == [1, 0, 0]
    env.step(np.array([1]))  # B is right: the packet (one item) is done
    assert env.stats["correct"][0, 0] == 1 and env.stats["return"][0, 0] == pytest.approx(-0.2 + 1 - 0.04 - 0.002)


def test_delegation_reward_sums_answerers_and_pays_edge_fees_on_expected_cost():
    cost, expected = [0.002, 0.0004, 0.00003], [0.003, 0.0005, 0.00004]
    env = one_item_env("delegation", [False, True, False], cost, expected=expected)
    i = joint_index((0, 2), (1, 0, 0), 3)  # kickoff {A, C}; A passes to B; B and C answer
    _, reward, _, _, _ = env.step(np.array([i]))
    solve = cost[1] + cost[2]
    fee = 0.05 * (expected[0] + expected[2] + expected[1])  # kickoff A, kickoff C, pass A -> B
    assert reward[0] == pytest.approx(1.0 - 100 * (solve + fee))  # B is right: any answerer counts


def test_a_cycle_fails_the_attempt_at_fee_cost_only():
    env = one_item_env("delegation", [True, True, True], [0.002, 0.0004, 0.00003], expected=[0.002, 0.0004, 0.00003])
    i = joint_index((0,), (1, 1, 0), 3)  # A -> B -> A
    _, reward, done, _, _ = env.step(np.array([i]))
    assert reward[0] == pytest.approx(-100 * 0.05 * (2 * 0.002 + 0.0004)) and not done[0]


def test_the_oracle_takes_the_cheapest_correct_option():
    env = one_item_env("management", [True, True, False], [0.002, 0.0004, 0.00003])
    assert env.oracle_actions().tolist() == [1]  # B: cheapest correct (C is wrong)
    env = one_item_env("delegation", [True, False, True], [0.002, 0.0004, 0.00003])
    i = int(env.oracle_actions()[0])
    assert env.actions.executors(i) == ["C"] and env.actions.edges[i].tolist() == [0, 0, 1]


# ------------------------------------------------------------------------- Gymnasium and lanes


def random_table(n: int = 50, seed: int = 0) -> SolverTable:
    rng = np.random.default_rng(seed)
    correct = rng.random((n, 3)) < [0.95, 0.8, 0.5]
    cost = rng.uniform(0.5, 1.5, (n, 3)) * [0.002, 0.0004, 0.00003]
    return table(correct.tolist(), cost.tolist(), difficulty=rng.integers(1, 5, n).tolist())


@pytest.mark.parametrize("use_map", [True, False])
def test_gymnasium_env_checker_passes(use_map):
    t = random_table()
    cfg = EnvConfig(packet_size=8, use_map=use_map)
    for env in (ManagementEnv(t, ROUTES, cfg), DelegationEnv(t, cfg)):
        check_env(env, skip_render_check=True)
        obs, info = env.reset(seed=3)
        assert obs.shape == (obs_dim(3, 3, use_map),) and "item_id" in info
        _, _, _, _, info = env.step(0)
        assert set(info) >= {"item_id", "executors", "correct", "cost_usd"}


def test_lanes_are_independent_and_match_single_envs():
    t = random_table(80)
    cfg = EnvConfig(packet_size=6)
    acts = delegation_actions(ABC)
    seeds = [4, 9, 11]
    vec = VecCoordinatorEnv(t, acts, cfg, seeds, [10.0, 100.0, 1000.0], episodes=3)
    vec.reset()
    rng = np.random.default_rng(0)
    plan = rng.integers(0, acts.n, size=(400, 3))
    rewards: list[list[float]] = [[], [], []]
    taken: list[list[int]] = [[], [], []]
    step = 0
    while vec.active.any():
        act = vec.active.copy()
        _, r, _, _, _ = vec.step(plan[step])
        for lane in np.flatnonzero(act):
            rewards[lane].append(r[lane])
            taken[lane].append(plan[step, lane])
        step += 1
    for lane, (seed, lam) in enumerate(zip(seeds, [10.0, 100.0, 1000.0], strict=True)):
        single = DelegationEnv(t, cfg, cost_weight=lam)
        single.reset(seed=seed)
        got, episodes = [], 0
        for a in taken[lane]:
            _, r, done, _, _ = single.step(int(a))
            got.append(r)
            if done:
                episodes += 1
                if episodes < 3:
                    single.reset()
        assert episodes == 3
        np.testing.assert_allclose(got, rewards[lane], rtol=0, atol=1e-12)
        np.testing.assert_allclose(vec.stats["return"][lane].sum(), sum(got), atol=1e-9)


def test_sequential_mode_plays_every_item_once():
    t = random_table(20)
    vec = VecCoordinatorEnv(t, management_actions(ROUTES, ABC), EnvConfig(packet_size=6), [0, 1], 100.0, mode="sequential")
    assert vec.episodes == 4
    vec.reset()
    while vec.active.any():
        vec.step(np.array([0, 2]))
    assert vec.stats["items"].sum(axis=1).tolist() == [20, 20]
    assert vec.stats["items"][0].tolist() == [6, 6, 6, 2]


def test_packets_do_not_depend_on_actions():
    t = random_table(60)
    cfg = EnvConfig(packet_size=5)
    packets = []
    for action in (0, 2):
        vec = VecCoordinatorEnv(t, management_actions(ROUTES, ABC), cfg, [7], 100.0, episodes=4, record=True)
        vec.reset()
        while vec.active.any():
            vec.step(np.array([action]))
        rec = vec.record.lane(0)
        packets.append([tuple(sorted(set(rec["item"][rec["episode"] == e]))) for e in range(4)])
    assert packets[0] == packets[1]


# ------------------------------------------------------------------------------- the verifier


def test_acceptance_follows_the_verifier_and_accuracy_the_gold_label():
    """Item 0: A right but rejected (a false negative), B wrong but accepted (a false positive)."""
    t = table([[True, False, False], [True, True, True]], [[0.002, 0.0004, 0.00003]] * 2)
    verdicts = np.array([[[False, True, False], [True, True, True]]])  # [lane, item, solver]
    env = VecCoordinatorEnv(t, management_actions(ROUTES, ABC), EnvConfig(packet_size=2), [0], 100.0,
                            episodes=1, mode="sequential", verdicts=verdicts)
    env.reset()
    _, r, *_ = env.step(np.array([0]))  # A: right, rejected -> retry, no R_corr
    assert env.attempt[0] == 1 and r[0] == pytest.approx(-100 * 0.002)
    _, r, *_ = env.step(np.array([1]))  # A>B: B wrong but accepted -> stop, R_corr paid, item wrong
    assert env.pos[0] == 1 and r[0] == pytest.approx(1 - 100 * 0.0004 * 1.05)
    env.step(np.array([2]))
    out = env.item_outcomes
    assert out["correct"][0].tolist() == [False, True]
    np.testing.assert_allclose(out["cost_usd"][0], [0.002 + 0.0004 * 1.05, 0.00003 * 1.1])
    # where the oracle gap goes: item 0's right answer (A's) was held and rejected; the kept answer's
    # own price is the answer's, the rejected call and the handoff fee are not
    assert out["held_right"][0].tolist() == [True, True]
    np.testing.assert_allclose(out["answer_cost_usd"][0], [0.0004, 0.00003])
    assert env.stats["correct"][0, 0] == 1 and env.stats["accepted"][0, 0] == 2


def test_several_answerers_keep_the_most_expensive_accepted_answer():
    t = table([[False, True, False]], [[0.002, 0.0004, 0.00003]])
    acts = delegation_actions(ABC)
    everyone = joint_index((0, 1, 2), (0, 0, 0), 3)  # A, B, C all answer
    for verdict, right in (([True, True, True], False), ([False, True, True], True), ([False, False, True], False)):
        env = VecCoordinatorEnv(t, acts, EnvConfig(packet_size=1), [0], 100.0, episodes=1, mode="sequential",
                                verdicts=np.array([[verdict]]))
        env.reset()
        _, accepted, kept_right, _, _ = env.outcomes(env.current_items(), np.array([everyone]))
        assert accepted[0] and kept_right[0] == right, verdict


def test_answering_actions_drop_no_answer_and_duplicate_joint_actions():
    full = delegation_actions(ABC)
    mine = answering_actions(full)
    assert mine.n == 52 and mine.answers.any(axis=1).all()
    keys = {(a.tobytes(), e.tobytes()) for a, e in zip(mine.answers, mine.edges, strict=True)}
    assert len(keys) == 52  # distinct outcomes
    full_keys = {(a.tobytes(), e.tobytes()) for a, e in zip(full.answers, full.edges, strict=True) if a.any()}
    assert keys == full_keys  # nothing reachable was lost
    for r in ROUTES:  # a route's joint action maps to the action with the same answerers and fees
        k = mine.index_of(route_as_joint_action(r, ABC))
        j = route_as_joint_action(r, ABC)
        assert (mine.answers[k] == full.answers[j]).all() and (mine.edges[k] == full.edges[j]).all()


def test_step_record_lanes_follow_steps_added_after_a_read():
    t = random_table(30)
    vec = VecCoordinatorEnv(t, management_actions(ROUTES, ABC), EnvConfig(packet_size=4), [0, 1], 100.0,
                            episodes=3, record=True)
    vec.reset()
    vec.step(np.array([0, 1]))
    assert len(vec.record.lane(1)["action"]) == 1
    while vec.active.any():
        vec.step(np.array([0, 1]))
    rec = vec.record.lane(1)
    assert len(rec["action"]) == vec.total_steps[1] and set(rec["action"].tolist()) == {1}


def test_a_rollout_without_observations_gives_the_same_episodes():
    """`rollout(observe=False)`, for the policies that never read the observation (the fixed orders;
    always-A and the oracle side by side), skips building them and changes nothing else."""
    from delegation_lab.coordinator import baselines

    t = random_table(50)
    acts = delegation_actions(ABC)
    names, plan = baselines.fixed_orders("delegation", acts, ROUTES, 3)
    orders = np.repeat(np.arange(len(names)), 2)
    half = np.arange(4)
    policies = [
        (len(orders), lambda: baselines.planned(plan, orders)),
        (8, lambda: baselines.side_by_side([(half, baselines.always_manager("delegation", acts, "A")),
                                            (half + 4, baselines.oracle(half + 4))])),
    ]
    for lanes, make in policies:
        envs = [VecCoordinatorEnv(t, acts, EnvConfig(packet_size=4), np.arange(lanes) % 3, 100.0, episodes=5,
                                  record=True) for _ in range(2)]
        for env, observe in zip(envs, (True, False), strict=True):
            baselines.rollout(env, make(), observe=observe)
        for key in envs[0].stats:
            np.testing.assert_array_equal(envs[0].stats[key], envs[1].stats[key])
        for lane in range(lanes):
            a, b = envs[0].record.lane(lane), envs[1].record.lane(lane)
            assert all(np.array_equal(a[k], b[k]) for k in a)
