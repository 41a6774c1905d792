"""Independent tabular Q-learning on the alternating help game, every seed at once (§3.3).

Each agent keeps its own Q-table and learns from its own environmental reward only, treating the
other agent as part of the environment. Within a step the agents move in the paper's order: the
payer (the passive agent) first chooses its transfer action (no offer / one of its contract prices,
masked by its balance) in state (t, balances); then the active agent, in state (t, balances,
paid), chooses Null or Yes, where a paid contract allows only Yes. (The env's simultaneous moves
give the same outcomes, since a paid contract forces Yes whatever the active agent sends.)

A batch row's state can also carry the last joint action (`last_action`: (t, balances, last
executed action and offer, paid), a history-aware learner), or that without the step
(`last_action_untimed`: only the phase t mod 2, so the finite horizon is unobserved, as in the
infinitely repeated game); each row also has its own discount, so a sweep trains in one batch.

Seeds are a leading array axis: Q-tables are (seeds, states, actions) and each step is a handful
of numpy operations for every seed together. Each seed draws its random numbers from its own
generator (`np.random.default_rng(seed)`), one block per episode, so a seed's run is identical
whether it is trained alone or in a batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from delegation_lab.games.help_game import YES, HelpGame
from delegation_lab.games.params import IQLParams


def pick(keys: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row, the allowed column with the largest random key: uniform over the mask."""
    return np.where(mask, keys, -1.0).argmax(axis=-1)


@dataclass
class EpisodeLog:
    """Per (seed, episode, step) arrays of what happened (int8 / float32 to stay small)."""

    executed: np.ndarray  # (S, E, T) the active agent's executed action
    chosen: np.ndarray  # (S, E, T) the active agent's chosen physical action
    offer: np.ndarray  # (S, E, T) the payer's offer (0 = none)
    rewards: np.ndarray  # (S, E, T, 2)
    balances: np.ndarray  # (S, E, T, 2, K) after the step


@dataclass
class IQLResult:
    seeds: list[int]
    game: HelpGame
    q: list[np.ndarray]  # per agent (S, states, columns)
    returns: np.ndarray  # (S, E, 2) undiscounted training returns
    helps: np.ndarray  # (S, E, 2) executed Yes per agent (as the active agent)
    payments: np.ndarray  # (S, E, 2) paid offers per agent (as the payer)
    epsilon: np.ndarray  # (E,)
    log: EpisodeLog
    eval_returns: np.ndarray  # (S, 2) greedy policy after training
    eval_helps: np.ndarray  # (S, 2)
    eval_payments: np.ndarray  # (S, 2)
    eval_log: EpisodeLog  # E = 1

    def rows(self, start: int, stop: int) -> IQLResult:
        """The batch rows start..stop-1 as a result of their own (logs: the logged rows among them)."""
        sl = slice(start, stop)

        def cut(log: EpisodeLog) -> EpisodeLog:
            return EpisodeLog(log.executed[sl], log.chosen[sl], log.offer[sl], log.rewards[sl], log.balances[sl])

        return IQLResult(self.seeds[sl], self.game, [q[sl] for q in self.q], self.returns[sl], self.helps[sl],
                         self.payments[sl], self.epsilon, cut(self.log), self.eval_returns[sl], self.eval_helps[sl],
                         self.eval_payments[sl], cut(self.eval_log))


StateKind = Literal["markov", "last_action", "last_action_untimed"]


