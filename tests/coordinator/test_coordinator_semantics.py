"""What a coordinator episode returns when its last attempt is rejected (`rejected_last_answer`):
inside the coordinator, always-A is solver A alone, item by item, under a noisy judge; the paper's
`wrong` keeps retrying and grades a drop as wrong."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from delegation_lab.coordinator.envs import EnvConfig, VecCoordinatorEnv
from delegation_lab.coordinator.actions import management_actions
from delegation_lab.coordinator.params import CoordinatorParams, SweepParams
from delegation_lab.coordinator.study import CoordinatorStudy, prepare_inputs
from delegation_lab.evaluation.verifier import Verifier

from tests.fake_cache import write_fake_cache

SOLVERS = ["A", "B", "C"]
NOISY = Verifier("judge", false_positive_rate=0.2, false_negative_rate=0.3, seed=0, source="test")


def fixed_runs(root, **overrides):
    torch.set_num_threads(1)
    params = CoordinatorParams(seeds=2, episodes=4, late_episodes=2, packet_size=8, studies=["management"],
                               methods=["always_a", "fixed_order", "oracle"], sweep=SweepParams(seeds=0),
                               trajectories=False, **overrides)
    layout, data = prepare_inputs(params, SOLVERS, None, write_fake_cache(root))
    study = CoordinatorStudy(params, data, layout, log=lambda _: None, verifier=NOISY)
    return params, data, {r.method: r for r in study.run()}


def test_always_a_inside_the_coordinator_is_solver_a_alone_item_by_item(tmp_path):
    params, data, runs = fixed_runs(tmp_path)
    a = data.test.solvers.index("A")
    right, cost = data.test.correct[:, a], data.test.cost[:, a]
    always = runs["always_a"].test.item_outcomes
    fixed = runs["fixed_order"]
    only_a = [lane for lane in range(fixed.lanes) if fixed.operating_point(lane) == "A"]
    for outcomes, lanes in ((always, range(params.seeds)), (fixed.test.item_outcomes, only_a)):
        for lane in lanes:
            np.testing.assert_array_equal(outcomes["correct"][lane], right)
            np.testing.assert_allclose(outcomes["cost_usd"][lane], cost, rtol=0, atol=0)
    # the judge rejected some of A's right answers: the rule was exercised
    verdicts = NOISY.table(list(data.test.solvers), data.test.item_ids, data.test.correct, [0])[0][:, a]
    assert (right & ~verdicts).sum() >= 5


def test_the_papers_rule_retries_and_grades_a_drop_as_wrong(tmp_path):
    params, data, runs = fixed_runs(tmp_path, rejected_last_answer="wrong")
    a = data.test.solvers.index("A")
    right, cost = data.test.correct[:, a], data.test.cost[:, a]
    verdicts = NOISY.table(list(data.test.solvers), data.test.item_ids, data.test.correct, [0])[0][:, a]
    out = runs["always_a"].test.item_outcomes
    np.testing.assert_array_equal(out["correct"][0], right & verdicts)  # a rejected answer is wrong
    np.testing.assert_allclose(out["cost_usd"][0], np.where(verdicts, cost, params.max_attempts * cost))


@pytest.mark.parametrize("rule", ["return", "wrong"])
def test_the_reward_is_the_papers_under_both_rules(rule):
    """One item, A's right answer rejected twice: attempt 3 drops it with the fail penalty either way;
    only the graded answer differs (the returned right answer, or wrong)."""
    from delegation_lab.coordinator.data import SolverTable

    table = SolverTable("test", ("A", "B"), np.array(["i0"]), np.array([1]), np.array([[True, False]]),
                        np.array([[0.01, 0.001]]), np.array([[0.01, 0.001]]), None, None)
    env = VecCoordinatorEnv(table, management_actions([["A"], ["A", "B"]], ("A", "B")),
                            EnvConfig(packet_size=1, max_attempts=3, use_map=False, rejected_last_answer=rule),
                            [0], 1.0, episodes=1, mode="sequential", verdicts=np.array([[[False, False]]]))
    env.reset()
    rewards = [float(env.step(np.array([a]))[1][0]) for a in (0, 1, 0)]
    np.testing.assert_allclose(rewards, [-0.01, -0.00105, -0.01 - 1.0])
    assert bool(env.item_outcomes["correct"][0, 0]) is (rule == "return")  # the last attempt was A's right answer
