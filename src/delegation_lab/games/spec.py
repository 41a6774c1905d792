"""The game-spec format: a finite-horizon stochastic game written as YAML rules, validated by
pydantic (strict, closed) and compiled into exact tables.

```yaml
name: motivating_example
players: [A, B]
states: [s1, s2]
initial_state: s1
horizon: 2            # steps t = 1..horizon
discount: 1.0         # reward at step t is weighted by discount^(t-1)
actions: {A: [a1, a2], B: [b1, b2]}
rewards:              # reward at (step, state, joint action) = sum of every matching rule, else 0
  - {step: 1, state: s1, when: {A: a2}, reward: {A: -0.1, B: 1}}
transitions:          # next-state distribution: the first matching rule; must sum to 1
  - {step: 1, state: s1, when: {}, next: {s1: 0.5, s2: 0.5}}
```

A rule matches a (step, state, joint action) when its `step` and `state` are equal or omitted and
every player named in `when` plays the named action (`when: {}` matches every joint action).
Every step before the last needs a matching transition for every state reachable from the initial
state and every joint action (a game with a single state may omit them). Numbers are exact: an integer, a decimal (read from its
shortest decimal form, so 0.1 is exactly 1/10) or a fraction string such as "1/3".

A bad spec fails before any work with every problem on its own line, each naming the rule by
list index and field (`transitions[0].next: probabilities sum to 9/10 (0.9), not 1`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from delegation_lab.errors import ConfigError, InputError, short_repr
from delegation_lab.json_input import refused
from delegation_lab.params.model import YAMLRefused, load_yaml, read_config_text

Value = tuple[Fraction, ...]
"""One exact number per player."""


class GameSpecError(InputError):
    """A game spec that cannot be played: every problem names the rule (list index) and field."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: invalid game spec\n" + "\n".join(f"  {p}" for p in problems))


def to_fraction(value: Any) -> Fraction:
    """An int, a finite float (by its shortest decimal form) or a string like '1/3' or '0.25'."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool) or value is None:
        raise ValueError(f"expected a number, got {short_repr(value)}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number, got {short_repr(value)}")
        return Fraction(repr(value))
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"expected a number or a fraction such as '1/3', got {short_repr(value)}") from None
    raise ValueError(f"expected a number, got {type(value).__name__}")


Exact = Annotated[Fraction, BeforeValidator(to_fraction)]


class _SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, arbitrary_types_allowed=True)


class _Rule(_SpecModel):
    step: int | None = Field(None, ge=1)
    """Step t (1-based) the rule applies to; omitted = every step."""
    state: str | None = None
    """State the rule applies to; omitted = every state."""
    when: dict[str, str] = {}
    """Partial joint action: player -> action; players left out may play anything."""

    def matches(self, step: int, state: str, joint: dict[str, str]) -> bool:
        return (
            (self.step is None or self.step == step)
            and (self.state is None or self.state == state)
            and all(joint[p] == a for p, a in self.when.items())
        )


class RewardRule(_Rule):
    reward: dict[str, Exact]
    """Reward per player added when the rule matches (players left out get 0)."""


class TransitionRule(_Rule):
    next: dict[str, Exact]
    """Next-state distribution (state -> probability, summing to exactly 1)."""


class GameSpec(_SpecModel):
    name: str = Field(min_length=1)
    """Name of the game (used in output file names and MLflow)."""
    description: str = ""
    """Free text."""
    players: list[str] = Field(min_length=1)
    """Player names."""
    states: list[str] = Field(min_length=1)
    """State names."""
    initial_state: str
    """State x_1 at step 1."""
    horizon: int = Field(ge=1)
    """Number of steps T (steps t = 1..T)."""
    discount: Exact = Fraction(1)
    """Reward at step t is weighted by discount^(t-1); in [0, 1]."""
    actions: dict[str, list[str]]
    """Each player's actions."""
    rewards: list[RewardRule] = []
    """Reward rules; the reward at (step, state, joint action) is the sum of every matching rule."""
    transitions: list[TransitionRule] = []
    """Transition rules; the first matching rule gives the next-state distribution."""

    @model_validator(mode="after")
    def _check(self) -> GameSpec:
        problems = semantic_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self


