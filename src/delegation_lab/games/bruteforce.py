"""Independent references for the equilibrium solvers: exhaustive searches over deterministic
profiles that test every one-shot deviation at every history. Exponential by design; they exist
to check `games.equilibria` on small games (tests, benchmark), and share only the compiled `Game`.

- `every_profile_history_values`: literally every deterministic history-dependent profile (one
  joint action per history of the game tree, |A|^histories profiles, vectorised with numpy in
  float64 with tolerance 1e-9); a profile is an SPE iff no player gains by a one-shot deviation at
  any history (the one-shot deviation principle of finite games).
- `spe_history_values`: the same search organised by subgames: a profile is an SPE iff its
  restriction to every child subgame is one and the root passes the one-shot test, so the SPE
  profiles of a subgame are the root actions passing that test over every combination of the
  children's SPE profiles. Exact (Fractions); one value per SPE *profile* (no merging of equal
  values, no punishment shortcut), so it reaches 3-step games whose SPE profiles are few.
- `every_markov_values`: every deterministic Markov profile (one joint action per reachable
  (t, x)), exact, with the one-shot test at every reachable (t, x).
- `check_history_profile`: evaluates an explicit profile (every history) and lists its violations.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from typing import Any

import numpy as np

from delegation_lab.games.equilibria import ProfileNode, is_stage_equilibrium
from delegation_lab.games.spec import Game, Value


class TooManyProfiles(Exception):
    """The exhaustive search would exceed its budget (the caller skips the game)."""


def _add(a: Value, b: Value) -> Value:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _q(game: Game, t: int, x: int, cont: list[Value]) -> list[Value]:
    return [_add(game.reward[t][x][j], tuple(game.discount * c for c in cont[j])) for j in range(len(game.joint))]


def game_tree(game: Game) -> list[tuple[int, int, list[tuple[int, int, Fraction]]]]:
    """Every history as (t, state, [(joint action, child node, probability)]), root first."""
    nodes: list[tuple[int, int, list]] = []

    def add(t: int, x: int) -> int:
        k = len(nodes)
        nodes.append((t, x, []))
        for j in range(len(game.joint)):
            for y, p in game.successors(t, x, j):
                nodes[k][2].append((j, add(t + 1, y), p))
        return k

    add(0, game.initial)
    return nodes


def every_profile_history_values(game: Game, max_profiles: int = 1 << 20) -> tuple[set[tuple[float, ...]], int]:
    """(SPE values rounded to 1e-9, number of SPE profiles) over all |A|^histories profiles."""
    nodes = game_tree(game)
    n_a, n_p = len(game.joint), game.n_players
    total = n_a ** len(nodes)
    if total > max_profiles:
        raise TooManyProfiles(f"{total} profiles")
    profiles = np.array(list(itertools.product(range(n_a), repeat=len(nodes))), dtype=np.int64).reshape(total, len(nodes))
    rows = np.arange(total)
    reward = {(t, x): np.array([[float(r) for r in game.reward[t][x][j]] for j in range(n_a)]) for t, x, _ in nodes}
    dev = [[list(game.deviations[j][i]) for i in range(n_p)] for j in range(n_a)]
    value = [None] * len(nodes)
    ok = np.ones(total, dtype=bool)
    for k in reversed(range(len(nodes))):  # children come after their parent
        t, x, children = nodes[k]
        q = np.broadcast_to(reward[(t, x)], (total, n_a, n_p)).copy()
        for j, c, p in children:
            q[:, j, :] += float(game.discount) * float(p) * value[c]
        ne = np.ones((total, n_a), dtype=bool)
        for j in range(n_a):
            for i in range(n_p):
                for d in dev[j][i]:
                    ne[:, j] &= q[:, d, i] <= q[:, j, i] + 1e-9
        chosen = profiles[:, k]
        value[k] = q[rows, chosen]
        ok &= ne[rows, chosen]
    values = {tuple(round(float(v), 9) + 0.0 for v in row) for row in value[0][ok]}
    return values, int(ok.sum())


def spe_history_values(game: Game, max_combinations: int = 300_000) -> list[Value]:
    """The root value of every SPE profile (one entry per profile, duplicates kept)."""
    memo: dict[tuple[int, int], list[Value]] = {}
    budget = [max_combinations]

    def subgame(t: int, x: int) -> list[Value]:
        if (t, x) in memo:
            return memo[(t, x)]
        slots = [(j, y, p) for j in range(len(game.joint)) for y, p in game.successors(t, x, j)]
        lists = [subgame(t + 1, y) for _, y, _ in slots]
        count = math.prod(len(c) for c in lists)
        budget[0] -= count
        if budget[0] < 0:
            raise TooManyProfiles(f"{count} child-profile combinations at step {t + 1}")
        out: list[Value] = []
        zero = tuple(Fraction(0) for _ in game.players)
        for combo in itertools.product(*lists):
            cont = [zero] * len(game.joint)
            for (j, _, p), v in zip(slots, combo, strict=True):
                cont[j] = _add(cont[j], tuple(p * c for c in v))
            q = _q(game, t, x, cont)
            out.extend(q[j] for j in range(len(game.joint)) if is_stage_equilibrium(game, q, j))
        memo[(t, x)] = out
        return out

    return subgame(0, game.initial)


def every_markov_values(game: Game, max_profiles: int = 300_000) -> list[Value]:
    """Initial values of every deterministic Markov perfect equilibrium (one per profile)."""
    pairs = [(t, x) for t in range(game.horizon) for x in game.reachable[t]]
    total = len(game.joint) ** len(pairs)
    if total > max_profiles:
        raise TooManyProfiles(f"{total} Markov profiles")
    zero = tuple(Fraction(0) for _ in game.players)
    out = []
    for assignment in itertools.product(range(len(game.joint)), repeat=len(pairs)):
        mu = dict(zip(pairs, assignment, strict=True))
        value: dict[tuple[int, int], Value] = {}
        good = True
        for t in reversed(range(game.horizon)):
            for x in game.reachable[t]:
                cont = [zero] * len(game.joint)
                for j in range(len(game.joint)):
                    for y, p in game.successors(t, x, j):
                        cont[j] = _add(cont[j], tuple(p * c for c in value[(t + 1, y)]))
                q = _q(game, t, x, cont)
                if not is_stage_equilibrium(game, q, mu[(t, x)]):
                    good = False
                value[(t, x)] = q[mu[(t, x)]]
        if good:
            out.append(value[(0, game.initial)])
    return out


def check_history_profile(game: Game, nodes: list[ProfileNode]) -> list[str]:
    """Violations of an explicit profile: a missing history, a value that is not the profile's,
    or a profitable one-shot deviation at some history. Empty = a subgame-perfect equilibrium."""
    action = {n.history: n.action for n in nodes}
    claimed = {n.history: n.value for n in nodes}
    problems: list[str] = []

    def value(t: int, history: tuple) -> Value:
        x = history[-1]
        if history not in action:
            problems.append(f"history {history} has no action")
            return tuple(Fraction(0) for _ in game.players)
        cont = []
        for j in range(len(game.joint)):
            total = tuple(Fraction(0) for _ in game.players)
            for y, p in game.successors(t, x, j):
                total = _add(total, tuple(p * c for c in value(t + 1, (*history, j, y))))
            cont.append(total)
        q = _q(game, t, x, cont)
        a = action[history]
        if not is_stage_equilibrium(game, q, a):
            problems.append(f"history {history}: a one-shot deviation from {game.joint_text(a)} pays")
        if claimed[history] != q[a]:
            problems.append(f"history {history}: claimed value {claimed[history]} but the profile gives {q[a]}")
        return q[a]

    value(0, (game.initial,))
    return problems


# ---------------------------------------------------------------------------------------------
# random small games (as raw specs, so they also exercise the spec format)


def random_game_spec(seed: int, n_states: int = 2, horizon: int = 2, n_actions: int = 2,
                     max_support: int = 2, indifference: float = 0.35) -> dict[str, Any]:
    """A random 2-player game with integer and decimal rewards where, with probability
    `indifference`, a player's stage reward ignores its own action (the ties that make continuation
    equilibria multiple, and history dependence matter), and random next-state supports of size
    1..max_support with probabilities in quarters and thirds."""
    rng = random.Random(seed)
    players = ["A", "B"]
    states = [f"s{k + 1}" for k in range(n_states)]
    actions = {p: [f"{p.lower()}{k + 1}" for k in range(n_actions)] for p in players}
    levels = [-2, -1, -0.5, 0, 0, 1, 2, 3, 0.1]
    rewards = []
    transitions = []
    for step in range(1, horizon + 1):
        for state in states:
            own_blind = {p: rng.random() < indifference for p in players}
            base = {p: {a: rng.choice(levels) for a in actions[players[1 - i]]} for i, p in enumerate(players)}
            for combo in itertools.product(*(actions[p] for p in players)):
                when = dict(zip(players, combo, strict=True))
                reward = {}
                for i, p in enumerate(players):
                    other = players[1 - i]
                    reward[p] = base[p][when[other]] if own_blind[p] else rng.choice(levels)
                rewards.append({"step": step, "state": state, "when": when, "reward": reward})
                if step < horizon:
                    k = rng.randint(1, min(max_support, n_states))
                    support = rng.sample(states, k)
                    weights = {1: [["1"]], 2: [["1/2", "1/2"], ["1/4", "3/4"], ["1/3", "2/3"]],
                               3: [["1/3", "1/3", "1/3"], ["1/4", "1/4", "1/2"]]}[k]
                    probs = rng.choice(weights)
                    transitions.append({"step": step, "state": state, "when": when, "next": dict(zip(support, probs, strict=True))})
    return {
        "name": f"random_{seed}", "players": players, "states": states, "initial_state": states[0],
        "horizon": horizon, "discount": rng.choice([1, 1, "1/2", 0.9]), "actions": actions,
        "rewards": rewards, "transitions": transitions,
    }
