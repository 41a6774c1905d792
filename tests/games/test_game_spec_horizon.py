"""Spec validation does not walk the horizon (issue 42): `horizon: 1000000000` was validated step by
step for minutes (1e6: 60 s) before the memory check could refuse it. Between two steps a rule names,
every step behaves alike, so the reachable layer cycles and whole cycles are skipped with their counts:
the problems found are the same as a step-by-step walk's (checked against one here)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.games.spec import GameSpecError, parse_game_spec


def spec(horizon: int, transitions: list[dict]) -> dict:
    return {"name": "long", "players": ["A", "B"], "states": ["s1", "s2", "s3"], "initial_state": "s1",
            "horizon": horizon, "actions": {"A": ["a1", "a2"], "B": ["b1"]},
            "rewards": [{"when": {"A": "a2"}, "reward": {"A": 1}}], "transitions": transitions}


CYCLE = [{"state": "s1", "next": {"s2": 1}}, {"state": "s2", "next": {"s3": 1}}, {"state": "s3", "next": {"s1": 1}}]


def test_a_horizon_of_a_billion_validates_at_once_and_is_refused_for_memory(tmp_path: Path):
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(spec(1_000_000_000, [{"step": 7, "next": {"s1": "1/2", "s2": "1/2"}}, *CYCLE])))
    start = time.process_time()
    result = CliRunner().invoke(app, ["game", "solve", str(path)])
    assert time.process_time() - start < 5
    assert result.exit_code == 1 and "game 'long' too large for the memory limit" in result.output, result.output


def _walked(raw: dict) -> int:
    """How many (step, reachable state, joint action) no rule covers, by walking every step."""
    states, horizon = raw["states"], raw["horizon"]
    joints = [{"A": a, "B": "b1"} for a in raw["actions"]["A"]]
    rules = raw["transitions"]
    layer, count = {raw["initial_state"]}, 0
    for step in range(1, horizon):
        following = set()
        for state in [s for s in states if s in layer]:
            for joint in joints:
                rule = next((r for r in rules if r.get("step", step) == step and r.get("state", state) == state
                             and all(joint[p] == a for p, a in r.get("when", {}).items())), None)
                if rule is None:
                    count += 1
                else:
                    following |= {s for s, p in rule["next"].items() if p != 0}
        layer = following
    return count


@pytest.mark.parametrize("horizon", [2, 3, 10, 11, 1000, 12345])
def test_uncovered_steps_are_counted_as_a_walk_counts_them(horizon: int):
    rules = [{"state": "s1", "when": {"A": "a1"}, "next": {"s2": 1}}, {"state": "s2", "next": {"s3": 1}},
             {"step": 5, "state": "s1", "next": {"s1": 1}}, {"state": "s3", "next": {"s1": "1/2", "s2": "1/2"}}]
    raw = spec(horizon, [r for r in rules if r.get("step", 0) < horizon])
    want = _walked(raw)
    if not want:
        parse_game_spec(raw)
        return
    with pytest.raises(GameSpecError) as caught:
        parse_game_spec(raw)
    (line,) = [p for p in caught.value.problems if p.startswith("transitions: no rule matches")]
    assert line.startswith("transitions: no rule matches step 1, state s1, joint action (A=a2, B=b1)")
    assert (f"(and {want - 3} more)" in line) if want > 3 else "more)" not in line, (want, line)


def test_a_missing_rule_over_a_billion_steps_is_counted_at_once():
    raw = spec(1_000_000_000, [{"state": "s1", "when": {"A": "a1"}, "next": {"s1": 1}}, *CYCLE[1:]])
    start = time.process_time()
    with pytest.raises(GameSpecError) as caught:
        parse_game_spec(raw)
    assert time.process_time() - start < 2
    assert "(and 999999996 more)" in str(caught.value)  # step t, state s1, a2: one for each of 999,999,999 steps