def _duplicates(names: list[str]) -> list[str]:
    return sorted({n for n in names if names.count(n) > 1})


def _fmt(x: Fraction) -> str:
    return f"{x} ({float(x):.6g})" if x.denominator != 1 else str(x)


def semantic_problems(spec: GameSpec) -> list[str]:
    """Every cross-reference and probability problem, each prefixed with its path."""
    problems: list[str] = []
    for field in ("players", "states"):
        dup = _duplicates(getattr(spec, field))
        if dup:
            problems.append(f"{field}: duplicate name(s) {dup}")
    if spec.initial_state not in spec.states:
        problems.append(f"initial_state: unknown state {spec.initial_state!r} (states: {', '.join(spec.states)})")
    if not (0 <= spec.discount <= 1):
        problems.append(f"discount: must lie in [0, 1] (got {_fmt(spec.discount)})")
    for player in spec.players:
        if player not in spec.actions:
            problems.append(f"actions: no action list for player {player!r}")
    for player, acts in spec.actions.items():
        if player not in spec.players:
            problems.append(f"actions.{player}: unknown player (players: {', '.join(spec.players)})")
        elif not acts:
            problems.append(f"actions.{player}: needs at least one action")
        elif _duplicates(acts):
            problems.append(f"actions.{player}: duplicate action(s) {_duplicates(acts)}")

    def check_rule(where: str, rule: _Rule, last_step: int) -> None:
        if rule.step is not None and rule.step > last_step:
            if where.startswith("transitions") and rule.step == spec.horizon:
                problems.append(f"{where}.step: {rule.step} is the last step (horizon {spec.horizon}); no transition follows it")
            else:
                problems.append(f"{where}.step: {rule.step} is beyond the last step {last_step}")
        if rule.state is not None and rule.state not in spec.states:
            problems.append(f"{where}.state: unknown state {rule.state!r} (states: {', '.join(spec.states)})")
        for player, action in rule.when.items():
            if player not in spec.players:
                problems.append(f"{where}.when.{player}: unknown player (players: {', '.join(spec.players)})")
            elif player in spec.actions and action not in spec.actions[player]:
                problems.append(
                    f"{where}.when.{player}: unknown action {action!r} of player {player} "
                    f"(actions: {', '.join(spec.actions[player])})"
                )

    for i, rule in enumerate(spec.rewards):
        check_rule(f"rewards[{i}]", rule, spec.horizon)
        for player in rule.reward:
            if player not in spec.players:
                problems.append(f"rewards[{i}].reward.{player}: unknown player (players: {', '.join(spec.players)})")
    for i, rule in enumerate(spec.transitions):
        check_rule(f"transitions[{i}]", rule, spec.horizon - 1)
        for state, p in rule.next.items():
            if state not in spec.states:
                problems.append(f"transitions[{i}].next.{state}: unknown state (states: {', '.join(spec.states)})")
            if p < 0:
                problems.append(f"transitions[{i}].next.{state}: probability {_fmt(p)} is negative")
        total = sum(rule.next.values(), Fraction(0))
        if total != 1:
            problems.append(f"transitions[{i}].next: probabilities sum to {_fmt(total)}, not 1")
    if problems:
        return problems

    # Coverage: every reachable (step < horizon, state) needs a transition for every joint action.
    if len(spec.states) > 1 and spec.horizon > 1:
        missing, n_missing = _uncovered(spec)
        if n_missing:
            more = f" (and {n_missing - 3} more)" if n_missing > 3 else ""
            problems.append(
                f"transitions: no rule matches {'; '.join(missing)}{more}; every step before the last "
                "needs a next-state distribution for every reachable state and joint action"
            )
    return problems


