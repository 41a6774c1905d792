"""The alternating help game of History Matters §3.3, with optional virtual money (§2.4).

Two agents A and B alternate being active: A at steps 1, 3, ... (phase s1), B at steps 2, 4, ...
(phase s2). The active agent chooses Null or Yes; Yes costs it `help_cost` and gives the other
agent `help_benefit` (paper: 1 and 100). With money, each agent holds a balance (a vector: one
amount per money dimension, paper: one dimension, 1 unit each) and the passive agent, the payer,
may offer one of the fixed prices of its contract Cr^i for the active agent's Yes when its balance
covers the price in every dimension. A paid offer moves the price from the payer to the active
agent and forces Yes. Money never enters the reward.

`step_batch` is the one implementation of these rules, on arrays with a leading batch axis
(seeds); `MoneyHelpEnv` (a PettingZoo ParallelEnv) and the seed-batched IQL both call it.
Actions of the env are flat: `action = physical + 2 * offer`, physical 0 = Null / 1 = Yes, offer
0 = none / m = the payer's m-th contract price. The observation holds (phase, t, balance of A per
dimension, balance of B per dimension) and the mask of allowed actions; an action outside the mask
(the active agent paying, an offer beyond the balance) is an error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from delegation_lab.games.params import AGENTS, HelpGameParams

NULL, YES = 0, 1
PHYSICAL = ("Null", "Yes")


@dataclass(frozen=True)
class HelpGame:
    steps: int
    help_cost: float
    help_benefit: float
    money: bool
    initial_balance: np.ndarray
    """(2, K) int: balances at reset (K = 0 without money)."""
    prices: np.ndarray
    """(2, 1 + M, K) int: prices[payer, offer]; offer 0 = no payment (zeros); padded rows are unusable."""
    n_offers: tuple[int, int]
    """Offers in each payer's contract (0 without money)."""

    @staticmethod
    def from_params(p: HelpGameParams, money: bool) -> HelpGame:
        if not money:
            return HelpGame(p.steps, p.help_cost, p.help_benefit, False, np.zeros((2, 0), np.int64),
                            np.zeros((2, 1, 0), np.int64), (0, 0))
        k = len(p.money.initial_balance["A"])
        m = max(len(p.money.contracts[a]) for a in AGENTS)
        prices = np.zeros((2, 1 + m, k), np.int64)
        for i, agent in enumerate(AGENTS):
            for o, price in enumerate(p.money.contracts[agent]):
                prices[i, 1 + o] = price
        balance = np.array([p.money.initial_balance[a] for a in AGENTS], np.int64)
        return HelpGame(p.steps, p.help_cost, p.help_benefit, True, balance, prices,
                        tuple(len(p.money.contracts[a]) for a in AGENTS))  # type: ignore[arg-type]

    @property
    def dims(self) -> int:
        return self.initial_balance.shape[1]

    @property
    def total(self) -> np.ndarray:
        """Money per dimension (conserved)."""
        return self.initial_balance.sum(axis=0)

    @property
    def n_actions(self) -> int:
        return 2 * self.prices.shape[1]

    @staticmethod
    def active(t: int) -> int:
        """Index of the active agent at 0-based step t (A at steps 1, 3, ... of the paper)."""
        return t % 2

    def affordable(self, payer: int, balances: np.ndarray) -> np.ndarray:
        """(S, 1 + M) bool: offers the payer may make with balances (S, 2, K); offer 0 always."""
        ok = (balances[:, payer, None, :] >= self.prices[payer][None]).all(axis=-1)
        ok[:, 1 + self.n_offers[payer]:] = False
        return ok

    def action_mask(self, t: int, balances: np.ndarray) -> np.ndarray:
        """(S, 2, n_actions) bool over flat actions physical + 2 * offer."""
        s = balances.shape[0]
        act = self.active(t)
        offers = np.zeros((s, 2, self.prices.shape[1]), bool)
        offers[:, act, 0] = True
        offers[:, 1 - act] = self.affordable(1 - act, balances)
        return np.repeat(offers, 2, axis=-1)  # flat index physical + 2 * offer

    def step_batch(self, t: int, balances: np.ndarray, physical: np.ndarray, offer: np.ndarray,
                   validate: bool = True) -> StepResult:
        """Apply one step to S games at once. physical, offer: (S, 2) ints per agent."""
        act, payer = self.active(t), 1 - self.active(t)
        o = offer[:, payer]
        if validate:
            if (offer[:, act] != 0).any():
                raise ValueError(f"agent {AGENTS[act]} is active at step {t + 1} and cannot pay")
            if ((o < 0) | (o > self.n_offers[payer])).any() or not self.affordable(payer, balances)[np.arange(len(o)), o].all():
                raise ValueError(f"agent {AGENTS[payer]}: offer not in its contract or beyond its balance at step {t + 1}")
        paid = o > 0
        executed = np.where(paid, YES, physical[:, act]).astype(np.int64)
        rewards = np.zeros((len(o), 2))
        rewards[:, act] = -self.help_cost * executed
        rewards[:, payer] = self.help_benefit * executed
        price = self.prices[payer][o]  # (S, K), zeros when no offer
        nxt = balances.copy()
        nxt[:, payer] -= price
        nxt[:, act] += price
        return StepResult(rewards, nxt, executed, paid, paid & (physical[:, act] != YES))


