"""Shapley values of cooperative games by counterfactual masking, for many trajectories at once.

A *game* is one trajectory replayed with only a coalition S of its agents contributing: v(S) is
the trajectory's reward when the agents outside S are masked (the environment and the others
preserved). The Shapley value of agent i is its average marginal contribution

    phi_i = sum over S not containing i of  |S|! (n - |S| - 1)! / n!  * (v(S + i) - v(S)).

Exact: every one of the 2^n coalitions of every trajectory is evaluated in one batched call of the
game's value function (masks `bool [rows, 2^n, slots]`), and phi = v @ W with the fixed weight
matrix W[S, i] = w(|S| - 1) if i in S else -w(|S|), w(s) = s! (n - s - 1)! / n!. Up to
`exact_max_agents` (10 by default: 1024 coalitions).

Monte Carlo: `samples` random orderings per trajectory; the marginal contribution of each agent
in each ordering (its prefix coalition with and without it) is averaged, with a normal confidence
interval from the spread over orderings. Every ordering's marginals sum to v(N) - v(empty), so the
estimate is exactly efficient; each agent's interval covers its exact value at the stated level.

Leave-one-out (`leave_one_out`): phi_i = v(N) - v(N - i), the counterfactual one-agent ablation
SHARP approximates credit with (Appendix C), n + 1 coalitions per trajectory.

Trajectories may have different numbers of agents: a game lays agent i of trajectory t in slot
`slots[t, i]` of `max_players` slots (absent slots are null players: the value function must ignore
them). Rows are grouped by their agent count, so a trajectory with n agents costs 2^n coalitions,
not 2^max_players.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from delegation_lab.errors import InputError

EXACT_MAX_AGENTS = 10
Estimator = Literal["auto", "exact", "monte_carlo", "leave_one_out"]


class CoalitionGame(Protocol):
    """A batch of trajectories whose coalitions can be replayed."""

    @property
    def present(self) -> np.ndarray:
        """bool [T, max_players]: which slots hold an agent of the trajectory."""

    def values(self, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """float [len(rows), M]: v(S) of trajectories `rows` for masks bool [len(rows) or 1, M, max_players]."""


# ------------------------------------------------------------------------------------------- exact


def coalition_masks(n: int) -> np.ndarray:
    """bool [2^n, n]: row k is the coalition whose members are the set bits of k."""
    k = np.arange(2**n, dtype=np.int64)[:, None]
    return ((k >> np.arange(n, dtype=np.int64)[None, :]) & 1).astype(bool)


def shapley_weight_matrix(n: int) -> np.ndarray:
    """float [2^n, n] W with phi = v @ W for v ordered as `coalition_masks(n)`."""
    masks = coalition_masks(n)
    size = masks.sum(axis=1)
    w = np.array([math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n) for s in range(n)] + [0.0])
    return np.where(masks, w[np.maximum(size - 1, 0)][:, None], -w[size][:, None])


def exact_from_values(values: np.ndarray) -> np.ndarray:
    """phi [T, n] from every coalition's value v [T, 2^n] (ordered as `coalition_masks(n)`)."""
    n = int(round(math.log2(values.shape[-1])))
    if 2**n != values.shape[-1]:
        raise ValueError(f"expected 2^n coalition values, got {values.shape[-1]}")
    return values @ shapley_weight_matrix(n)


# --------------------------------------------------------------------------------------- results


@dataclass
class ShapleyResult:
    """Per trajectory and slot: the credit and its interval (equal to it when exact), plus v(N), v(empty)."""

    credit: np.ndarray  # float [T, max_players]; 0 in absent slots
    ci_low: np.ndarray
    ci_high: np.ndarray
    v_full: np.ndarray  # [T]
    v_empty: np.ndarray  # [T]
    estimator: np.ndarray  # str [T]: exact | monte_carlo | leave_one_out
    coalitions: int = 0  # coalition values evaluated (the counterfactual replays)
    seconds: float = 0.0
    notes: dict = field(default_factory=dict)

    @property
    def coalitions_per_second(self) -> float:
        return self.coalitions / self.seconds if self.seconds > 0 else float("nan")


