"""Exact deterministic equilibria of finite-horizon stochastic games (History Matters §2.3, App. B).

**History-dependent subgame-perfect equilibria.** Policies map public histories
h_t = (x_1, a_1, ..., x_t) to actions. The subgame after h_t depends on h_t only through (t, x_t),
so the set E_t(x) of SPE value vectors of that subgame is a function of (t, x). Algorithm 1 and its
n-step extension build it backwards: E_T(x) holds the values of the pure Nash equilibria of the
last stage game; at step t a *continuation selector* sigma picks, for every joint action a and next
state x', one continuation equilibrium of the subgame (t+1, x'); the induced one-step game
Q^sigma(a) = r_t(x, a) + discount * sum_x' P(x' | x, a) V^sigma(a, x') is solved for its pure
equilibria a*, and each pair (a*, sigma) is an SPE of the subgame with value Q^sigma(a*).

Enumerating selectors is exact but their number, prod over (a, x') of |E_{t+1}(x')|, explodes
(`selector_count`). Two facts make the same set cheap without changing it:

1. only continuation *values* enter Q, so a selector may choose among distinct values of
   E_{t+1}(x') rather than among profiles;
2. a* is an equilibrium of Q^sigma iff no player i gains by a one-shot deviation a' = (a'_i, a*_-i);
   sigma's choices after different joint actions are independent, so sigma can always answer a
   deviation of player i with the continuation worst for i (the *punishment*
   min_{v in E_{t+1}(x')} v_i, one per x'), and choices after other joint actions never matter.

Hence E_t(x) = { r(x, a*) + discount * sum_x' P(x'|x,a*) v_x' : v_x' in E_{t+1}(x'),
   for all i, a'_i:  Q_i(a*) >= r_i(x, a') + discount * sum_x' P(x'|x,a') min_{w in E_{t+1}(x')} w_i },
and the sums over x' are folded one next state at a time with duplicates merged (exact Fractions).
`algorithm1_history_values` enumerates the literal selectors for small games; the tests check both
against an independent brute force over every deterministic profile (`games.bruteforce`).

**Markov perfect equilibria.** Policies map (t, x_t) to actions; the profile is one choice per
(t, x) shared by every history, so the backward induction carries the whole vector of values over
the states reachable at t+1, and at step t every reachable state picks one pure equilibrium of its
induced stage game.

Subgames are the game tree's histories, i.e. states reachable under some joint actions
(`Game.reachable`). If a reachable subgame has no pure equilibrium, the sets are empty.
Work is bounded by `max_combinations`: a game that needs more fails fast with `GameTooLarge`
naming the step, state and estimated count instead of running for hours.
Memory is bounded by `max_memory`: `solve` refuses a game whose estimate (`games.limits`: mostly
one profile node per history of the game tree) exceeds it before any work, and the room left under
it caps the continuation combinations the enumeration may keep.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

from delegation_lab.errors import InputError
from delegation_lab.games.limits import (
    COMBINATION_BYTES,
    DEFAULT_MAX_MEMORY,
    RAISE_HINT,
    GameTooLarge,
    check_memory,
    fmt_bytes,
    parse_size,
)
from delegation_lab.games.spec import Game, Value

DEFAULT_MAX_COMBINATIONS = 2_000_000


IntValue = tuple[int, ...]
"""A value vector times the game's common denominator (exact integers, fast to add and compare)."""


