"""history_game: the alternating help game with virtual money (PettingZoo ParallelEnv) and the
seed-batched independent Q-learning of §3.3."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from scipy import stats as scipy_stats
from pettingzoo.test import parallel_api_test

from delegation_lab.params.root import parse_params
from delegation_lab.errors import ConfigError
from delegation_lab.games.help_game import NULL, YES, HelpGame, MoneyHelpEnv
from delegation_lab.games.iql import BatchedIQL, pick, train_iql
from delegation_lab.games.params import HelpGameParams, IQLParams, MoneyParams
from delegation_lab.games.study import Block, greedy_answers, history_learner_metrics, money_metrics, sweep_metrics

from tests.conftest import REPO


def env(with_money: bool, **game) -> MoneyHelpEnv:
    return MoneyHelpEnv(HelpGame.from_params(HelpGameParams(**game), with_money), render_mode="ansi")


def act(physical: int = NULL, offer: int = 0) -> int:
    return physical + 2 * offer


MULTI = HelpGameParams(money=MoneyParams(initial_balance={"A": [1, 0], "B": [0, 2]},
                                         contracts={"A": [[1, 0]], "B": [[0, 1], [1, 1]]}))


@pytest.mark.parametrize("money", [False, True])
def test_parallel_api(money):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the API test warns on missing rewards, dead agents, ...
        parallel_api_test(env(money), num_cycles=200)


def test_parallel_api_multidimensional_money():
    parallel_api_test(MoneyHelpEnv(HelpGame.from_params(MULTI, True)), num_cycles=200)


def test_without_money_yes_costs_the_active_agent_one_and_gives_the_other_hundred():
    e = env(False)
    obs, infos = e.reset(seed=0)
    assert obs["A"]["observation"].tolist() == [0, 0] and infos["A"]["active"] and not infos["B"]["active"]
    assert e.action_space("A").n == 2
    _, rew, term, trunc, _ = e.step({"A": act(YES), "B": act(YES)})  # B is passive: its action is ignored
    assert rew == {"A": -1.0, "B": 100.0} and not any(term.values()) and not any(trunc.values())
    _, rew, *_ = e.step({"A": act(YES), "B": act(NULL)})
    assert rew == {"A": 0.0, "B": 0.0}
    total = {"A": -1.0, "B": 100.0}
    for t in range(2, 20):
        _, rew, term, *_ = e.step({"A": act(YES), "B": act(YES)})
        for k in rew:
            total[k] += rew[k]
    assert all(term.values()) and e.agents == []
    assert total == {"A": -10.0 + 900.0, "B": 100.0 * 10 - 9.0}  # B skipped its first help
    with pytest.raises(RuntimeError):
        e.step({"A": 0, "B": 0})


def test_a_paid_contract_forces_yes_and_moves_money_never_reward():
    e = env(True)
    obs, _ = e.reset()
    assert obs["A"]["observation"].tolist() == [0, 0, 1, 1]  # phase, t, balance A, balance B
    assert obs["A"]["action_mask"].tolist() == [1, 1, 0, 0]  # the active agent cannot pay
    assert obs["B"]["action_mask"].tolist() == [1, 1, 1, 1]  # B can afford its 1-unit offer
    obs, rew, _, _, info = e.step({"A": act(NULL), "B": act(offer=1)})
    assert rew == {"A": -1.0, "B": 100.0}  # the same rewards as a voluntary Yes: money is not reward
    assert info["A"]["forced"] and info["A"]["paid"] and info["A"]["executed"] == "Yes"
    assert obs["A"]["observation"].tolist() == [1, 1, 2, 0]
    assert obs["B"]["action_mask"].tolist() == [1, 1, 0, 0]  # B is active now
    assert obs["A"]["action_mask"].tolist() == [1, 1, 1, 1]
    _, rew, _, _, info = e.step({"A": act(offer=1), "B": act(YES)})  # paid and willing: not forced
    assert rew == {"A": 100.0, "B": -1.0} and info["B"]["paid"] and not info["B"]["forced"]
    assert "balances A=[1] B=[1]" in e.render()


def test_offers_beyond_the_balance_or_by_the_active_agent_are_refused():
    e = env(True, money=MoneyParams(initial_balance={"A": [0], "B": [0]}))
    obs, _ = e.reset()
    assert obs["B"]["action_mask"].tolist() == [1, 1, 0, 0]  # no money, no offer
    with pytest.raises(ValueError, match="agent B: action 2 is not allowed at step 1"):
        e.step({"A": act(YES), "B": act(offer=1)})
    e = env(True)
    e.reset()
    with pytest.raises(ValueError, match="agent A: action 2 is not allowed"):
        e.step({"A": act(offer=1), "B": act()})
    with pytest.raises(ValueError, match="missing actions"):
        e.step({"A": act()})


def test_multidimensional_balances_and_price_lists():
    game = HelpGame.from_params(MULTI, True)
    e = MoneyHelpEnv(game)
    obs, _ = e.reset()
    assert game.dims == 2 and game.n_actions == 6 and game.total.tolist() == [1, 2]
    assert obs["B"]["observation"].tolist() == [0, 0, 1, 0, 0, 2]
    assert obs["B"]["action_mask"].tolist() == [1, 1, 1, 1, 0, 0]  # [0,1] affordable, [1,1] not
    obs, rew, _, _, info = e.step({"A": act(NULL), "B": act(offer=1)})
    assert rew == {"A": -1.0, "B": 100.0} and info["A"]["balance"] == [1, 1] and info["B"]["balance"] == [0, 1]
    assert obs["A"]["action_mask"].tolist() == [1, 1, 1, 1, 0, 0]  # A's single contract [1, 0]
    # conservation over a random masked rollout
    rng = np.random.default_rng(0)
    obs, _ = e.reset()
    while e.agents:
        acts = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in e.agents}
        obs, *_ = e.step(acts)
        bal = obs["A"]["observation"][2:]
        assert (bal[:2] + bal[2:]).tolist() == [1, 2] and (bal >= 0).all()


def test_money_params_are_validated():
    raw = {"history_game": {"game": {"money": {"initial_balance": {"A": [1], "B": [1, 2]}}}}}
    base = __import__("yaml").safe_load((REPO / "params.yaml").read_text())
    bad = copy.deepcopy(base)
    bad["history_game"]["game"]["money"] = raw["history_game"]["game"]["money"]
    with pytest.raises(ConfigError) as err:
        parse_params(bad)
    assert any(p.startswith("history_game.game.money:") and "money dimensions" in p for p in err.value.problems)
    bad = copy.deepcopy(base)
    bad["history_game"]["iql"]["episods"] = 10
    with pytest.raises(ConfigError) as err:
        parse_params(bad)
    assert err.value.problems[0].startswith("history_game.iql.episods: unknown key") and "episodes" in err.value.problems[0]


def test_pick_is_uniform_over_the_mask():
    rng = np.random.default_rng(1)
    mask = np.tile(np.array([[True, False, True]]), (30000, 1))
    counts = np.bincount(pick(rng.random((30000, 3)), mask), minlength=3)
    assert counts[1] == 0 and abs(counts[0] - counts[2]) < 600


def test_paid_active_agent_may_only_say_yes_and_the_payer_only_what_it_affords():
    iql = BatchedIQL(HelpGame.from_params(HelpGameParams(), True), IQLParams(seeds=1, episodes=1), [0])
    balances = np.array([[[0], [2]], [[2], [0]]])  # A poor / A rich
    unpaid = iql.state(0, balances)
    assert iql.mask[0][unpaid].tolist() == [[True, True], [True, True]]  # A active at step 1
    assert iql.mask[0][unpaid + 1].tolist() == [[False, True], [False, True]]
    assert iql.mask[1][unpaid].tolist() == [[True, True], [True, False]]  # B pays only with money
    unpaid = iql.state(1, balances)  # B active at step 2: A pays
    assert iql.mask[0][unpaid].tolist() == [[True, False], [True, True]]


def test_seeds_are_independent_of_the_batch():
    game = HelpGame.from_params(HelpGameParams(steps=6), True)
    p = IQLParams(episodes=60, seeds=1)
    alone = train_iql(game, p, seeds=[3])
    batch = train_iql(game, p, seeds=[1, 3, 4])
    np.testing.assert_array_equal(alone.returns[0], batch.returns[1])
    np.testing.assert_array_equal(alone.q[0][0], batch.q[0][1])
    assert not np.array_equal(batch.returns[0], batch.returns[1])


def test_history_aware_rows_see_the_last_joint_action_markov_rows_do_not_untimed_rows_only_the_phase():
    game = HelpGame.from_params(HelpGameParams(steps=6), False)
    iql = BatchedIQL(game, IQLParams(episodes=1), [0, 0, 0], states=["markov", "last_action", "last_action_untimed"])
    b = np.zeros((3, 2, 0), np.int64)
    after_null, after_yes = (iql.state(2, b, last=np.full(3, x)) for x in (NULL, YES))
    assert after_null[0] == after_yes[0] and after_null[1] != after_yes[1] and after_null[2] != after_yes[2]
    assert iql.state(4, b, last=np.full(3, YES))[2] == after_yes[2] != iql.state(4, b, last=np.full(3, YES))[1]
    start = iql.state(0, b, last=np.full(3, iql.start))
    assert start[2] != iql.state(2, b, last=np.full(3, NULL))[2]  # the opening move is its own state


def test_a_discount_sweep_in_one_batch_equals_separate_runs():
    game = HelpGame.from_params(HelpGameParams(steps=6), False)
    p = IQLParams(episodes=80, seeds=1)
    batch = train_iql(game, p, seeds=[2, 2], gammas=[0.5, 0.95], states=["markov", "last_action"], log_rows=1)
    alone = train_iql(game, p.model_copy(update={"gamma": 0.95}), seeds=[2], states=["last_action"])
    np.testing.assert_array_equal(batch.returns[1], alone.returns[0])
    np.testing.assert_array_equal(batch.q[1][1], alone.q[1][0])
    assert batch.log.executed.shape[0] == 1 and batch.rows(1, 2).seeds == [2]


def test_greedy_answers_read_tit_for_tat_from_the_q_tables():
    game = HelpGame.from_params(HelpGameParams(steps=6), False)
    shape = BatchedIQL(game, IQLParams(episodes=1), [0], states=["last_action"])
    q = [np.zeros_like(x) for x in shape.q]
    for t in range(1, 6):
        i = t % 2
        q[i][0, shape._row(t, 0, YES, 0), YES] = 1.0  # Yes after Yes; Null (0 > -1) after Null
        q[i][0, shape._row(t, 0, NULL, 0), YES] = -1.0
    yes, null, opens = greedy_answers(shape, q, untimed=False)
    assert yes.all() and not null.any() and not opens.any()


def test_sweep_and_history_learner_metrics_have_intervals():
    from delegation_lab.games.params import HistoryGameParams

    params = HistoryGameParams.model_validate({"game": {"steps": 6}, "iql": {"episodes": 60, "seeds": 3},
                                               "gamma_sweep": [0.9], "history_learner": {"gammas": [0.5]}})
    from delegation_lab.games.study import blocks_for, train_blocks

    game = HelpGame.from_params(params.game, False)
    blocks = blocks_for(params, False)
    assert blocks == [Block("main", 0.5, "markov"), Block("sweep", 0.9, "markov"), Block("last_action", 0.5, "last_action"),
                      Block("last_action_untimed", 0.5, "last_action_untimed")]
    by_block = train_blocks(game, params, blocks)
    sweep = sweep_metrics({"no_transfer": by_block})
    assert list(sweep) == ["gamma_0p5", "gamma_0p9"] and sweep["gamma_0p9"]["no_transfer"]["seeds"] == 3
    h = history_learner_metrics(game, params, by_block)
    block = h["last_action"]["gamma_0p5"]
    assert block["return_mean_ci"][0] <= block["return_mean"] <= block["return_mean_ci"][1]
    assert 0 <= block["tit_for_tat"] <= block["answers_help"] <= 1 and block["markov_return_mean"] == by_block[blocks[0]].eval_returns.mean()


def assert_reproduces_0_and_990(episodes: int, seeds: int) -> None:
    params = IQLParams(episodes=episodes, seeds=seeds)
    plain = train_iql(HelpGame.from_params(HelpGameParams(), False), params)
    money = train_iql(HelpGame.from_params(HelpGameParams(), True), params)
    # without money: Null everywhere, return 0; early on, random play helped half the time
    assert (plain.eval_returns == 0).all() and (plain.eval_helps == 0).all()
    assert plain.returns[:, :20].mean() > 300
    # with money: each agent pays on the other's turns; both help at all 10 of their stages
    assert (money.eval_returns == 990).all() and (money.eval_helps == 10).all() and (money.eval_payments == 10).all()
    assert money.returns[:, -params.late_window:].mean() > 950


def test_iql_reproduces_0_and_990_on_a_reduced_run():
    assert_reproduces_0_and_990(episodes=1000, seeds=5)


@pytest.mark.slow
def test_iql_reproduces_0_and_990_at_paper_scale():
    assert_reproduces_0_and_990(episodes=5000, seeds=20)


def test_money_metrics_use_the_sample_std_and_a_t_interval_over_seeds():
    game = HelpGame.from_params(HelpGameParams(steps=6), False)
    result = train_iql(game, IQLParams(episodes=60, seeds=1), seeds=[1, 3, 4])
    m = money_metrics(result, 10, confidence=0.95)
    late = result.returns[:, -10:].mean(axis=(1, 2))
    assert late.std() > 0 and m["train_late_return_std"] == pytest.approx(late.std(ddof=1))  # ddof 1, as every study
    lo, hi = m["train_late_return_mean_ci"]
    half = scipy_stats.t.ppf(0.975, 2) * late.std(ddof=1) / np.sqrt(3)
    assert (lo, hi) == pytest.approx((late.mean() - half, late.mean() + half))
