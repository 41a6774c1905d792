"""The coordinator's environments: management (routes down a chain) and delegation (kickoff set x
local choices), vectorised over independent lanes (one lane per seed, or per seed x cost weight),
plus single-lane Gymnasium wrappers (`ManagementEnv`, `DelegationEnv`).

An episode is a packet of `packet_size` items. Each step is one attempt on the current item: the
chosen action decides which solvers answer (their one cached answer each, so asking the same solver
again repeats the same answer). Whether the attempt is accepted (stop) or not (retry) is what a
deployed coordinator can observe: the shared `Verifier`'s verdict on each answer, precomputed per
lane seed as a table [lane, item, solver] (common random numbers: the same (solver, item, seed)
gets the same verdict in every method and on every re-ask). Rule with several answerers: the
attempt is accepted if the verifier accepts any of the answers, and the kept answer is the most
expensive accepted one (the strongest solver's, on a price-ordered stack). Accuracy is never the
verdict: an item counts as correct iff its kept answer is right by the gold label. An item whose
last attempt is rejected (its `max_attempts`-th, or its lane's `attempt_limits` entry: a fixed
policy whose route is exhausted) is dropped; under `rejected_last_answer: return` (the default) the
coordinator still returns the answer it holds — the most expensive answer of the item's last
attempt that had one — graded against gold like any other; under `wrong` (the paper's accounting,
where the verdict is the gold label) a dropped item is wrong. Without a verdict table the verifier is
gold (accepted = right), and both rules give the same accuracy. Reward (the same under both rules)

    r = R_corr * accepted - lambda * (C_solve + C_fee) - R_fail

with C_solve the answerers' cached costs, C_fee = alpha * n_e * C_solve on a management route with
n_e handoffs, or alpha * sum of the recipients' expected solve costs over the delegation edges
(see `actions`), and R_fail = fail_penalty when the item's last attempt is rejected (the item is
then dropped). An accepted answer or a drop moves to the next item; the episode ends after the packet.

Observation (float32): with the map, each solver's success rate and lambda x mean cost of the item's
difficulty bucket; then the attempt index (one-hot), the solvers that already answered this item,
and episode progress (items done / packet_size). Without the map ("no map") only the last three.

Lane randomness: packets are drawn from the lane's own stream `default_rng([seed, ENV_STREAM])`,
which nothing else consumes, so every method run with the same seed sees the same packets.
In `sequential` mode (the held-out sweep) the env also keeps per lane and item the gold
correctness of the graded answer, the cost and the reward (`item_outcomes`), for item-level intervals.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from delegation_lab.coordinator.actions import ActionTable, answering_actions, delegation_actions, management_actions
from delegation_lab.coordinator.data import SolverTable

ENV_STREAM = 1


def lane_rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(stream)])


def kept_answer(ans: np.ndarray, ok: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Index (last axis) of the answer an attempt keeps: the most expensive accepted one, else the
    most expensive one given (the strongest solver's, on a price-ordered stack)."""
    accepted = np.argmax(np.where(ok, cost, -1.0), axis=-1)
    given = np.argmax(np.where(ans, cost, -1.0), axis=-1)
    return np.where(ok.any(axis=-1), accepted, given)


@dataclass(frozen=True)
class EnvConfig:
    packet_size: int = 32
    max_attempts: int = 3
    fail_penalty: float = 1.0
    handoff_fee: float = 0.05
    use_map: bool = True
    rejected_last_answer: Literal["return", "wrong"] = "return"


def obs_dim(n_solvers: int, max_attempts: int, use_map: bool) -> int:
    return (2 * n_solvers if use_map else 0) + max_attempts + n_solvers + 1


