"""history_game: the game-spec format — the builtin, exact numbers, and errors naming the rule."""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from delegation_lab.games.spec import (
    GameSpecError,
    builtin_names,
    builtin_text,
    compile_game,
    load_game,
    load_game_spec,
    parse_game_spec,
)

BUILTIN = yaml.safe_load(builtin_text("motivating_example"))


def problems(raw: dict) -> list[str]:
    with pytest.raises(GameSpecError) as err:
        parse_game_spec(raw, "spec.yaml")
    assert str(err.value).startswith("spec.yaml: invalid game spec")
    return err.value.problems


def test_builtin_compiles_to_the_papers_tables():
    assert "motivating_example" in builtin_names()
    game = load_game("motivating_example")
    assert game.players == ("A", "B") and game.states == ("s1", "s2") and game.horizon == 2
    j = {game.joint_text(k): k for k in range(len(game.joint))}
    # step 1: a2 costs A 0.1 (exactly 1/10) and gives B 1, whatever B does
    assert game.reward[0][0][j["a2,b1"]] == (Fraction(-1, 10), Fraction(1)) == game.reward[0][0][j["a2,b2"]]
    assert game.reward[0][0][j["a1,b2"]] == (0, 0)
    # step 2: rules add up; b2 gives A 9 in both states, s2 gives B 10
    assert game.reward[1][1][j["a1,b2"]] == (9, 10) and game.reward[1][1][j["a2,b1"]] == (0, 10)
    assert game.reward[1][0][j["a2,b2"]] == (9, 0) and game.reward[1][0][j["a1,b1"]] == (0, 0)
    assert game.transition[0][0][j["a1,b1"]] == ((0, Fraction(1, 2)), (1, Fraction(1, 2)))
    assert game.reachable == ((0,), (0, 1))


def test_fraction_strings_and_spec_files(tmp_path: Path):
    raw = copy.deepcopy(BUILTIN)
    raw["transitions"][0]["next"] = {"s1": "1/3", "s2": "2/3"}
    raw["discount"] = "9/10"
    path = tmp_path / "third.yaml"
    path.write_text(yaml.safe_dump(raw))
    game = compile_game(load_game_spec(path))
    assert game.discount == Fraction(9, 10)
    assert dict(game.transition[0][0][0]) == {0: Fraction(1, 3), 1: Fraction(2, 3)}


def test_probabilities_must_sum_to_one_exactly():
    raw = copy.deepcopy(BUILTIN)
    raw["transitions"][0]["next"] = {"s1": 0.5, "s2": 0.4}
    (p,) = problems(raw)
    assert p.startswith("transitions[0].next: probabilities sum to 9/10") and "not 1" in p
    raw["transitions"][0]["next"] = {"s1": "1/3", "s2": 0.6667}  # close is not equal
    assert problems(raw)[0].startswith("transitions[0].next: probabilities sum to")


def test_unknown_state_player_and_action_name_the_rule_and_field():
    raw = copy.deepcopy(BUILTIN)
    raw["rewards"][1]["state"] = "s9"
    raw["rewards"][2]["when"] = {"C": "c1"}
    raw["rewards"][3]["when"] = {"B": "b3"}
    raw["rewards"][0]["reward"] = {"A": 1, "Z": 2}
    raw["transitions"][0]["next"] = {"s1": 0.5, "s3": 0.5}
    got = problems(raw)
    assert any(p.startswith("rewards[1].state: unknown state 's9'") for p in got)
    assert any(p.startswith("rewards[2].when.C: unknown player") for p in got)
    assert any(p.startswith("rewards[3].when.B: unknown action 'b3' of player B (actions: b1, b2)") for p in got)
    assert any(p.startswith("rewards[0].reward.Z: unknown player") for p in got)
    assert any(p.startswith("transitions[0].next.s3: unknown state") for p in got)
    raw = copy.deepcopy(BUILTIN)
    raw["initial_state"] = "s0"
    assert problems(raw) == ["initial_state: unknown state 's0' (states: s1, s2)"]


def test_missing_transition_for_a_reachable_non_final_step():
    raw = copy.deepcopy(BUILTIN)
    raw["horizon"] = 3
    raw["rewards"].append({"step": 3, "when": {}, "reward": {"A": 1}})
    (p,) = problems(raw)  # step 2 has no transition rule for s1 or s2
    assert p.startswith("transitions: no rule matches step 2, state s1, joint action (A=a1, B=b1)")
    assert "(and 5 more)" in p
    raw["transitions"].append({"step": 2, "when": {}, "next": {"s1": 1}})
    assert compile_game(parse_game_spec(raw)).horizon == 3
    # a transition only for some joint actions still leaves the rest uncovered
    raw = copy.deepcopy(BUILTIN)
    raw["transitions"][0]["when"] = {"A": "a1"}
    (p,) = problems(raw)
    assert "step 1, state s1, joint action (A=a2, B=b1)" in p