@dataclass
class StepResult:
    rewards: np.ndarray  # (S, 2) environmental rewards
    balances: np.ndarray  # (S, 2, K) after the transfer
    executed: np.ndarray  # (S,) the active agent's executed physical action
    paid: np.ndarray  # (S,) the payer paid (and so Yes was forced)
    forced: np.ndarray  # (S,) the contract overrode a Null


class MoneyHelpEnv(ParallelEnv):
    """PettingZoo ParallelEnv of the alternating help game, with or without money."""

    metadata = {"name": "money_help_v0", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(self, game: HelpGame, render_mode: str | None = None):
        self.game = game
        self.render_mode = render_mode
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.t = 0
        self.balances = game.initial_balance[None].copy()
        self.last: StepResult | None = None
        high = [2, game.steps + 1] + [int(x) + 1 for x in game.total] * 2
        self._obs_space = spaces.Dict({
            "observation": spaces.MultiDiscrete(np.array(high, dtype=np.int64)),
            "action_mask": spaces.Box(0, 1, shape=(game.n_actions,), dtype=np.int8),
        })
        self._act_space = spaces.Discrete(game.n_actions)

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one space object per agent, as the API asks
    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    @functools.lru_cache(maxsize=None)  # noqa: B019
    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def _observe(self) -> dict[str, dict[str, np.ndarray]]:
        t = min(self.t, self.game.steps)
        vec = np.concatenate([[t % 2, t], self.balances[0, 0], self.balances[0, 1]]).astype(np.int64)
        mask = self.game.action_mask(min(self.t, self.game.steps - 1), self.balances)[0].astype(np.int8)
        return {a: {"observation": vec.copy(), "action_mask": mask[i].copy()} for i, a in enumerate(self.possible_agents)}

    def _infos(self) -> dict[str, dict]:
        act = self.game.active(self.t) if self.t < self.game.steps else None
        out = {}
        for i, a in enumerate(self.possible_agents):
            info = {"balance": self.balances[0, i].tolist(), "active": act == i}
            if self.last is not None:
                info.update(paid=bool(self.last.paid[0]), forced=bool(self.last.forced[0]),
                            executed=PHYSICAL[int(self.last.executed[0])])
            out[a] = info
        return out

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.agents = list(self.possible_agents)
        self.t = 0
        self.balances = self.game.initial_balance[None].copy()
        self.last = None
        if seed is not None:
            self._act_space.seed(seed)
        return self._observe(), self._infos()

    def step(self, actions: dict[str, int]):
        if not self.agents:
            raise RuntimeError("step() after the episode ended; call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"missing actions for {missing}")
        mask = self.game.action_mask(self.t, self.balances)[0]
        flat = np.array([int(actions[a]) for a in self.possible_agents])
        for i, a in enumerate(self.possible_agents):
            if not (0 <= flat[i] < self.game.n_actions) or not mask[i, flat[i]]:
                raise ValueError(f"agent {a}: action {flat[i]} is not allowed at step {self.t + 1} (mask {mask[i].astype(int).tolist()})")
        self.last = self.game.step_batch(self.t, self.balances, (flat % 2)[None], (flat // 2)[None])
        self.balances = self.last.balances
        self.t += 1
        done = self.t >= self.game.steps
        rewards = {a: float(self.last.rewards[0, i]) for i, a in enumerate(self.possible_agents)}
        obs, infos = self._observe(), self._infos()
        terminations = {a: done for a in self.possible_agents}
        truncations = {a: False for a in self.possible_agents}
        if done:
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        last = ""
        if self.last is not None:
            act = AGENTS[self.game.active(self.t - 1)]
            paid = " (paid, forced)" if self.last.forced[0] else " (paid)" if self.last.paid[0] else ""
            last = f" | step {self.t}: {act} {PHYSICAL[int(self.last.executed[0])]}{paid}"
        return f"t={self.t} balances A={self.balances[0, 0].tolist()} B={self.balances[0, 1].tolist()}{last}"

    def close(self) -> None:
        pass