def _uncovered(spec: GameSpec) -> tuple[list[str], int]:
    """(the first three (step, reachable state, joint action) no transition rule matches, how many
    there are) over steps 1..horizon-1, without walking the horizon: a step no rule names behaves like
    every other such step, so between two named steps the reachable layer (a function of the layer
    before it) repeats within a few steps, and whole cycles of it are skipped with their counts.
    `horizon: 1000000000` was walked step by step (minutes; 1e6 took 60 s)."""
    named = sorted({r.step for r in spec.transitions if r.step is not None and r.step < spec.horizon})
    combos = [dict(zip(spec.players, combo, strict=True))
              for combo in itertools.product(*(spec.actions[p] for p in spec.players))]
    shown: list[str] = []
    count = 0
    layer = frozenset({spec.initial_state})
    seen: dict[frozenset[str], tuple[int, int]] = {}  # layer -> (step, count) at unnamed steps since the last named one
    step = 1
    while step < spec.horizon:
        if step in named:
            seen.clear()
        else:
            before = seen.get(layer)
            if before is not None and (count == before[1] or len(shown) >= 3):
                period = step - before[0]
                following_named = next((n for n in named if n > step), spec.horizon)
                cycles = (following_named - step) // period
                step += cycles * period
                count += cycles * (count - before[1])
                seen.clear()
                if step >= spec.horizon:
                    break
                continue
            seen[layer] = (step, count)
        following: set[str] = set()
        for state in [s for s in spec.states if s in layer]:
            for joint in combos:
                rule = next((r for r in spec.transitions if r.matches(step, state, joint)), None)
                if rule is None:
                    count += 1
                    if len(shown) < 3:
                        shown.append(f"step {step}, state {state}, joint action ({_joint_text(joint)})")
                else:
                    following.update(s for s, p in rule.next.items() if p > 0)
        layer = frozenset(following)
        step += 1
    return shown, count


def _joint_text(joint: dict[str, str]) -> str:
    return ", ".join(f"{p}={a}" for p, a in joint.items())