def _place(masks: np.ndarray, slots: np.ndarray, max_players: int) -> np.ndarray:
    """Masks over n compact agents [R or 1, M, n] -> over slots [R, M, max_players]."""
    rows = slots.shape[0]
    out = np.zeros((rows, masks.shape[1], max_players), dtype=bool)
    m = np.broadcast_to(masks, (rows, masks.shape[1], masks.shape[2]))
    r = np.arange(rows)[:, None, None]
    c = np.arange(masks.shape[1])[None, :, None]
    out[r, c, slots[:, None, :]] = m
    return out


def _compact_slots(present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(agent count [T], slot of the k-th agent [T, max_players], present ones first)."""
    counts = present.sum(axis=1)
    order = np.argsort(~present, axis=1, kind="stable")
    return counts, order


def check_request(n_agents: int, estimator: Estimator, samples: int | None, exact_max: int) -> None:
    if estimator == "exact" and n_agents > exact_max:
        raise InputError(f"exact Shapley over {n_agents} agents needs 2^{n_agents} coalitions, above the exact "
                         f"limit of {exact_max} agents; use the Monte Carlo estimator with a sample budget "
                         "(--samples N / estimator monte_carlo)")
    if estimator == "auto" and n_agents > exact_max and not samples:
        raise InputError(f"a trajectory has {n_agents} agents, more than the exact limit of {exact_max}, and no "
                         "sample budget was given: pass --samples N (orderings per trajectory) for permutation "
                         "Monte Carlo, or raise the exact limit")
    if estimator == "monte_carlo" and not samples:
        raise InputError("the Monte Carlo estimator needs a sample budget (samples >= 2 orderings per trajectory)")
    if samples is not None and samples < 2:
        raise InputError(f"samples must be at least 2 orderings per trajectory (got {samples})")


def shapley(game: CoalitionGame, estimator: Estimator = "auto", samples: int | None = None,
            confidence: float = 0.95, exact_max: int = EXACT_MAX_AGENTS, seed: int = 0,
            rows: np.ndarray | None = None, chunk_values: int = 1_000_000) -> ShapleyResult:
    """Credit of every agent of every trajectory (or of `rows` only; the others get zeros).

    `auto` = exact up to `exact_max` agents, permutation Monte Carlo with `samples` orderings beyond
    (an InputError when no budget is given). `chunk_values` bounds rows x coalitions per value call.
    """
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie in (0, 1) (got {confidence})")
    present = np.asarray(game.present, dtype=bool)
    T, max_players = present.shape
    counts, order = _compact_slots(present)
    chosen = np.arange(T) if rows is None else np.asarray(rows, dtype=np.int64)
    if chosen.size:
        check_request(int(counts[chosen].max()), estimator, samples, exact_max)
    credit = np.zeros((T, max_players))
    low = np.zeros((T, max_players))
    high = np.zeros((T, max_players))
    v_full = np.zeros(T)
    v_empty = np.zeros(T)
    kind = np.full(T, "", dtype=object)
    evaluated = 0
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    from scipy.stats import norm  # here, not at the top: the params import chain stays light (every stage loads it)

    z = float(norm.ppf(0.5 + confidence / 2))
    for n in np.unique(counts[chosen]):
        n = int(n)
        group = chosen[counts[chosen] == n]
        slots = order[group, :n]
        use_exact = estimator == "exact" or (estimator == "auto" and n <= exact_max)
        if estimator == "leave_one_out":
            masks = np.ones((n + 1, n), dtype=bool)
            masks[np.arange(n), np.arange(n)] = False  # row i: everyone but i; last row: everyone
            masks = np.concatenate([masks, np.zeros((1, n), dtype=bool)])  # and the empty coalition
            vals = _values_chunked(game, group, masks[None], slots, max_players, chunk_values)
            phi = vals[:, n:n + 1] - vals[:, :n]
            _scatter(credit, group, slots, phi)
            _scatter(low, group, slots, phi)
            _scatter(high, group, slots, phi)
            v_full[group], v_empty[group] = vals[:, n], vals[:, n + 1]
            kind[group] = "leave_one_out"
            evaluated += len(group) * (n + 2)
        elif use_exact:
            masks = coalition_masks(n)
            vals = _values_chunked(game, group, masks[None], slots, max_players, chunk_values)
            phi = exact_from_values(vals)
            _scatter(credit, group, slots, phi)
            _scatter(low, group, slots, phi)
            _scatter(high, group, slots, phi)
            v_full[group], v_empty[group] = vals[:, -1], vals[:, 0]
            kind[group] = "exact"
            evaluated += len(group) * 2**n
        else:
            phi, half, vf, ve = _monte_carlo(game, group, slots, max_players, n, int(samples), rng, z, chunk_values)
            _scatter(credit, group, slots, phi)
            _scatter(low, group, slots, phi - half)
            _scatter(high, group, slots, phi + half)
            v_full[group], v_empty[group] = vf, ve
            kind[group] = "monte_carlo"
            evaluated += len(group) * int(samples) * (n + 1)
    return ShapleyResult(credit, low, high, v_full, v_empty, kind.astype(str), evaluated, time.perf_counter() - t0)


def _scatter(target: np.ndarray, group: np.ndarray, slots: np.ndarray, values: np.ndarray) -> None:
    target[group[:, None], slots] = values


def _values_chunked(game: CoalitionGame, group: np.ndarray, masks: np.ndarray, slots: np.ndarray,
                    max_players: int, chunk_values: int) -> np.ndarray:
    """v for masks [1 or R, M, n] of the group's rows, in chunks of rows."""
    per = max(1, chunk_values // masks.shape[1])
    out = []
    for start in range(0, len(group), per):
        sl = slice(start, start + per)
        m = masks if masks.shape[0] == 1 else masks[sl]
        out.append(np.asarray(game.values(group[sl], _place(m, slots[sl], max_players)), dtype=np.float64))
    return np.concatenate(out) if out else np.zeros((0, masks.shape[1]))


def _monte_carlo(game: CoalitionGame, group: np.ndarray, slots: np.ndarray, max_players: int, n: int,
                 samples: int, rng: np.random.Generator, z: float, chunk_values: int):
    """Permutation sampling: per row `samples` orderings, each evaluated on its n + 1 prefixes."""
    R = len(group)
    perms = rng.permuted(np.tile(np.arange(n), (R, samples, 1)), axis=2)  # [R, m, n]
    rank = np.argsort(perms, axis=2)  # rank[r, s, i]: position of agent i in ordering s
    k = np.arange(n + 1)
    masks = rank[:, :, None, :] < k[None, None, :, None]  # [R, m, n+1, n]: prefix of length k
    vals = _values_chunked(game, group, masks.reshape(R, samples * (n + 1), n), slots, max_players, chunk_values)
    vals = vals.reshape(R, samples, n + 1)
    marg = np.take_along_axis(vals, rank + 1, axis=2) - np.take_along_axis(vals, rank, axis=2)  # [R, m, n]
    phi = marg.mean(axis=1)
    half = z * marg.std(axis=1, ddof=1) / math.sqrt(samples)
    return phi, half, vals[:, 0, -1], vals[:, 0, 0]


# ---------------------------------------------------------------------------------- table games


@dataclass
class TableGame:
    """A game given by its value table: v [T, 2^n] over `coalition_masks(n)` (tests, benchmarks)."""

    table: np.ndarray
    n: int

    @property
    def present(self) -> np.ndarray:
        return np.ones((self.table.shape[0], self.n), dtype=bool)

    def values(self, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        index = (masks.astype(np.int64) << np.arange(self.n, dtype=np.int64)).sum(axis=-1)  # [R, M]
        index = np.broadcast_to(index, (len(rows), index.shape[1]))
        return np.take_along_axis(self.table[rows], index, axis=1)


def shapley_by_definition(value, n: int) -> np.ndarray:
    """phi [n] of one game `value(frozenset) -> float`, by the formula with a Python loop (reference)."""
    phi = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            w = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for subset in _subsets(others, size):
                s = frozenset(subset)
                phi[i] += w * (value(s | {i}) - value(s))
    return phi


def _subsets(items: list[int], size: int):
    from itertools import combinations

    return combinations(items, size)
