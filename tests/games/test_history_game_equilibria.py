"""history_game: exact equilibrium value sets — the paper's motivating example, and random small
games checked against independent brute-force searches over every deterministic profile."""

from __future__ import annotations

import json
import time
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.games.bruteforce import (
    TooManyProfiles,
    check_history_profile,
    every_markov_values,
    every_profile_history_values,
    random_game_spec,
    spe_history_values,
)
from delegation_lab.games.equilibria import (
    GameTooLarge,
    algorithm1_history_values,
    history_profile,
    solve,
    solve_history,
)
from delegation_lab.games.spec import compile_game, load_game, parse_game_spec

F = Fraction
PAPER_HISTORY = [(0, 5), (F("4.4"), 6), (F("4.5"), 5), (F("8.9"), 6), (9, 5)]
PAPER_MARKOV = [(0, 5), (F("4.5"), 5), (9, 5)]


def rounded(values) -> list[tuple[float, ...]]:
    return sorted({tuple(round(float(x), 9) + 0.0 for x in v) for v in values})


def random_game(seed: int, n_states: int, horizon: int, max_support: int = 2):
    return compile_game(parse_game_spec(random_game_spec(seed, n_states, horizon, max_support=max_support)))


def test_motivating_example_reproduces_the_papers_sets_exactly():
    game = load_game("motivating_example")
    sol = solve(game, favour="B")
    assert sol.history.values() == [tuple(F(x) for x in v) for v in PAPER_HISTORY]
    assert sol.markov.values() == [tuple(F(x) for x in v) for v in PAPER_MARKOV]
    assert sol.favoured == (F(89, 10), F(6))
    assert algorithm1_history_values(game) == sol.history.values()  # the literal selectors agree
    # only 256 continuation selectors at step 1, as Algorithm 1 enumerates them
    assert [c.selectors for c in sol.history.costs if c.step == 1] == [256]


def test_longer_builtins_no_reciprocity_in_the_help_game_and_history_only_reciprocity_before_a_coordination_finale():
    help6 = solve(load_game("help_game_6"), favour="B")  # 6 steps: backward induction from a unique stage equilibrium
    assert help6.game.horizon == 6 and help6.history.values() == help6.markov.values() == [(0, 0)]
    finale = solve(load_game("reciprocity_finale"), favour="B")
    assert finale.history.values() == [(1, 1), (4, 8), (5, 5), (7, 7), (8, 4)]
    assert finale.markov.values() == [(1, 1), (5, 5)]  # mutual help (7, 7) needs a history-dependent finale


def test_favoured_profile_rewards_A_for_its_costly_first_action():
    game = load_game("motivating_example")
    sol = solve(game, favour="B")
    nodes = history_profile(sol.history, sol.favoured)
    assert check_history_profile(game, nodes) == []
    root = nodes[0]
    assert game.joint_dict(root.action)["A"] == "a2" and root.value == (F("8.9"), 6)
    # B's second action depends on A's first: b2 after a2 (on path), b1 after a1, in both states
    second = {(game.joint_dict(n.history[1])["A"], game.states[n.history[2]]): game.joint_dict(n.action)["B"]
              for n in nodes if n.step == 2 and game.joint_dict(n.history[1])["B"] == game.joint_dict(root.action)["B"]}
    assert second == {("a1", "s1"): "b1", ("a1", "s2"): "b1", ("a2", "s1"): "b2", ("a2", "s2"): "b2"}
    # favouring A picks A's best value instead; no favour takes the largest total
    assert solve(game, favour="A").favoured == (9, 5)
    assert solve(game).favoured == (F("8.9"), 6)


def test_every_value_has_a_verified_example_profile():
    game = load_game("motivating_example")
    sol = solve(game)
    for v in sol.history.values():
        nodes = history_profile(sol.history, v)
        assert len(nodes) == 9 and nodes[0].value == v
        assert check_history_profile(game, nodes) == []
    for v in sol.markov.values():
        prof = sol.markov.profile(v)
        assert len(prof) == 3  # (1, s1), (2, s1), (2, s2)
        assert len({(t, x) for t, x, _ in prof}) == 3


def test_the_profile_checker_catches_a_non_equilibrium():
    game = load_game("motivating_example")
    sol = solve(game)
    nodes = history_profile(sol.history, (F("8.9"), 6))
    # make B play b1 after A's a2: then a2 no longer pays for A
    broken = [n if not (n.step == 2 and n.on_path) else type(n)(n.step, n.history, 0, n.value, n.on_path, n.role) for n in nodes]
    assert any("one-shot deviation" in p or "claimed value" in p for p in check_history_profile(game, broken))


@pytest.mark.parametrize("seed", range(6))
def test_two_step_games_match_the_enumeration_of_every_profile(seed):
    """2 steps, 2 states, 2x2 actions: all 4^9 deterministic profiles enumerated."""
    game = random_game(seed, 2, 2)
    sol = solve(game)
    every, n_spe = every_profile_history_values(game)
    assert rounded(sol.history.values()) == sorted(every)
    assert len(spe_history_values(game)) == n_spe  # the subgame-organised search finds the same profiles
    assert rounded(sol.markov.values()) == rounded(every_markov_values(game))
    assert rounded(algorithm1_history_values(game, 10**6)) == rounded(sol.history.values())