def _add(a: tuple, b: tuple) -> tuple:
    return tuple(x + y for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class Scaled:
    """The game in integers: every value of every subgame is a multiple of 1/denominator, with
    denominator = lcm(reward denominators) * (den(discount) * lcm(probability denominators))^(T-1),
    so rewards become ints and `discount * p * v` an exact integer division."""

    denominator: int
    reward: tuple[tuple[tuple[IntValue, ...], ...], ...]
    successors: tuple[tuple[tuple[tuple[tuple[int, int, int], ...], ...], ...], ...]
    """[t][x][j] -> ((next state, numerator, denominator) of discount * P(next | x, j), ...)."""

    @staticmethod
    def of(game: Game) -> Scaled:
        rewards = [r for layer in game.reward for per_x in layer for per_j in per_x for r in per_j]
        probs = [p for layer in game.transition for per_x in layer for per_j in per_x for _, p in per_j]
        l_r = math.lcm(*(r.denominator for r in rewards)) if rewards else 1
        l_p = math.lcm(*(p.denominator for p in probs)) if probs else 1
        d = l_r * (game.discount.denominator * l_p) ** (game.horizon - 1)
        reward = tuple(
            tuple(tuple(tuple(int(r * d) for r in per_j) for per_j in per_x) for per_x in layer) for layer in game.reward
        )
        succ = tuple(
            tuple(
                tuple(
                    tuple((y, (c := game.discount * p).numerator, c.denominator) for y, p in game.successors(t, x, j))
                    for j in range(len(game.joint))
                )
                for x in range(len(game.states))
            )
            for t in range(game.horizon)
        )
        return Scaled(d, reward, succ)

    def exact(self, v: IntValue) -> Value:
        return tuple(Fraction(c, self.denominator) for c in v)

    def scaled(self, v: Value) -> IntValue:
        out = tuple(c * self.denominator for c in v)
        if any(c.denominator != 1 for c in out):
            raise ValueError(f"{v} is not a value of this game")
        return tuple(int(c) for c in out)


def _weighted(num: int, den: int, v: IntValue) -> IntValue:
    return tuple(num * c // den for c in v)  # exact: see Scaled


def is_stage_equilibrium(game: Game, q: list[Value], j: int) -> bool:
    """Pure Nash equilibrium of the one-step game with payoffs q[joint action]."""
    return all(q[d][i] <= q[j][i] for i in range(game.n_players) for d in game.deviations[j][i])


def fmt_count(n: int) -> str:
    return str(n) if n < 10**7 else f"~10^{math.log10(n):.1f}"


@dataclass(frozen=True)
class Witness:
    """How one value of E_t(x) arises: the equilibrium joint action and its continuation values."""

    action: int
    continuation: tuple[tuple[int, IntValue], ...]  # (next state, continuation value) per successor


@dataclass
class Budget:
    limit: int
    memory_room: int | None = None
    """Bytes the memory limit leaves for the enumeration (limits.COMBINATION_BYTES per combination)."""
    used: int = 0

    def spend(self, n: int, where: str, selectors: int | None = None) -> None:
        if self.memory_room is not None and (self.used + n) * COMBINATION_BYTES > self.memory_room:
            raise GameTooLarge(
                f"game too large for the memory limit: {where} needs {fmt_count(n)} more continuation combinations "
                f"(estimated total {fmt_count(self.used + n)}, ~{fmt_bytes((self.used + n) * COMBINATION_BYTES)} > the "
                f"{fmt_bytes(self.memory_room)} the limit leaves after the profile); {RAISE_HINT}"
            )
        if self.used + n > self.limit:
            lit = f"; the literal Algorithm 1 would enumerate {fmt_count(selectors)} continuation selectors there" if selectors else ""
            raise GameTooLarge(
                f"game too large: {where} needs {fmt_count(n)} more continuation combinations "
                f"(estimated total {fmt_count(self.used + n)} > limit {self.limit:,}){lit}; "
                "raise --max-combinations to try anyway"
            )
        self.used += n


@dataclass
class StateCost:
    step: int  # 1-based
    state: str
    selectors: int
    """Literal Algorithm 1 continuation selectors: prod over (a, x') of |E_{t+1}(x')|."""
    candidates: int
    """Selectors restricted to the equilibrium action's own continuations: sum_a prod_x' |E_{t+1}(x')|."""
    equilibria: int
    """Distinct SPE value vectors of the subgame (= |E_t(x)|)."""


@dataclass
class HistorySolution:
    game: Game
    scaled: Scaled
    sets: list[dict[int, dict[IntValue, Witness]]]
    """[t][x] -> {scaled value: witness}, for the states reachable at step t."""
    punishment: list[dict[int, tuple[IntValue, ...]]]
    """[t][x][i] -> the value in E_t(x) worst for player i (first in sorted order on ties)."""
    costs: list[StateCost]
    combinations: int
    """Continuation combinations actually enumerated (after merging duplicates)."""

    def values(self) -> list[Value]:
        return [self.scaled.exact(v) for v in sorted(self.sets[0].get(self.game.initial, {}))]

    def selector_count(self) -> int:
        return sum(c.selectors for c in self.costs)


def solve_history(game: Game, max_combinations: int = DEFAULT_MAX_COMBINATIONS,
                  memory_room: int | None = None) -> HistorySolution:
    """Every distinct value vector of deterministic history-dependent SPE, with witnesses."""
    n, T = game.n_players, game.horizon
    sc = Scaled.of(game)
    budget = Budget(max_combinations, memory_room)
    sets: list[dict[int, dict[IntValue, Witness]]] = [dict() for _ in range(T)]
    punishment: list[dict[int, tuple[IntValue, ...]]] = [dict() for _ in range(T)]
    costs: list[StateCost] = []
    for t in reversed(range(T)):
        nxt = sets[t + 1] if t + 1 < T else {}
        options = {y: sorted(e) for y, e in nxt.items()}
        for x in game.reachable[t]:
            found: dict[IntValue, Witness] = {}
            succ = sc.successors[t][x]
            sizes = {y: len(options[y]) for s in succ for y, _, _ in s}
            selectors = math.prod(sizes[y] for s in succ for y, _, _ in s)
            candidates = sum(math.prod(sizes[y] for y, _, _ in s) for s in succ)
            if all(sizes.values()):  # else some subgame after (x, a) has no SPE: neither has this one
                # the worst continuation for player i after joint action a (the punishment)
                worst = [
                    tuple(sum(num * punishment[t + 1][y][i][i] // den for y, num, den in s) for i in range(n))
                    for s in succ
                ]
                for j, s in enumerate(succ):
                    r = sc.reward[t][x][j]
                    bound = [
                        max((sc.reward[t][x][d][i] + worst[d][i] for d in game.deviations[j][i]), default=None)
                        for i in range(n)
                    ]
                    sums: dict[IntValue, tuple[tuple[int, IntValue], ...]] = {r: ()}
                    for y, num, den in s:  # fold the continuation one next state at a time, merging duplicates
                        budget.spend(len(sums) * len(options[y]), f"step {t + 1}, state {game.states[x]}", selectors)
                        terms = [(_weighted(num, den, v), v) for v in options[y]]
                        folded: dict[IntValue, tuple[tuple[int, IntValue], ...]] = {}
                        for acc, chosen in sums.items():
                            for term, v in terms:
                                folded.setdefault(_add(acc, term), (*chosen, (y, v)))
                        sums = folded
                    for q, chosen in sums.items():
                        if all(b is None or q[i] >= b for i, b in enumerate(bound)):
                            found.setdefault(q, Witness(j, chosen))
            sets[t][x] = found
            if found:
                ordered = sorted(found)
                punishment[t][x] = tuple(min(ordered, key=lambda v, i=i: v[i]) for i in range(n))
            costs.append(StateCost(t + 1, game.states[x], selectors, candidates, len(found)))
    costs.sort(key=lambda c: (c.step, game.states.index(c.state)))
    return HistorySolution(game, sc, sets, punishment, costs, budget.used)


def algorithm1_history_values(game: Game, max_selectors: int = 200_000) -> list[Value]:
    """The literal n-step Algorithm 1: enumerate every continuation selector (one continuation
    value per (joint action, next state)), solve each induced one-step game for its pure
    equilibria, collect their values. Exponential; for small games and as a cross-check."""
    T = game.horizon
    sc = Scaled.of(game)
    sets: list[dict[int, set[IntValue]]] = [dict() for _ in range(T)]
    for t in reversed(range(T)):
        for x in game.reachable[t]:
            out: set[IntValue] = set()
            slots = [(j, y, num, den) for j in range(len(game.joint)) for y, num, den in sc.successors[t][x][j]]
            choices = [sorted(sets[t + 1][y]) for _, y, _, _ in slots]
            count = math.prod(len(c) for c in choices)
            if count > max_selectors:
                raise GameTooLarge(f"step {t + 1}, state {game.states[x]}: {fmt_count(count)} continuation selectors > {max_selectors:,}")
            for sigma in itertools.product(*choices):
                q = list(sc.reward[t][x])
                for (j, _, num, den), v in zip(slots, sigma, strict=True):
                    q[j] = _add(q[j], _weighted(num, den, v))
                out.update(q[j] for j in range(len(game.joint)) if is_stage_equilibrium(game, q, j))
            sets[t][x] = out
    return [sc.exact(v) for v in sorted(sets[0].get(game.initial, set()))]


# ---------------------------------------------------------------------------------------------
# profiles: who does what after which history


@dataclass(frozen=True)
class ProfileNode:
    step: int  # 1-based
    history: tuple[int, ...]
    """x_1, a_1, x_2, ..., x_t: state indices at even positions, joint-action indices at odd ones."""
    action: int
    """Joint action prescribed at this history."""
    value: Value
    """Value of the subgame from this history (rewards from this step on)."""
    on_path: bool
    role: str
    """`on path`, `punishes <player>` (after that player's unilateral deviation, and everywhere in
    that subgame) or `off path` (after a joint deviation)."""


def history_profile(sol: HistorySolution, value: Value) -> list[ProfileNode]:
    """An SPE profile with the given value at the initial state, as every history in depth-first
    order: on the path the witness continuations, after a unilateral deviation of player i the
    continuation worst for i, after a joint deviation the first continuation equilibrium."""
    game, sc = sol.game, sol.scaled
    nodes: list[ProfileNode] = []

    def visit(t: int, history: tuple[int, ...], x: int, v: IntValue, on_path: bool, role: str) -> None:
        w = sol.sets[t][x][v]
        nodes.append(ProfileNode(t + 1, history, w.action, sc.exact(v), on_path, role))
        if t + 1 >= game.horizon:
            return
        chosen = dict(w.continuation)
        for j in range(len(game.joint)):
            deviator = next((i for i in range(game.n_players) if j in game.deviations[w.action][i]), None)
            for y, _ in game.successors(t, x, j):
                if j == w.action:
                    cont, child_role = chosen[y], role
                elif deviator is not None:
                    cont, child_role = sol.punishment[t + 1][y][deviator], f"punishes {game.players[deviator]}"
                else:
                    cont, child_role = min(sol.sets[t + 1][y]), "off path"
                visit(t + 1, (*history, j, y), y, cont, on_path and j == w.action, child_role)

    visit(0, (game.initial,), game.initial, sc.scaled(value), True, "on path")
    return nodes


def history_text(game: Game, history: tuple[int, ...]) -> str:
    return " ".join(game.states[h] if k % 2 == 0 else f"({game.joint_text(h)})" for k, h in enumerate(history))


# ---------------------------------------------------------------------------------------------
# Markov perfect equilibria


@dataclass
class MarkovSolution:
    game: Game
    scaled: Scaled
    layers: list[dict[tuple[IntValue, ...], tuple[tuple[IntValue, ...], tuple[int, ...]]]]
    """[t] -> {values at the reachable states of t: (values at t+1 it came from, action per state)}."""
    combinations: int
    profile_count: int
    """Deterministic Markov profiles over the reachable (t, x): |A|^(number of pairs)."""

    def values(self) -> list[Value]:
        return [self.scaled.exact(v) for v in sorted({w[0] for w in self.layers[0]})] if self.layers else []

    def profile(self, value: Value) -> list[tuple[int, int, int]]:
        """(step, state, joint action) of one Markov perfect equilibrium with this initial value."""
        target = self.scaled.scaled(value)
        key = next(w for w in sorted(self.layers[0]) if w[0] == target)
        out = []
        for t in range(self.game.horizon):
            nxt, acts = self.layers[t][key]
            out.extend((t + 1, x, a) for x, a in zip(self.game.reachable[t], acts, strict=True))
            key = nxt
        return out


def solve_markov(game: Game, max_combinations: int = DEFAULT_MAX_COMBINATIONS,
                 memory_room: int | None = None) -> MarkovSolution:
    T = game.horizon
    sc = Scaled.of(game)
    budget = Budget(max_combinations, memory_room)
    layers: list[dict] = [dict() for _ in range(T)]
    nxt_layer: dict[tuple[IntValue, ...], object] = {(): None}
    for t in reversed(range(T)):
        pos = {y: k for k, y in enumerate(game.reachable[t + 1])} if t + 1 < T else {}
        layer: dict[tuple[IntValue, ...], tuple[tuple[IntValue, ...], tuple[int, ...]]] = {}
        for w in sorted(nxt_layer):
            per_state: list[list[tuple[int, IntValue]]] = []
            for x in game.reachable[t]:
                q = list(sc.reward[t][x])
                for j in range(len(game.joint)):
                    for y, num, den in sc.successors[t][x][j]:
                        q[j] = _add(q[j], _weighted(num, den, w[pos[y]]))
                per_state.append([(j, q[j]) for j in range(len(game.joint)) if is_stage_equilibrium(game, q, j)])
            budget.spend(math.prod(len(c) for c in per_state), f"step {t + 1} (Markov)")
            for combo in itertools.product(*per_state):
                layer.setdefault(tuple(v for _, v in combo), (w, tuple(j for j, _ in combo)))
        layers[t] = layer
        nxt_layer = layer
    pairs = sum(len(r) for r in game.reachable)
    return MarkovSolution(game, sc, layers, budget.used, len(game.joint) ** pairs)


# ---------------------------------------------------------------------------------------------
# the favoured profile


def favoured_value(game: Game, values: list[Value], favour: str | None) -> Value | None:
    """Algorithm 1's selection among candidate equilibria: the favoured player's value first
    (the appendix's ||V_i||_1 with one initial state; we maximise V_i itself, which equals it for
    non-negative values and does not prefer large losses), ties broken by the total sum_j V_j
    (the ||V||_1 of the whole vector for non-negative values), then by the first in sorted order."""
    if not values:
        return None
    if favour is not None and favour not in game.players:
        raise InputError(f"--favour: unknown player {favour!r} (players: {', '.join(game.players)})")
    i = game.players.index(favour) if favour is not None else None
    best = max(values, key=lambda v: ((v[i] if i is not None else 0), sum(v), [-c for c in v]))
    return best


@dataclass
class Solution:
    game: Game
    history: HistorySolution
    markov: MarkovSolution
    favour: str | None
    favoured: Value | None = field(default=None)


def solve(game: Game, favour: str | None = None, max_combinations: int = DEFAULT_MAX_COMBINATIONS,
          max_memory: int | str = DEFAULT_MAX_MEMORY, json_profiles: int = 0) -> Solution:
    """Both equilibrium sets. Refuses before any work when the memory estimate of solving and
    reporting (`json_profiles` example profiles in the JSON) exceeds `max_memory` (bytes or `2GiB`)."""
    if favour is not None and favour not in game.players:
        raise InputError(f"--favour: unknown player {favour!r} (players: {', '.join(game.players)})")
    limit = parse_size(max_memory) if isinstance(max_memory, str) else max_memory
    room = limit - check_memory(game, limit, json_profiles).bytes
    hist = solve_history(game, max_combinations, room)
    markov = solve_markov(game, max_combinations, room - hist.combinations * COMBINATION_BYTES)  # the history sets stay
    return Solution(game, hist, markov, favour, favoured_value(game, hist.values(), favour))
