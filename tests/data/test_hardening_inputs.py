"""Hostile params and game specs (issue 32): YAML alias bombs refused before anything is built,
error messages that never format unbounded input, `.inf` / `.nan` refused in every params float,
and the history_game IQL sized by its params refused, naming the keys and the estimate, before
any array is allocated. Peak memory is the command's own (`memory_probe.peak_rss_mib`)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from delegation_lab.params.root import deep_merge, parse_params, read_yaml
from delegation_lab.errors import ConfigError, short_repr
from delegation_lab.games.help_game import HelpGame
from delegation_lab.games.iql import BatchedIQL
from delegation_lab.games.limits import estimate_iql_memory
from delegation_lab.games.study import blocks_for
from delegation_lab.params.model import MAX_ALIAS_VALUES, YAMLRefused, load_yaml

from tests.conftest import BIN, REPO
from tests.query.test_memory_limits import run_with_peak

# Nine levels of ten aliases: 10^9 strings in 10 lines. PyYAML builds it as shared references in
# microseconds; validating or repr-ing it expands every copy (the probes: 2.6-2.8 GB and counting).
BOMB_ANCHORS = "\n".join(
    ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"x{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 10)}]" for k in range(1, 9)]
)


def base_params() -> dict:
    return read_yaml(REPO / "params.yaml")


def params_problems(overlay: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_params(deep_merge(base_params(), overlay))
    return str(info.value)


# ----------------------------------------------------------------------------------- YAML aliases


def test_an_alias_bomb_in_params_is_refused_fast_in_bounded_memory(tmp_path: Path):
    """A bomb as a typed value of params.yaml: `dlab params check` reached 2.8 GB and kept going."""
    text = (REPO / "params.yaml").read_text()
    bomb = tmp_path / "params.yaml"
    bomb.write_text(BOMB_ANCHORS + "\n" + text.replace("    games: [motivating_example, help_game_6, reciprocity_finale]",
                                                        "    games: *a8"))
    start = time.monotonic()
    code, err, peak = run_with_peak([str(BIN / "dlab"), "params", "check", "--path", str(bomb)], tmp_path / "out")
    assert code == 2 and "Traceback" not in err, err
    assert "line 2: its aliases expand the document to 2.35e+09 values" in err
    assert time.monotonic() - start < 30 and peak < 400, (time.monotonic() - start, peak)


@pytest.mark.parametrize("field", ["horizon", "players"])
def test_an_alias_bomb_in_a_game_spec_is_refused_fast(tmp_path: Path, field: str):
    """`horizon: *i` passed 2.6 GB in `dlab game solve`; `players: *i` was refused only after 36 s."""
    spec = tmp_path / "bomb.yaml"
    spec.write_text(BOMB_ANCHORS + f"\nname: bomb\n{field}: *a8\n")
    start = time.monotonic()
    code, err, peak = run_with_peak([str(BIN / "dlab"), "game", "solve", str(spec)], tmp_path / "out")
    assert code == 2 and "Traceback" not in err, err
    assert f"{spec}: invalid game spec" in err and "its aliases expand the document" in err
    assert time.monotonic() - start < 30 and peak < 400, (time.monotonic() - start, peak)


def test_aliases_that_add_few_values_still_work():
    doc = load_yaml("base: &b {lr: 0.1, seeds: [1, 2, 3]}\nrun1: {<<: *b, lr: 0.2}\nrun2: *b\n")
    assert doc["run1"] == {"lr": 0.2, "seeds": [1, 2, 3]} and doc["run2"]["seeds"] == [1, 2, 3]
    # exactly at the bound: the aliases add MAX_ALIAS_VALUES values (each alias of a 1-value list adds 2)
    many = "a: &a [x]\nb: [" + ", ".join(["*a"] * (MAX_ALIAS_VALUES // 2)) + "]\n"
    assert len(load_yaml(many)["b"]) == MAX_ALIAS_VALUES // 2
    with pytest.raises(YAMLRefused, match="line 2: its aliases expand"):
        load_yaml(many.replace("b: [", "b: [*a, "))


@pytest.mark.parametrize("text, message", [
    ("a: &a [1, *a]\n", "line 1: an alias refers to a value that contains it"),
    ("a: " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply"),
    ("a: " + "9" * 5000 + "\n", "a value cannot be read"),
    ("a: 1\na: 2\n", "key 'a' appears twice in one mapping: line 1 and line 2"),
    ("a: [1\n", "line 2, column 1: not valid YAML"),
])
def test_yaml_that_cannot_be_read_is_one_refusal(text: str, message: str):
    with pytest.raises(YAMLRefused) as info:
        load_yaml(text)
    assert message in str(info.value) and len(str(info.value)) < 400


def test_short_repr_never_formats_more_than_it_shows():
    bomb: list = ["lol"]
    for _ in range(40):
        bomb = [bomb] * 10  # 10^40 strings
    start = time.monotonic()
    text = short_repr({"key": bomb, "big": 10**5000, "long": "y" * 10**7})
    assert time.monotonic() - start < 1 and len(text) <= 80
    assert short_repr("short") == "'short'"


def test_a_bad_value_in_a_large_list_names_the_key_in_a_short_line():
    text = params_problems({"history_game": {"equilibria": {"games": [["x"] * 50_000]}}})
    line = next(line for line in text.splitlines() if "history_game.equilibria.games.0" in line)
    assert len(line) < 200


# --------------------------------------------------------------------------------- inf and nan


@pytest.mark.parametrize("overlay, key", [
    ({"history_game": {"game": {"help_cost": float("inf")}}}, "history_game.game.help_cost"),
    ({"label": {"numeric_tolerance": float("nan")}}, "label.numeric_tolerance"),
    ({"history_game": {"iql": {"learning_rate": float("-inf")}}}, "history_game.iql.learning_rate"),
])
def test_inf_and_nan_are_refused_in_params_floats(overlay: dict, key: str):
    assert f"{key}: Input should be a finite number" in params_problems(overlay)


def test_dot_inf_in_params_yaml_fails_params_check(tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text((REPO / "params.yaml").read_text().replace("help_cost: 1.0", "help_cost: .inf"))
    code, err, _ = run_with_peak([str(BIN / "dlab"), "params", "check", "--path", str(path)], tmp_path / "out")
    assert code == 2 and "history_game.game.help_cost: Input should be a finite number" in err


# ------------------------------------------------------------------------------ IQL work sizes


@pytest.mark.parametrize("iql, estimate", [
    ({"seeds": 1_000_000_000}, "iql.seeds 1.0e9 x iql.episodes 5,000"),
    ({"episodes": 1_000_000_000_000}, "iql.seeds 20 x iql.episodes 1.0e12"),
])
def test_iql_seeds_and_episodes_past_the_limit_are_refused_when_params_load(iql: dict, estimate: str):
    """`iql.seeds: 1e9` reached 2.6 GB in 9 s; `iql.episodes: 1e12` died on a 2.27 PiB allocation."""
    text = params_problems({"history_game": {"iql": iql}})
    assert f"history_game: {estimate} x game.steps 20" in text
    assert "TiB" in text and "> iql.max_memory 2.0 GiB" in text and "Value error" not in text


def test_money_balances_size_the_q_tables_and_are_refused_too():
    text = params_problems({"history_game": {"game": {"money": {"initial_balance": {"A": [10**9], "B": [1]}}}}})
    assert "Q-tables 466.4 TiB" in text and "game.money balances" in text


def test_iql_refusal_from_the_command_line_is_fast_and_small(tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text((REPO / "params.yaml").read_text().replace("    seeds: 20\n", "    seeds: 1000000000\n"))
    code, err, peak = run_with_peak([str(BIN / "dlab"), "params", "check", "--path", str(path)], tmp_path / "out")
    assert code == 2 and "Traceback" not in err and "iql.seeds 1.0e9" in err and peak < 400


def test_the_default_and_a_raised_limit_pass():
    params = parse_params(base_params())
    assert sum(estimate_iql_memory(params.history_game).values()) < 2 * 1024**3
    parse_params(deep_merge(base_params(), {"history_game": {"iql": {"seeds": 200, "max_memory": "64GiB"}}}))
    assert "history_game: iql" not in str(parse_params(deep_merge(base_params(), {"history_game": {"enabled": False, "iql": {"seeds": 10**9}}})))


@pytest.mark.parametrize("money", [
    {},
    {"initial_balance": {"A": [2, 1], "B": [1, 0]}, "contracts": {"A": [[1, 0], [0, 1]], "B": [[1, 1]]}},
])
def test_the_estimate_counts_the_arrays_the_learner_allocates(money: dict):
    """The Q-tables part against BatchedIQL's own tables, and the learners per seed against
    `blocks_for` (one list of learners for both)."""
    overlay = {"history_game": {"iql": {"seeds": 3, "episodes": 10}, "game": {"steps": 6, **({"money": money} if money else {})}}}
    params = parse_params(deep_merge(base_params(), overlay)).history_game
    q_bytes = 0
    for has_money in (False, True):
        blocks = blocks_for(params, has_money)
        assert [(b.name, b.gamma, b.state) for b in blocks] == params.iql_blocks(has_money)
        learner = BatchedIQL(HelpGame.from_params(params.game, has_money), params.iql, [0] * 3 * len(blocks),
                             states=[b.state for b in blocks for _ in range(3)])
        q_bytes += sum(q.nbytes for q in learner.q) + sum(m.nbytes for m in learner.mask)
    parts = estimate_iql_memory(params)
    assert q_bytes <= parts["Q-tables"] <= 1.1 * q_bytes + 1000


TRAIN = f"""
import resource, sys
from pathlib import Path
from delegation_lab.params.root import deep_merge, parse_params, read_yaml
from delegation_lab.games.study import help_games, train_conditions, trajectory_frames
overlay = {{"history_game": {{"workers": 1, "iql": {{"seeds": 6, "episodes": 1500}}}}}}
params = parse_params(deep_merge(read_yaml(Path({str(REPO / "params.yaml")!r})), overlay)).history_game
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
runs, batches = train_conditions(help_games(params), params)
for run in runs.values():
    frames = trajectory_frames(run.result, params.trajectory_every)
    del frames
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)
"""


def test_the_estimate_bounds_what_a_small_run_takes(tmp_path: Path):
    """Trained in one process, trajectories built as the stage builds them: the memory it added
    to the process stays under the estimate."""
    out = tmp_path / "out"
    code, err, _ = run_with_peak([str(BIN / "python"), "-c", TRAIN], out)
    assert code == 0, err
    used = int(out.read_text())
    overlay = {"history_game": {"workers": 1, "iql": {"seeds": 6, "episodes": 1500}}}
    estimate = sum(estimate_iql_memory(parse_params(deep_merge(base_params(), overlay)).history_game).values())
    assert used <= estimate <= 3 * used + 50 * 1024**2, (used, estimate)
    assert np.isfinite(used)