@dataclass
class StepRecord:
    """Chunked per-step log of every lane (rows are global steps, columns lanes)."""

    n_lanes: int
    chunk: int = 4096
    fields: dict[str, list[np.ndarray]] = field(default_factory=dict)
    _buf: dict[str, np.ndarray] = field(default_factory=dict)
    _row: int = 0
    _by_lane: dict[str, np.ndarray] | None = None  # the fields lane-major, built on the first `lane` call

    DTYPES = {
        "active": np.bool_, "episode": np.int32, "step": np.int32, "item": np.int32, "action": np.int32,
        "correct": np.bool_, "accepted": np.bool_, "cost_usd": np.float64, "reward": np.float64, "calls": np.int8,
        "attempt": np.int8, "position": np.int16, "dropped": np.bool_, "epsilon": np.float32,
    }

    def add(self, **values: np.ndarray) -> None:
        if not self._buf or self._row == self.chunk:
            self._flush()
            self._buf = {k: np.zeros((self.chunk, self.n_lanes), dtype=d) for k, d in self.DTYPES.items()}
        for key, value in values.items():
            self._buf[key][self._row] = value
        self._row += 1

    def _flush(self) -> None:
        if self._buf:
            self._by_lane = None
            for key, arr in self._buf.items():
                self.fields.setdefault(key, []).append(arr[: self._row])
        self._buf, self._row = {}, 0

    def lane(self, lane: int) -> dict[str, np.ndarray]:
        """Every step of one lane, in order (only the steps where it was active)."""
        self._flush()
        if not self.fields:
            return {k: np.zeros(0, dtype=d) for k, d in self.DTYPES.items()}
        if self._by_lane is None:  # lane-major once: a lane's column of the step-major chunks is strided
            self._by_lane = {k: np.ascontiguousarray(np.concatenate(v).T) for k, v in self.fields.items()}
        cols = {k: v[lane] for k, v in self._by_lane.items()}
        keep = cols.pop("active")
        return {k: v[keep] for k, v in cols.items()}


