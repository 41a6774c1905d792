"""Shapley credit (delegation_lab.credit.shapley): the four axioms on random games (hypothesis),
exact against the textbook formula, Monte Carlo against exact within its interval, mixed team
sizes, the refusals, and the planner-worker coalition game's masking semantics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delegation_lab.credit.env import DISTRACTOR, EVIDENCE, NONE, TeamGame, TeamRollouts
from delegation_lab.credit.shapley import (
    TableGame,
    coalition_masks,
    exact_from_values,
    shapley,
    shapley_by_definition,
    shapley_weight_matrix,
)
from delegation_lab.errors import InputError

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def games(draw, min_n: int = 1, max_n: int = 6, rows: int = 3):
    n = draw(st.integers(min_n, max_n))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(rows, 2**n)) * draw(st.sampled_from([0.01, 1.0, 100.0]))
    return TableGame(table, n)


def bit(i: int) -> int:
    return 1 << i


# ------------------------------------------------------------------------------------------ axioms


@SETTINGS
@given(games())
def test_efficiency_credits_sum_to_the_grand_coalitions_gain(game):
    res = shapley(game)
    np.testing.assert_allclose(res.credit.sum(axis=1), game.table[:, -1] - game.table[:, 0], rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(res.v_full, game.table[:, -1])
    np.testing.assert_allclose(res.v_empty, game.table[:, 0])


@SETTINGS
@given(games(min_n=2), st.data())
def test_symmetric_players_get_equal_credit(game, data):
    n = game.n
    i, j = data.draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
    masks = coalition_masks(n)
    # make i and j interchangeable: v(S) depends on S only through the set with i and j swapped-invariant
    swapped = masks.copy()
    swapped[:, [i, j]] = swapped[:, [j, i]]
    index = (swapped.astype(np.int64) << np.arange(n)).sum(axis=1)
    table = (game.table + game.table[:, index]) / 2
    res = shapley(TableGame(table, n))
    np.testing.assert_allclose(res.credit[:, i], res.credit[:, j], rtol=1e-9, atol=1e-9)


@SETTINGS
@given(games(min_n=2), st.data())
def test_a_null_player_gets_nothing(game, data):
    n = game.n
    i = data.draw(st.integers(0, n - 1))
    masks = coalition_masks(n)
    without = np.arange(2**n) & ~bit(i)  # v(S + i) = v(S)
    table = game.table[:, without]
    res = shapley(TableGame(table, n))
    np.testing.assert_allclose(res.credit[:, i], 0.0, atol=1e-9)
    assert masks.shape == (2**n, n)


@SETTINGS
@given(games(), st.integers(0, 2**31 - 1))
def test_additivity(game, seed):
    other = np.random.default_rng(seed).normal(size=game.table.shape)
    a = shapley(game).credit
    b = shapley(TableGame(other, game.n)).credit
    c = shapley(TableGame(game.table + other, game.n)).credit
    np.testing.assert_allclose(a + b, c, rtol=1e-9, atol=1e-9)


@SETTINGS
@given(games(max_n=5, rows=1))
def test_exact_matches_the_textbook_formula(game):
    def value(s: frozenset) -> float:
        return float(game.table[0, sum(bit(i) for i in s)])

    np.testing.assert_allclose(shapley(game).credit[0], shapley_by_definition(value, game.n), rtol=1e-9, atol=1e-9)


def test_weight_matrix_rows_are_the_formula_and_columns_sum_to_zero():
    n = 4
    w = shapley_weight_matrix(n)
    np.testing.assert_allclose(w.sum(axis=0), 0.0, atol=1e-12)  # a constant game gives every player 0
    # player 0 in the grand coalition: weight (n-1)! 0! / n! = 1/n
    assert w[-1, 0] == pytest.approx(1 / n)
    assert w[0, 0] == pytest.approx(-1 / n)  # the empty coalition enters with -0! (n-1)! / n!


def test_a_glove_game_by_hand():
    # v = 1 iff the coalition holds the left glove (player 0) and a right glove (1 or 2): phi = (2/3, 1/6, 1/6)
    n = 3
    masks = coalition_masks(n)
    v = (masks[:, 0] & (masks[:, 1] | masks[:, 2])).astype(float)
    np.testing.assert_allclose(exact_from_values(v[None])[0], [2 / 3, 1 / 6, 1 / 6])


def test_leave_one_out_is_the_one_agent_ablation():
    rng = np.random.default_rng(3)
    n = 4
    table = rng.normal(size=(2, 2**n))
    res = shapley(TableGame(table, n), "leave_one_out")
    full = 2**n - 1
    expected = table[:, [full]] - table[:, [full & ~bit(i) for i in range(n)]]
    np.testing.assert_allclose(res.credit, expected)
    assert res.coalitions == 2 * (n + 2)


# -------------------------------------------------------------------------------- Monte Carlo


def test_monte_carlo_covers_exact_within_its_interval():
    rng = np.random.default_rng(11)
    n, T = 7, 40
    table = rng.normal(size=(T, 2**n))
    exact = shapley(TableGame(table, n)).credit
    mc = shapley(TableGame(table, n), "monte_carlo", samples=400, confidence=0.99, seed=5)
    inside = (exact >= mc.ci_low) & (exact <= mc.ci_high)
    assert inside.mean() >= 0.97, inside.mean()  # 99 % intervals, 280 of them
    np.testing.assert_allclose(mc.credit.sum(axis=1), table[:, -1] - table[:, 0], atol=1e-9)  # exactly efficient
    assert np.abs(mc.credit - exact).max() < 0.6
    assert (mc.ci_high > mc.ci_low).all()
    assert set(mc.estimator) == {"monte_carlo"}


def test_auto_switches_to_monte_carlo_beyond_the_exact_limit():
    rng = np.random.default_rng(2)
    table = rng.normal(size=(3, 2**5))
    res = shapley(TableGame(table, 5), "auto", samples=50, exact_max=4)
    assert set(res.estimator) == {"monte_carlo"}
    res = shapley(TableGame(table, 5), "auto", samples=50, exact_max=5)
    assert set(res.estimator) == {"exact"}
    np.testing.assert_array_equal(res.ci_low, res.credit)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"estimator": "auto", "exact_max": 4}, "no sample budget was given: pass --samples N"),
    ({"estimator": "exact", "exact_max": 4}, "above the exact limit of 4 agents"),
    ({"estimator": "monte_carlo"}, "needs a sample budget"),
    ({"estimator": "monte_carlo", "samples": 1}, "at least 2 orderings"),
    ({"confidence": 1.0}, "confidence must lie in"),
])
def test_bad_requests_are_refused_before_any_work(kwargs, message):
    game = TableGame(np.zeros((2, 2**5)), 5)
    with pytest.raises(InputError, match=message):
        shapley(game, **kwargs)


# -------------------------------------------------------------------------- mixed team sizes


class PaddedGame:
    """A weighted-majority game per row over up to 6 slots, some slots empty (null players)."""

    def __init__(self, weights: np.ndarray, present: np.ndarray, quota: float):
        self.weights, self._present, self.quota = weights, present, quota
        self.calls = 0

    @property
    def present(self):
        return self._present

    def values(self, rows, masks):
        self.calls += 1
        assert not (masks & ~self._present[rows][:, None, :]).any(), "an absent slot was masked in"
        w = (np.broadcast_to(masks, (len(rows), *masks.shape[1:])) * self.weights[rows][:, None, :]).sum(-1)
        return (w >= self.quota).astype(float) + 0.1 * w


def test_rows_with_absent_slots_are_credited_over_their_own_agents_only():
    rng = np.random.default_rng(0)
    T, slots = 30, 6
    present = rng.random((T, slots)) < 0.6
    present[:, 0] = True
    weights = rng.integers(1, 5, (T, slots)).astype(float) * present
    game = PaddedGame(weights, present, 5.0)
    res = shapley(game)
    assert (res.credit[~present] == 0).all()
    n = present.sum(axis=1)
    assert res.coalitions == int((2**n).sum())  # 2^n per row, not 2^slots
    for t in range(5):  # against the compact game of the present agents
        idx = np.flatnonzero(present[t])
        m = coalition_masks(len(idx))
        w = (m * weights[t, idx]).sum(axis=1)
        v = (w >= 5.0) + 0.1 * w
        np.testing.assert_allclose(res.credit[t, idx], exact_from_values(v[None])[0])


def test_rows_restricts_the_work():
    game = TableGame(np.random.default_rng(1).normal(size=(10, 8)), 3)
    res = shapley(game, rows=np.array([2, 5]))
    assert (res.credit[[0, 1, 3, 4, 6, 7, 8, 9]] == 0).all()
    assert res.coalitions == 2 * 8
    np.testing.assert_allclose(res.credit[5], shapley(game).credit[5])


# ---------------------------------------------------------------------- the team game semantics


def team(out_f, out_r, recall, tokens_w, planner_tokens=100.0) -> TeamRollouts:
    """One rollout with hops [H] and K = 2 worker slots per hop."""
    out_f = np.asarray(out_f, dtype=np.int8)[None]
    out_r = np.asarray(out_r, dtype=np.int8)[None]
    H, K = out_f.shape[1:]
    present = np.asarray(tokens_w)[None] > 0
    return TeamRollouts(np.zeros(1, dtype=np.int64), np.ones((1, H), dtype=bool), present.sum(-1), present,
                        np.where(present, 2, 0), np.asarray(recall, dtype=bool)[None], out_f, out_r, present.copy(),
                        np.asarray(tokens_w, dtype=float)[None], np.array([planner_tokens]))


def values_of(game: TeamGame) -> np.ndarray:
    n = game.present.shape[1]
    return game.values(np.array([0]), coalition_masks(n)[None])[0]


def test_a_caveat_turns_a_right_answer_wrong_and_masking_it_restores_it():
    # hop 0: worker 0a found the fact; hop 1: recalled, but worker 1a brings a caveat
    r = team(out_f=[[EVIDENCE, NONE], [DISTRACTOR, NONE]], out_r=[[EVIDENCE, NONE], [DISTRACTOR, NONE]],
             recall=[False, True], tokens_w=[[1000, 0], [1000, 0]])
    game = TeamGame(r, 0.0)
    correct, tokens = game.full()  # slots: 0 planner, 1 worker 0a, 3 worker 1a (2 and 4 absent)
    assert not correct[0] and tokens[0] == 2100
    v = values_of(game)
    assert v[bit(0) | bit(1) | bit(3)] == 0.0  # everyone: wrong
    assert v[bit(0) | bit(1)] == 1.0  # without the harmful worker: right
    assert v[bit(0)] == 0.0  # without the useful one: hop 0 unknown
    res = shapley(game)
    assert res.credit[0, 3] < 0 < res.credit[0, 1]


def test_masking_the_planner_replays_the_workers_on_the_raw_question():
    # focused, the worker finds the fact; on the raw question the same draw finds nothing
    r = team(out_f=[[EVIDENCE, NONE]], out_r=[[NONE, NONE]], recall=[False], tokens_w=[[1000, 0]])
    game = TeamGame(r, token_cost=0.01)
    v = values_of(game)
    assert v[bit(0) | bit(1)] == pytest.approx(1.0 - 0.01 * 1.1)  # both: right, 1100 tokens
    assert v[bit(1)] == pytest.approx(0.0 - 0.01 * 1.0)  # the worker alone (planner masked): wrong
    assert v[bit(0)] == pytest.approx(-0.01 * 0.1)  # the planner alone: no evidence
    phi = shapley(game).credit[0]
    # two-player game: each gets half of the synergy minus its own tokens
    assert phi[0] == pytest.approx(0.5 - 0.001) and phi[1] == pytest.approx(0.5 - 0.01)
    assert math.isclose(phi.sum(), v[bit(0) | bit(1)] - v[0])


@pytest.mark.parametrize(("workers_per_hop", "token_cost"), [(2, 0.0), (2, 0.01), (1, 0.01)])
def test_the_closed_form_team_shapley_equals_the_enumeration_of_every_coalition(workers_per_hop, token_cost):
    from delegation_lab.credit.env import ToolTable, make_draws, make_pool, team_rollouts
    from delegation_lab.credit.params import EnvParams
    from delegation_lab.credit.team_shapley import team_shapley

    env = EnvParams(max_workers_per_hop=workers_per_hop)
    rng = np.random.default_rng(workers_per_hop)
    pool = make_pool(env, 50, rng)
    H, K, L = pool.max_hops, workers_per_hop, 400
    task = rng.integers(0, pool.n, L)
    n_workers = rng.choice(K + 1, (L, H), p=np.r_[0.1, np.full(K, 0.9 / K)])
    tool = rng.integers(0, 4, (L, H, K))
    roll = team_rollouts(env, ToolTable.of(env), pool, task, n_workers, tool, make_draws(rng, (L,), H, K))
    game = TeamGame(roll, token_cost)
    exact = shapley(game, "exact").credit
    np.testing.assert_allclose(team_shapley(game), exact, atol=1e-12)
    rows = np.array([3, 7, 11])
    np.testing.assert_allclose(team_shapley(game, rows), exact[rows], atol=1e-12)
    assert (np.abs(exact) > 0.1).sum() > L // 4  # the rollouts give real, not only token, credit