class BatchedIQL:
    def __init__(self, game: HelpGame, params: IQLParams, seeds: list[int], gammas: list[float] | None = None,
                 states: list[StateKind] | None = None, log_rows: int | None = None):
        """seeds: one batch row each (a seed may repeat with another discount or state); gammas,
        states: per row (default: params.gamma, Markov); log_rows: only the first rows' steps are
        logged (the others train and report returns only, so a large sweep stays small in memory)."""
        self.game, self.p, self.seeds = game, params, list(seeds)
        self.S, self.T = len(self.seeds), game.steps
        self.gamma = np.full(self.S, params.gamma) if gammas is None else np.asarray(gammas, float)
        kinds = np.array(["markov"] * self.S if states is None else list(states))
        if self.gamma.shape != (self.S,) or kinds.shape != (self.S,):
            raise ValueError(f"gammas and states: one per batch row ({self.S})")
        self.markov, self.untimed = kinds == "markov", kinds == "last_action_untimed"
        self.n_log = self.S if log_rows is None else min(self.S, log_rows)
        self.start = 2 * (1 + max(game.n_offers))  # the last joint action: executed + 2 * offer; this code: none yet
        self.n_last = self.start + 1
        self.levels = game.total + 1  # balance levels of A per dimension (B's = total - A's)
        self.n_bal = int(np.prod(self.levels)) if game.dims else 1
        n_states = self.T * self.n_bal * self.n_last * 2  # (t, balances, last, paid); paid is 0 at the payer's rows
        # columns: physical action at active rows, offer at passive rows
        self.cols = [max(2, 1 + game.n_offers[i]) for i in range(2)]
        self.mask = [np.zeros((n_states, self.cols[i]), bool) for i in range(2)]
        balances = self._all_balances()
        b_all = self._balance_index(balances)
        for t in range(self.T):
            act = game.active(t)
            for last in range(self.n_last):
                unpaid = self._row(t, b_all, last, 0)
                for i in range(2):
                    if i == act:
                        self.mask[i][unpaid, :2] = True
                        self.mask[i][unpaid + 1, YES] = True
                    else:
                        self.mask[i][unpaid, : 1 + game.n_offers[i]] = game.affordable(i, balances)[:, : 1 + game.n_offers[i]]
        self.q = [np.zeros((self.S, n_states, self.cols[i])) for i in range(2)]
        self.rows = np.arange(self.S)
        self.lr = params.learning_rate
        self.draws = 1 + max(self.cols)
        # rows of one seed draw the same numbers (one generator per seed), so each seed draws once per episode
        distinct, self.seed_row = np.unique(np.array(self.seeds), return_inverse=True)
        self.rngs = [np.random.default_rng(int(s)) for s in distinct]

    def _all_balances(self) -> np.ndarray:
        """(n_bal, 2, K) every balance pair, in the order of `state`."""
        if not self.game.dims:
            return np.zeros((1, 2, 0), np.int64)
        a = np.stack(np.unravel_index(np.arange(self.n_bal), self.levels), axis=-1)
        return np.stack([a, self.game.total[None] - a], axis=1)

    def _balance_index(self, balances: np.ndarray) -> np.ndarray:
        return np.ravel_multi_index(tuple(balances[:, 0].T), self.levels) if self.game.dims else np.zeros(len(balances), np.int64)

    def _row(self, t: np.ndarray | int, b: np.ndarray, last: np.ndarray | int, paid: np.ndarray | int) -> np.ndarray:
        return 2 * ((t * self.n_bal + b) * self.n_last + last) + paid

    def state(self, t: int, balances: np.ndarray, paid: np.ndarray | None = None, last: np.ndarray | None = None) -> np.ndarray:
        """Row of (t, balances, last, paid) in the Q-tables; balances (S, 2, K), paid (S,) bool, last
        (S,) the previous step's executed + 2 * offer (`self.start` at the first step). Markov rows
        ignore last; untimed rows see only the phase t mod 2."""
        tt = np.where(self.untimed, t % 2, t)
        code = np.zeros(self.S, np.int64) if last is None else np.where(self.markov, 0, last)
        return self._row(tt, self._balance_index(balances), code, 0 if paid is None else paid.astype(np.int64))

    def _decay(self, episode: int) -> float:
        decay = max(1, round(self.p.epsilon_decay_fraction * self.p.episodes))
        return min(1.0, episode / decay)

    def epsilon(self, episode: int) -> float:
        return self.p.epsilon_start + self._decay(episode) * (self.p.epsilon_end - self.p.epsilon_start)

    def learning_rate(self, episode: int) -> float:
        return self.p.learning_rate + self._decay(episode) * (self.p.learning_rate_end - self.p.learning_rate)

    def _choose(self, i: int, s: np.ndarray, eps: float, u: np.ndarray) -> np.ndarray:
        """Epsilon-greedy over the allowed columns; u (S, 1 + columns): the explore draw, then
        one random key per column (uniform choice among allowed, or among tied best, columns)."""
        mask = self.mask[i][s]
        q = np.where(mask, self.q[i][self.rows, s], -np.inf)
        keys = u[:, 1: 1 + self.cols[i]]
        best = q == q.max(axis=-1, keepdims=True)
        return pick(keys, np.where((u[:, :1] < eps), mask, best))

    def _update(self, i: int, pending: tuple[np.ndarray, np.ndarray, np.ndarray], next_row: np.ndarray | None) -> None:
        row, action, reward = pending
        rows = self.rows
        target = reward.copy()
        if next_row is not None:
            nq = np.where(self.mask[i][next_row], self.q[i][rows, next_row], -np.inf)
            target += self.gamma * nq.max(axis=-1)
        cur = self.q[i][rows, row, action]
        self.q[i][rows, row, action] = cur + self.lr * (target - cur)

    def episode(self, eps: float, learn: bool, log: EpisodeLog, e: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g, S = self.game, self.S
        u = np.stack([rng.random((self.T, 2, self.draws)) for rng in self.rngs])[self.seed_row]  # (S, T, agent, draw)
        balances = np.broadcast_to(g.initial_balance, (S, 2, g.dims)).copy()
        ret, helps, pays = np.zeros((S, 2)), np.zeros((S, 2)), np.zeros((S, 2))
        pending: list = [None, None]  # per agent: (row, action, reward) awaiting its next decision row
        last = np.full(S, self.start, np.int64)
        for t in range(self.T):
            act, payer = g.active(t), 1 - g.active(t)
            s = self.state(t, balances, last=last)
            a, row = [None, None], [s, s]
            a[payer] = self._choose(payer, s, eps, u[:, t, payer])  # the payer moves first
            row[act] = s + (a[payer] > 0)  # the active agent sees whether it was paid
            a[act] = self._choose(act, row[act], eps, u[:, t, act])
            if learn:
                for i in range(2):
                    if pending[i] is not None:
                        self._update(i, pending[i], row[i])
            physical = np.zeros((S, 2), np.int64)
            offer = np.zeros((S, 2), np.int64)
            physical[:, act] = a[act]
            offer[:, payer] = a[payer]
            res = g.step_batch(t, balances, physical, offer, validate=False)  # masks keep actions legal
            pending = [(row[i], a[i], res.rewards[:, i]) for i in range(2)]
            ret += res.rewards
            helps[:, act] += res.executed == YES
            pays[:, payer] += res.paid
            n = self.n_log
            log.executed[:, e, t], log.chosen[:, e, t], log.offer[:, e, t] = res.executed[:n], a[act][:n], a[payer][:n]
            log.rewards[:, e, t], log.balances[:, e, t] = res.rewards[:n], res.balances[:n]
            balances = res.balances
            last = res.executed + 2 * a[payer]
        if learn:
            for i in range(2):
                self._update(i, pending[i], None)
        return ret, helps, pays

    def _log(self, episodes: int) -> EpisodeLog:
        S, T, K = self.n_log, self.T, self.game.dims
        return EpisodeLog(np.zeros((S, episodes, T), np.int8), np.zeros((S, episodes, T), np.int8),
                          np.zeros((S, episodes, T), np.int8), np.zeros((S, episodes, T, 2), np.float32),
                          np.zeros((S, episodes, T, 2, K), np.int16))

    def train(self, progress: Callable[[int], None] | None = None) -> IQLResult:
        E = self.p.episodes
        returns, helps, pays = np.zeros((self.S, E, 2)), np.zeros((self.S, E, 2)), np.zeros((self.S, E, 2))
        eps = np.array([self.epsilon(e) for e in range(E)])
        log = self._log(E)
        for e in range(E):
            self.lr = self.learning_rate(e)
            returns[:, e], helps[:, e], pays[:, e] = self.episode(eps[e], True, log, e)
            if progress:
                progress(e)
        eval_log = self._log(1)
        er, eh, ep = self.episode(0.0, False, eval_log, 0)
        return IQLResult(self.seeds, self.game, self.q, returns, helps, pays, eps, log, er, eh, ep, eval_log)


def train_iql(game: HelpGame, params: IQLParams, seeds: list[int] | None = None,
              progress: Callable[[int], None] | None = None, gammas: list[float] | None = None,
              states: list[StateKind] | None = None, log_rows: int | None = None) -> IQLResult:
    seeds = list(range(params.seeds)) if seeds is None else seeds
    return BatchedIQL(game, params, seeds, gammas, states, log_rows).train(progress)