class VecCoordinatorEnv:
    """`n_lanes` independent copies of one coordinator environment, stepped together in numpy.

    mode `sample`: each episode draws a packet of distinct items from the lane's stream; mode
    `sequential`: episode k plays items [k*P, (k+1)*P) of the table in order (the held-out sweep;
    the last packet may be shorter), identical for every lane. Lanes auto-reset until they have
    played `episodes` episodes, then stay finished (`active` False) while the others go on.
    """

    def __init__(
        self,
        table: SolverTable,
        actions: ActionTable,
        config: EnvConfig,
        seeds: list[int] | np.ndarray,
        cost_weights: float | list[float] | np.ndarray,
        episodes: int | None = None,
        mode: Literal["sample", "sequential"] = "sample",
        record: bool = False,
        auto_reset: bool = True,
        verdicts: np.ndarray | None = None,
        map_lanes: np.ndarray | None = None,
        attempt_limits: np.ndarray | None = None,
    ):
        if table.solvers != actions.solvers:
            raise ValueError(f"table solvers {table.solvers} != action solvers {actions.solvers}")
        if config.use_map and table.map_rate is None:
            raise ValueError("use_map needs an ability map (the table has no map features)")
        if mode == "sample" and table.n_items < config.packet_size:
            raise ValueError(f"{table.split} split has {table.n_items} items, fewer than packet_size {config.packet_size}")
        self.table, self.actions, self.config, self.mode = table, actions, config, mode
        self.seeds = np.asarray(seeds, dtype=np.int64)
        self.L = len(self.seeds)
        self.S = len(table.solvers)
        self.P = config.packet_size
        self.K = config.max_attempts
        self.lam = np.broadcast_to(np.asarray(cost_weights, dtype=np.float64), (self.L,)).copy()
        # per lane: attempts before a rejected item is dropped (a fixed policy's route length; else max_attempts)
        self.limit = np.full(self.L, self.K, dtype=np.int64) if attempt_limits is None else \
            np.broadcast_to(np.asarray(attempt_limits, dtype=np.int64), (self.L,)).copy()
        if self.limit.min() < 1 or self.limit.max() > self.K:
            raise ValueError(f"attempt_limits must lie in 1..max_attempts ({self.K}); got {sorted(set(self.limit.tolist()))}")
        self._return_rejected = config.rejected_last_answer == "return"
        if mode == "sequential":
            seq_episodes = -(-table.n_items // self.P)
            episodes = seq_episodes if episodes is None else min(episodes, seq_episodes)
        self.episodes = episodes
        self.auto_reset = auto_reset
        # one packet stream per distinct seed: lanes sharing a seed (cost weights, fixed orders)
        # play the same packets, drawn once
        self._packet_rngs = {int(s): lane_rng(int(s), ENV_STREAM) for s in np.unique(self.seeds)}
        self._packets: dict[int, list[np.ndarray]] = {s: [] for s in self._packet_rngs}
        self.obs_dim = obs_dim(self.S, self.K, config.use_map)
        # per-item observation features (lambda applied per lane at observation time)
        if config.use_map:
            self._rate = table.map_rate.astype(np.float32)
            self._mcost = table.map_cost.astype(np.float64)
        self._correct = table.correct
        if verdicts is not None and verdicts.shape != (self.L, table.n_items, self.S):
            raise ValueError(f"verdicts have shape {verdicts.shape}, expected (lanes, items, solvers) = "
                             f"{(self.L, table.n_items, self.S)}")
        self._accept = verdicts  # [L, N, S] or None (gold: accepted = right)
        # lanes that see the map features (the others get zeros there: a no-map coordinator in a map env)
        self._map_mask = None if map_lanes is None or np.all(map_lanes) else np.asarray(map_lanes, dtype=np.float32)[:, None]
        self._lanes = np.arange(self.L)
        self._cost = table.cost
        self._expected = table.expected_cost
        self._ans = actions.answers
        self._ans_f = actions.answers.astype(np.float64)
        self._handoffs = actions.handoffs.astype(np.float64)
        self._edges = actions.edges.astype(np.float64)
        # lane state
        self.packet = np.zeros((self.L, self.P), dtype=np.int64)
        self.packet_len = np.full(self.L, self.P, dtype=np.int64)
        self.pos = np.zeros(self.L, dtype=np.int64)
        self.attempt = np.zeros(self.L, dtype=np.int64)
        self.tried = np.zeros((self.L, self.S), dtype=bool)
        self.held_right = np.zeros(self.L, dtype=bool)  # gold correctness of the answer held on the current item
        self.graded = np.zeros(self.L, dtype=bool)  # the last step's graded outcome (the record's `correct`)
        self.episode = np.zeros(self.L, dtype=np.int64)  # episodes completed
        self.t_ep = np.zeros(self.L, dtype=np.int64)
        self.active = np.ones(self.L, dtype=bool)
        n_ep = episodes if episodes is not None else 1
        self.stats = {
            "return": np.zeros((self.L, n_ep)), "cost_usd": np.zeros((self.L, n_ep)),
            "correct": np.zeros((self.L, n_ep), dtype=np.int64), "accepted": np.zeros((self.L, n_ep), dtype=np.int64),
            "steps": np.zeros((self.L, n_ep), dtype=np.int64),
            "items": np.zeros((self.L, n_ep), dtype=np.int64), "calls": np.zeros((self.L, n_ep, self.S), dtype=np.int64),
        }
        self._ep_acc = {k: np.zeros_like(v[:, 0]) for k, v in self.stats.items()}
        self.record = StepRecord(self.L) if record else None
        self.total_steps = np.zeros(self.L, dtype=np.int64)
        if mode == "sequential":  # per lane x item: gold correctness of the kept answer, cost, reward, and
            # where the oracle gap goes (frontier/gap.py): did an answerer get it right, the kept answer's cost
            self.item_outcomes = {"correct": np.zeros((self.L, table.n_items), dtype=bool),
                                  "cost_usd": np.zeros((self.L, table.n_items)),
                                  "reward": np.zeros((self.L, table.n_items)),
                                  "held_right": np.zeros((self.L, table.n_items), dtype=bool),
                                  "answer_cost_usd": np.zeros((self.L, table.n_items))}
        else:
            self.item_outcomes = None

    # ------------------------------------------------------------------------------ episodes

    def _packet(self, seed: int, episode: int) -> np.ndarray:
        drawn = self._packets[seed]
        while len(drawn) <= episode:
            drawn.append(self._packet_rngs[seed].choice(self.table.n_items, self.P, replace=False))
        return drawn[episode]

    def _new_packets(self, lanes: np.ndarray) -> None:
        for lane in np.flatnonzero(lanes):
            if self.mode == "sample":
                self.packet[lane] = self._packet(int(self.seeds[lane]), int(self.episode[lane]))
                self.packet_len[lane] = self.P
            else:
                start = int(self.episode[lane]) * self.P
                items = np.arange(start, min(start + self.P, self.table.n_items))
                self.packet[lane, : len(items)] = items
                self.packet[lane, len(items):] = items[-1]
                self.packet_len[lane] = len(items)
        self.pos[lanes] = 0
        self.attempt[lanes] = 0
        self.tried[lanes] = False
        self.held_right[lanes] = False
        self.t_ep[lanes] = 0

    def reset(self) -> np.ndarray:
        everyone = np.ones(self.L, dtype=bool)
        self.episode[:] = 0
        self.active[:] = True
        self._new_packets(everyone)
        return self.observe()

    def current_items(self) -> np.ndarray:
        return self.packet[np.arange(self.L), np.minimum(self.pos, self.packet_len - 1)]

    def observe(self, rows: np.ndarray | None = None) -> np.ndarray:
        """[L, obs_dim] float32 (or the lanes `rows` only); a finished packet (terminal state) has
        zero item features."""
        ix = self._lanes if rows is None else rows
        pos, packet_len = self.pos[ix], self.packet_len[ix]
        items = self.packet[ix, np.minimum(pos, packet_len - 1)]
        live = (pos < packet_len)[:, None]
        n = len(ix)
        out = np.zeros((n, self.obs_dim), dtype=np.float32)
        col = 0
        if self.config.use_map:
            seen = live if self._map_mask is None else live * self._map_mask[ix]
            out[:, : self.S] = self._rate[items] * seen
            out[:, self.S : 2 * self.S] = self._mcost[items] * self.lam[ix, None] * seen
            col = 2 * self.S
        out[np.arange(n), col + np.minimum(self.attempt[ix], self.K - 1)] = live[:, 0]
        col += self.K
        out[:, col : col + self.S] = self.tried[ix]
        out[:, col + self.S] = pos / self.P
        return out

    # ------------------------------------------------------------------------------- stepping

    def verdicts_of(self, items: np.ndarray) -> np.ndarray:
        """[L, S]: does the verifier accept each solver's answer on each lane's item?"""
        if self._accept is None:
            return self._correct[items]
        return self._accept[self._lanes, items]

    def outcomes(self, items: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        """(answer mask [L, S], accepted [L], kept answer right [L], solve cost [L], fee [L]) of
        `actions` on `items`. The kept answer is the most expensive accepted one, or when none is
        accepted the most expensive one given (what a drop returns); False when nobody answers."""
        ans = self._ans[actions]
        ok = ans & self.verdicts_of(items)
        accepted = ok.any(axis=1)
        cost = self._cost[items]
        kept = kept_answer(ans, ok, cost)
        right = ans.any(axis=1) & self._correct[items][self._lanes, kept]
        solve = (self._ans_f[actions] * cost).sum(axis=1)
        fee = self.config.handoff_fee * (self._handoffs[actions] * solve + (self._edges[actions] * self._expected[items]).sum(axis=1))
        return ans, accepted, right, solve, fee

    def step(self, actions: np.ndarray, epsilon: np.ndarray | float = 0.0,
             observe: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step the active lanes. Returns (next_obs, reward, done, terminal_obs, stepped): `next_obs`
        is the observation to act on next (after an auto-reset), `terminal_obs` the one that ended
        the transition (what a replay buffer stores), `stepped` the lanes that moved. `observe=False`
        (a policy that never reads them) returns zeros for both and skips building them."""
        actions = np.asarray(actions, dtype=np.int64)
        act = self.active.copy()
        items = self.current_items()
        ans, accepted, kept_right, solve, fee = self.outcomes(items, actions)
        ans &= act[:, None]
        accepted &= act
        cost = np.where(act, solve + fee, 0.0)
        failed = act & ~accepted
        attempt_before = self.attempt.copy()
        self.attempt = np.where(failed, self.attempt + 1, self.attempt)
        dropped = failed & (self.attempt >= self.limit)
        reward = accepted.astype(np.float64) - self.lam * cost - self.config.fail_penalty * dropped
        reward = np.where(act, reward, 0.0)
        # the answer held on the item: this attempt's, or an earlier one's when nobody answered now
        self.held_right = np.where(ans.any(axis=1), kept_right, self.held_right)
        right = accepted & kept_right
        if self._return_rejected:
            right |= dropped & self.held_right
        self.graded = right
        advance = accepted | dropped
        self.tried |= ans
        self.tried[advance] = False
        self.held_right[advance] = False
        self.attempt[advance] = 0
        if self.record is not None:
            eps = np.broadcast_to(np.asarray(epsilon, dtype=np.float32), (self.L,))
            self.record.add(active=act, episode=self.episode, step=self.t_ep, item=items, action=actions,
                            correct=right, accepted=accepted, cost_usd=cost, reward=reward, calls=ans.sum(axis=1),
                            attempt=attempt_before + 1, position=self.pos, dropped=dropped, epsilon=eps)
        if self.item_outcomes is not None:
            out = self.item_outcomes
            out["correct"][self._lanes, items] |= right
            out["cost_usd"][self._lanes, items] += cost
            out["reward"][self._lanes, items] += reward
            out["held_right"][self._lanes, items] |= (ans & self._correct[items]).any(axis=1)
            costs = self._cost[items]
            kept_cost = costs[self._lanes, kept_answer(ans, ans & self.verdicts_of(items), costs)]
            # the answer returned: an accepted one, or (rule `return`) the one a drop keeps when it answered now
            returned = accepted | (dropped & ans.any(axis=1) if self._return_rejected else False)
            out["answer_cost_usd"][self._lanes, items] += np.where(returned, kept_cost, 0.0)
        acc = self._ep_acc
        acc["return"] += reward
        acc["cost_usd"] += cost
        acc["correct"] += right
        acc["accepted"] += accepted
        acc["steps"] += act
        acc["calls"] += ans
        self.pos = self.pos + advance
        self.t_ep = self.t_ep + act
        self.total_steps += act
        done = act & (self.pos >= self.packet_len)
        terminal_obs = self.observe() if observe else np.zeros((self.L, self.obs_dim), dtype=np.float32)
        if done.any():
            lanes = np.flatnonzero(done)
            ep = self.episode[lanes]
            acc["items"][lanes] = self.packet_len[lanes]
            if self.episodes is not None:
                for key, arr in self.stats.items():
                    arr[lanes, ep] = acc[key][lanes]
            for arr in acc.values():
                arr[lanes] = 0
            self.episode[lanes] += 1
            if self.auto_reset:
                finished = done & (self.episode >= self.episodes) if self.episodes is not None else np.zeros_like(done)
                self.active &= ~finished
                again = done & ~finished
                next_obs = terminal_obs
                if again.any():
                    self._new_packets(again)
                    if observe:
                        next_obs = terminal_obs.copy()  # only the lanes that started a packet changed
                        rows = np.flatnonzero(again)
                        next_obs[rows] = self.observe(rows)
            else:
                next_obs = self.observe() if observe else terminal_obs
        else:
            next_obs = terminal_obs
        return next_obs, reward, done, terminal_obs, act

    def lanes_view(self, lanes: np.ndarray) -> VecCoordinatorEnv:
        """A finished env's lanes `lanes` as an env of their own (stats, step record, item outcomes),
        for reporting the methods that trained side by side in one batch; it is not stepped again."""
        lanes = np.asarray(lanes, dtype=np.int64)
        view = copy.copy(self)
        for name in ("seeds", "lam", "limit", "packet", "packet_len", "pos", "attempt", "tried", "held_right", "graded",
                     "episode", "t_ep", "active", "total_steps"):
            setattr(view, name, getattr(self, name)[lanes].copy())
        view.L = len(lanes)
        view._lanes = np.arange(view.L)
        view._accept = None if self._accept is None else self._accept[lanes]
        view._map_mask = None if self._map_mask is None else self._map_mask[lanes]
        view.stats = {k: v[lanes].copy() for k, v in self.stats.items()}
        view._ep_acc = {k: v[lanes].copy() for k, v in self._ep_acc.items()}
        view.item_outcomes = None if self.item_outcomes is None else {k: v[lanes].copy() for k, v in self.item_outcomes.items()}
        if self.record is not None:
            self.record._flush()
            view.record = StepRecord(view.L)
            view.record.fields = {k: [c[:, lanes] for c in v] for k, v in self.record.fields.items()}
        return view

    def oracle_actions(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Per lane, the action of highest immediate reward knowing the verdicts (the cheapest
        accepted option; the cheapest option when none is accepted), and on equal reward the one
        whose graded answer is right (a rejected answer counts where this attempt is the item's
        last and the rule returns it): an upper bound on the return, not a policy one could deploy."""
        ix = self._lanes if rows is None else rows
        items = self.current_items()[ix]
        verdict = self.verdicts_of(self.current_items())[ix]  # [L, S]
        ans = np.broadcast_to(self._ans[None], (len(ix), *self._ans.shape))  # [L, A, S]
        ok = ans & verdict[:, None, :]
        accepted = ok.any(axis=2)
        cost = self._cost[items]
        kept = kept_answer(ans, ok, np.broadcast_to(cost[:, None, :], ans.shape))  # [L, A]
        kept_right = np.take_along_axis(self._correct[items], kept, axis=1)
        last = (self.attempt[ix] + 1 >= self.limit[ix])[:, None] & self._return_rejected
        right = (accepted | last) & kept_right
        solve = cost @ self._ans_f.T  # [L, A]
        fee = self.config.handoff_fee * (self._handoffs[None] * solve + self._expected[items] @ self._edges.T)
        value = accepted - self.lam[ix, None] * (solve + fee)
        best = value.max(axis=1, keepdims=True)
        return np.argmax((value >= best - 1e-12) * (1.0 + right), axis=1)


# ------------------------------------------------------------------------------------ Gymnasium


class _SingleLaneEnv(gym.Env):
    """One lane of `VecCoordinatorEnv` behind the Gymnasium API (explicit resets, no auto-reset)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, table: SolverTable, actions: ActionTable, config: EnvConfig, cost_weight: float = 100.0,
                 mode: Literal["sample", "sequential"] = "sample", verdicts: np.ndarray | None = None):
        self.table, self.table_actions, self.config = table, actions, config
        self.verdicts = verdicts  # [N, S] for every lane seed (None: gold)
        self.cost_weight, self.mode = cost_weight, mode
        dim = obs_dim(len(table.solvers), config.max_attempts, config.use_map)
        high = np.ones(dim, dtype=np.float32)
        if config.use_map:  # lambda x mean cost of the bucket: bounded by the table's largest
            n = len(table.solvers)
            high[n:2 * n] = np.float32(cost_weight) * table.map_cost.max(axis=0).astype(np.float32) + 1e-6
        self.observation_space = gym.spaces.Box(low=0.0, high=high, shape=(dim,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(actions.n)
        self.core: VecCoordinatorEnv | None = None

    def _make_core(self, seed: int) -> VecCoordinatorEnv:
        return VecCoordinatorEnv(self.table, self.table_actions, self.config, [seed], self.cost_weight,
                                 episodes=None, mode=self.mode, auto_reset=False,
                                 verdicts=None if self.verdicts is None else self.verdicts[None])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None or self.core is None:
            lane_seed = seed if seed is not None else int(self.np_random.integers(2**31))
            self.core = self._make_core(lane_seed)
            obs = self.core.reset()
        else:
            self.core.active[:] = True
            if self.core.pos[0] < self.core.packet_len[0]:  # reset mid-episode: that packet is spent too
                self.core.episode += 1
            self.core._new_packets(np.ones(1, dtype=bool))
            obs = self.core.observe()
        return obs[0], {"item_id": self._item_id()}

    def _item_id(self) -> str:
        return str(self.table.item_ids[self.core.current_items()[0]])

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.core is None:
            raise RuntimeError("call reset() before step()")
        item_id = self._item_id()
        items = self.core.current_items()
        _, accepted, _, solve, fee = self.core.outcomes(items, np.array([int(action)]))
        _, reward, done, terminal_obs, _ = self.core.step(np.array([int(action)]))
        info = {"item_id": item_id, "executors": self.table_actions.executors(int(action)),
                "accepted": bool(accepted[0]), "correct": bool(self.core.graded[0]), "cost_usd": float(solve[0] + fee[0])}
        return terminal_obs[0], float(reward[0]), bool(done[0]), False, info


class ManagementEnv(_SingleLaneEnv):
    """History Matters §3.1: one action per management route (A; A->B; A->B->C)."""

    def __init__(self, table: SolverTable, routes: list[list[str]], config: EnvConfig = EnvConfig(),
                 cost_weight: float = 100.0, mode: Literal["sample", "sequential"] = "sample",
                 verdicts: np.ndarray | None = None):
        super().__init__(table, management_actions(routes, table.solvers), config, cost_weight, mode, verdicts)


class DelegationEnv(_SingleLaneEnv):
    """History Matters §3.2: kickoff set x each agent's answer / pass choice (189 joint actions for 3;
    `answering=True`: the 52 distinct ones in which somebody answers, what the study trains on)."""

    def __init__(self, table: SolverTable, config: EnvConfig = EnvConfig(), cost_weight: float = 100.0,
                 mode: Literal["sample", "sequential"] = "sample", verdicts: np.ndarray | None = None,
                 answering: bool = False):
        actions = delegation_actions(table.solvers)
        super().__init__(table, answering_actions(actions) if answering else actions, config, cost_weight, mode, verdicts)