def test_random_two_and_three_step_games_match_the_brute_force():
    """2-3 states, 2-3 steps: history sets vs every SPE profile, Markov sets vs every Markov profile."""
    wanted = {(2, 2): 10, (3, 2): 10, (2, 3): 4, (3, 3): 4}  # (states, steps): games to check
    checked = dict.fromkeys(wanted, 0)
    nonempty = history_richer = 0
    seed = 0
    while checked != wanted and seed < 400:
        n_states, horizon = 2 + seed % 2, 2 + (seed // 2) % 2
        seed += 1
        if checked[(n_states, horizon)] >= wanted[(n_states, horizon)]:
            continue
        game = random_game(seed, n_states, horizon, max_support=1 if horizon == 3 and seed % 3 else 2)
        try:
            brute = spe_history_values(game, max_combinations=3_000)
        except TooManyProfiles:
            continue
        sol = solve(game)
        assert rounded(sol.history.values()) == rounded(brute), f"seed {seed}"
        assert rounded(sol.markov.values()) == rounded(every_markov_values(game)), f"seed {seed}"
        assert set(sol.markov.values()) <= set(sol.history.values())
        nonempty += bool(brute)
        history_richer += len(set(sol.history.values())) > len(set(sol.markov.values()))
        checked[(n_states, horizon)] += 1
    assert checked == wanted, checked
    # meaningful games: most have equilibria, and in several history dependence adds values
    assert nonempty >= 20 and history_richer >= 4, (nonempty, history_richer)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), n_states=st.integers(2, 3), horizon=st.integers(2, 3))
def test_every_reported_value_comes_with_a_subgame_perfect_profile(seed, n_states, horizon):
    game = random_game(seed, n_states, horizon)
    sol = solve_history(game)
    values = sol.values()
    for v in values[:3] + values[-2:]:
        nodes = history_profile(sol, v)
        assert check_history_profile(game, nodes) == []
    if values:  # the punishments are the worst equilibrium values for each player
        for i in range(game.n_players):
            assert sol.scaled.exact(sol.punishment[0][game.initial][i])[i] == min(v[i] for v in values)


def test_three_steps_two_states_finish_in_seconds_and_large_games_fail_fast():
    game = random_game(5, 2, 3)
    start = time.process_time()  # CPU seconds: a busy machine stretches wall time, not these
    solve(game)
    assert time.process_time() - start < 5
    big = compile_game(parse_game_spec(random_game_spec(1, n_states=3, horizon=5, n_actions=3, max_support=3, indifference=0.6)))
    start = time.process_time()
    with pytest.raises(GameTooLarge, match=r"game too large: step \d, state s\d needs .* continuation combinations .*limit 20,000.*Algorithm 1 would enumerate ~10\^"):
        solve_history(big, max_combinations=20_000)
    assert time.process_time() - start < 5


def test_discounting_and_exact_fractions():
    raw = {"name": "d", "players": ["A"], "states": ["s"], "initial_state": "s", "horizon": 3, "discount": "1/3",
           "actions": {"A": ["x", "y"]}, "rewards": [{"when": {"A": "y"}, "reward": {"A": "1/7"}}]}
    sol = solve(compile_game(parse_game_spec(raw)))
    assert sol.history.values() == [(F(1, 7) * (1 + F(1, 3) + F(1, 9)),)] == sol.markov.values()


runner = CliRunner()


def test_cli_solve_prints_the_table_and_writes_json(tmp_path: Path):
    out = tmp_path / "me.json"
    result = runner.invoke(app, ["game", "solve", "motivating_example", "--favour", "B", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "5 distinct value vectors" in result.output and "3 distinct value vectors" in result.output
    assert "V = (A 8.9, B 6)" in result.output and "punishes A" in result.output
    data = json.loads(out.read_text())
    assert [tuple(e["values"].values()) for e in data["history"]] == [(0.0, 5.0), (4.4, 6.0), (4.5, 5.0), (8.9, 6.0), (9.0, 5.0)]
    assert [e["exact"] for e in data["markov"]] == [{"A": "0", "B": "5"}, {"A": "9/2", "B": "5"}, {"A": "9", "B": "5"}]
    assert data["favoured"]["values"] == {"A": 8.9, "B": 6.0} and data["favoured"]["player"] == "B"
    assert all(len(e["example_profile"]["nodes"]) == 9 for e in data["history"])
    assert data["cost"]["history"]["algorithm1_selectors"] == 258


def test_cli_bad_input_exits_with_the_rule(tmp_path: Path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(runner.invoke(app, ["game", "builtin", "motivating_example"]).output.replace("s2: 0.5}", "s2: 0.4}"))
    result = runner.invoke(app, ["game", "solve", str(spec)])
    assert result.exit_code == 2 and "transitions[0].next: probabilities sum to 9/10" in result.output
    result = runner.invoke(app, ["game", "solve", "motivating_example", "--favour", "C"])
    assert result.exit_code == 2 and "unknown player 'C'" in result.output
    result = runner.invoke(app, ["game", "solve", "motivating_example", "--max-combinations", "3"])
    assert result.exit_code == 1 and "game too large" in result.output
    assert "motivating_example" in runner.invoke(app, ["game", "builtin"]).output