def test_horizon_steps_and_discount_are_checked():
    raw = copy.deepcopy(BUILTIN)
    raw["horizon"] = 0
    (p,) = problems(raw)
    assert p.startswith("horizon: Input should be greater than or equal to 1")
    raw = copy.deepcopy(BUILTIN)
    raw["rewards"][0]["step"] = 3
    raw["transitions"][0]["step"] = 2
    raw["discount"] = 1.5
    got = problems(raw)
    assert "rewards[0].step: 3 is beyond the last step 2" in got
    assert any(p.startswith("transitions[0].step: 2 is the last step (horizon 2)") for p in got)
    assert any(p.startswith("discount: must lie in [0, 1]") for p in got)


def test_structure_errors_name_the_field():
    raw = copy.deepcopy(BUILTIN)
    raw["rewards"][0]["rewad"] = {"A": 1}
    raw["transitions"][0]["next"]["s2"] = "half"
    raw["actions"]["A"] = ["a1", True]  # YAML's unquoted `yes`
    got = problems(raw)
    assert "rewards[0].rewad: unknown key" in got
    assert any(p.startswith("transitions[0].next.s2: expected a number or a fraction") for p in got)
    assert any(p.startswith("actions.A[1]: Input should be a valid string") and "quote the name" in p for p in got)
    raw = copy.deepcopy(BUILTIN)
    del raw["players"]
    assert problems(raw) == ["players: required key is missing"]
    assert problems([1, 2]) == ["(top level): expected a mapping with name, players, states, ..."]  # type: ignore[arg-type]


def test_duplicates_and_action_lists():
    raw = copy.deepcopy(BUILTIN)
    raw["states"] = ["s1", "s2", "s1"]
    raw["actions"] = {"A": ["a1", "a1"], "C": ["c1"]}
    got = problems(raw)
    assert "states: duplicate name(s) ['s1']" in got
    assert "actions.A: duplicate action(s) ['a1']" in got
    assert any(p.startswith("actions: no action list for player 'B'") for p in got)
    assert any(p.startswith("actions.C: unknown player") for p in got)


def test_unknown_reference_and_bad_yaml(tmp_path: Path):
    from delegation_lab.errors import InputError

    with pytest.raises(InputError, match="no builtin game of that name"):
        load_game_spec("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nplayers: [A\n")
    with pytest.raises(GameSpecError, match="line 3"):
        load_game_spec(bad)


def test_single_state_games_need_no_transitions():
    raw = {"name": "pd", "players": ["A", "B"], "states": ["s"], "initial_state": "s", "horizon": 2,
           "actions": {"A": ["c", "d"], "B": ["c", "d"]},
           "rewards": [{"when": {"A": "d"}, "reward": {"A": 2, "B": -1}}, {"when": {"B": "d"}, "reward": {"B": 2, "A": -1}}]}
    game = compile_game(parse_game_spec(raw))
    assert game.transition[0][0][0] == ((0, Fraction(1)),)
    assert game.reward[1][0][3] == (1, 1)  # both defect: 2 - 1 each


def test_a_duplicate_key_in_a_game_spec_names_the_key_and_both_lines(tmp_path):
    from delegation_lab.games.spec import GameSpecError, load_game_spec

    spec = tmp_path / "dup.yaml"
    spec.write_text("name: g\nname: h\n")
    with pytest.raises(GameSpecError, match="key 'name' appears twice in one mapping: line 1 and line 2"):
        load_game_spec(str(spec))


def test_a_spec_that_is_not_utf8_is_one_line_naming_the_file(tmp_path: Path):
    """It was a UnicodeDecodeError traceback out of `dlab game solve` (issue 42); read now as params
    files are (`params_model.read_config_text`)."""
    import subprocess

    from delegation_lab.errors import InputError

    from tests.conftest import BIN, env_with_venv

    spec = tmp_path / "latin1.yaml"
    spec.write_bytes(b"name: caf\xe9\nplayers: [A]\n")
    with pytest.raises(InputError) as err:
        load_game_spec(spec)
    assert str(err.value) == f"{spec}: not UTF-8 text (byte 10 cannot be read); save it as UTF-8"
    assert err.value.exit_code == 2
    done = subprocess.run([str(BIN / "dlab"), "game", "solve", str(spec)], capture_output=True, text=True,
                          env=env_with_venv(), timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.strip().splitlines() == [f"error: {spec}: not UTF-8 text (byte 10 cannot be read); save it as UTF-8"]