# ---------------------------------------------------------------------------------------------
# loading


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def explain_spec_error(error: ValidationError) -> list[str]:
    problems: list[str] = []
    for err in error.errors():
        loc = tuple(err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            problems.append(f"{_loc(loc)}: unknown key")
        elif err["type"] == "missing":
            problems.append(f"{_loc(loc)}: required key is missing")
        elif not loc and err["type"] == "value_error":
            problems.extend(msg.splitlines())
        else:
            given = err.get("input")
            hint = ""
            if isinstance(given, bool) or (given is None and "string" in msg):
                hint = "; YAML reads unquoted yes/no/on/off/true/false as booleans and null/Null/~ as null: quote the name"
            problems.append(f"{_loc(loc) or '(top level)'}: {msg} (got {short_repr(given, 60)}){hint}")
    return problems


def parse_game_spec(raw: Any, source: str = "game spec") -> GameSpec:
    if not isinstance(raw, dict):
        raise GameSpecError(source, ["(top level): expected a mapping with name, players, states, ..."])
    try:
        return GameSpec.model_validate(raw)
    except ValidationError as e:
        raise GameSpecError(source, explain_spec_error(e)) from None


BUILTIN_PACKAGE = "delegation_lab.games.builtin"


def builtin_names() -> list[str]:
    return sorted(p.name.removesuffix(".yaml") for p in resources.files(BUILTIN_PACKAGE).iterdir() if p.name.endswith(".yaml"))


def builtin_text(name: str) -> str:
    if name not in builtin_names():
        raise InputError(f"no builtin game {name!r} (builtins: {', '.join(builtin_names())})")
    return resources.files(BUILTIN_PACKAGE).joinpath(f"{name}.yaml").read_text()


def load_game_spec(ref: str | Path) -> GameSpec:
    """A spec file path, or the name of a builtin game (e.g. `motivating_example`)."""
    path = Path(ref)
    if path.is_file():
        try:
            text, source = read_config_text(path), str(path)
        except ConfigError as e:  # not UTF-8, unreadable: one line naming the file, exit 2
            raise refused(InputError, f"{e.source}: {'; '.join(e.problems)}") from None
    elif str(ref) in builtin_names():
        text, source = builtin_text(str(ref)), f"builtin:{ref}"
    else:
        raise InputError(f"{ref}: no such spec file and no builtin game of that name (builtins: {', '.join(builtin_names())})")
    try:
        raw = load_yaml(text)  # aliases bounded: a spec of a few lines cannot expand to millions of values
    except YAMLRefused as e:
        raise GameSpecError(source, [str(e)]) from None
    return parse_game_spec(raw, source)


# ---------------------------------------------------------------------------------------------
# compiled game


@dataclass(frozen=True)
class Game:
    """A spec compiled into exact tables, indexed by step t = 0..horizon-1 (step t+1 of the
    spec), state index and joint-action index (mixed radix over the players' action lists)."""

    name: str
    players: tuple[str, ...]
    states: tuple[str, ...]
    actions: tuple[tuple[str, ...], ...]
    horizon: int
    discount: Fraction
    initial: int
    joint: tuple[tuple[int, ...], ...]
    """Joint action index -> one action index per player."""
    reward: tuple[tuple[tuple[Value, ...], ...], ...]
    """[t][x][j] -> reward per player (undiscounted)."""
    transition: tuple[tuple[tuple[tuple[tuple[int, Fraction], ...], ...], ...], ...]
    """[t][x][j] -> ((next state, probability > 0), ...) for t < horizon - 1."""

    @property
    def n_players(self) -> int:
        return len(self.players)

    @cached_property
    def index_of_joint(self) -> dict[tuple[int, ...], int]:
        return {a: j for j, a in enumerate(self.joint)}

    @cached_property
    def deviations(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """[j][i] -> joint actions where only player i plays differently from j."""
        out = []
        for a in self.joint:
            per_player = []
            for i in range(self.n_players):
                per_player.append(tuple(
                    self.index_of_joint[a[:i] + (b,) + a[i + 1:]] for b in range(len(self.actions[i])) if b != a[i]
                ))
            out.append(tuple(per_player))
        return tuple(out)

    @cached_property
    def reachable(self) -> tuple[tuple[int, ...], ...]:
        """States reachable at each step under some joint actions (the game tree's nodes)."""
        layers = [(self.initial,)]
        for t in range(self.horizon - 1):
            nxt = sorted({y for x in layers[-1] for j in range(len(self.joint)) for y, _ in self.transition[t][x][j]})
            layers.append(tuple(nxt))
        return tuple(layers)

    def successors(self, t: int, x: int, j: int) -> tuple[tuple[int, Fraction], ...]:
        return self.transition[t][x][j] if t < self.horizon - 1 else ()

    def joint_text(self, j: int) -> str:
        return ",".join(self.actions[i][a] for i, a in enumerate(self.joint[j]))

    def joint_dict(self, j: int) -> dict[str, str]:
        return {p: self.actions[i][a] for i, (p, a) in enumerate(zip(self.players, self.joint[j], strict=True))}


def compile_game(spec: GameSpec) -> Game:
    players = tuple(spec.players)
    states = tuple(spec.states)
    actions = tuple(tuple(spec.actions[p]) for p in players)
    joint = tuple(itertools.product(*(range(len(a)) for a in actions)))
    joints = [{p: actions[i][a[i]] for i, p in enumerate(players)} for a in joint]
    zero = tuple(Fraction(0) for _ in players)
    reward = []
    for step in range(1, spec.horizon + 1):
        per_state = []
        for state in states:
            per_joint = []
            for jd in joints:
                total = list(zero)
                for rule in spec.rewards:
                    if rule.matches(step, state, jd):
                        for i, p in enumerate(players):
                            total[i] += rule.reward.get(p, Fraction(0))
                per_joint.append(tuple(total))
            per_state.append(tuple(per_joint))
        reward.append(tuple(per_state))
    transition = []
    for step in range(1, spec.horizon):
        per_state = []
        for x, state in enumerate(states):
            per_joint = []
            for jd in joints:
                rule = next((r for r in spec.transitions if r.matches(step, state, jd)), None)
                if rule is None:  # an unreachable (step, state), or a single-state game: never used / stay
                    per_joint.append(((x, Fraction(1)),))
                else:
                    per_joint.append(tuple((states.index(s), p) for s, p in rule.next.items() if p > 0))
            per_state.append(tuple(per_joint))
        transition.append(tuple(per_state))
    return Game(
        name=spec.name, players=players, states=states, actions=actions, horizon=spec.horizon,
        discount=spec.discount, initial=states.index(spec.initial_state), joint=joint,
        reward=tuple(reward), transition=tuple(transition),
    )


def load_game(ref: str | Path) -> Game:
    return compile_game(load_game_spec(ref))
