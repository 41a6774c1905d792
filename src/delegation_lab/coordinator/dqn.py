"""DQN for the coordinator, every seed trained at once with the seed ("lane") dimension inside the
tensors (CleanRL's dqn.py, batched).

Each lane has its own Q-network and target network (ensemble layers: weights [L, in, out] applied
with one batched matmul), its own replay buffer, epsilon schedule, RNG streams and environment lane.
Lanes run in lockstep: every active lane takes one environment step per iteration and, after
`learning_starts`, one gradient step every `train_frequency` steps, so the active lanes always share
their step and update counts. A lane that has played its episodes stops stepping; its weights are
frozen at that moment (a snapshot) and it leaves the batch (its weights, target and Adam moments
are compacted out), so a finished lane no longer costs compute while the slowest lanes go on.

Per lane seed s the streams are `default_rng([s, k])` — k = 1 packets (the env), 2 exploration
(two uniforms per step: explore?, which action), 3 replay sampling (`batch_size` uniforms per
update, index = floor(u * filled)) — and torch's `Generator` seeded from SeedSequence([s, 4]) draws
the initial weights (nn.Linear's default init). `reference.py` runs the same algorithm for one seed
as a plain loop; a test checks that both take the same actions.

Lanes of different methods train in one batch: a lane may see only some of the inputs
(`lane_inputs`: e.g. the no-map coordinator beside the map one, whose map features the env zeroes
for it). Such a lane's first layer is its own network's init (drawn for its own input width)
embedded with zero rows for the inputs it never sees; those rows get exactly zero gradient and stay
zero, so it is the smaller network, and `GreedyPolicy.lanes` hands it back in that shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from delegation_lab.coordinator.envs import VecCoordinatorEnv, lane_rng
from delegation_lab.coordinator.params import DqnParams

EXPLORE_STREAM = 2
REPLAY_STREAM = 3
INIT_STREAM = 4
# Up to this many actions the online Q(s, a) is read from the full output (management: 3 routes,
# 15 % faster per update than the row gather); above it, from the taken actions' rows only
# (delegation: 52 answering joint actions, 22 % faster that way) - measured at 40-60 lanes, 1 thread.
FULL_OUTPUT_ACTIONS = 8


def init_seed(seed: int) -> int:
    return int(np.random.SeedSequence([int(seed), INIT_STREAM]).generate_state(1)[0])


def init_layers(seed: int, sizes: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weight [out, in], bias [out]) per layer, drawn like nn.Linear's default init from one generator."""
    gen = torch.Generator().manual_seed(init_seed(seed))
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        bound = 1.0 / math.sqrt(fan_in)
        w = torch.empty(fan_out, fan_in).uniform_(-bound, bound, generator=gen)
        b = torch.empty(fan_out).uniform_(-bound, bound, generator=gen)
        layers.append((w, b))
    return layers


def _embedded_init(seed: int, sizes: list[int], inputs: np.ndarray) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The init of a network over the inputs `inputs` only, its first layer padded with zero columns."""
    layers = init_layers(seed, [int(inputs.sum())] + sizes[1:])
    w, b = layers[0]
    full = torch.zeros(w.shape[0], sizes[0])
    full[:, torch.from_numpy(np.flatnonzero(inputs))] = w
    return [(full, b)] + layers[1:]


def epsilon_at(updates: int, p: DqnParams) -> float:
    frac = min(1.0, updates / p.epsilon_decay_steps)
    return p.epsilon_start + frac * (p.epsilon_end - p.epsilon_start)


def layer_sizes(obs_dim: int, n_actions: int, p: DqnParams) -> list[int]:
    return [obs_dim] + [p.hidden] * p.hidden_layers + [n_actions]


class EnsembleQ:
    """L MLPs as ensemble layers, applied to x [L, B, in] with one batched matmul per layer.

    Hidden layer k: weight [L, in, out], bias [L, 1, out]. The output layer is stored out-major,
    weight [L, n_actions, hidden] (nn.Linear's layout per lane), so that the online network's
    Q(s, a) for the taken actions reads just those rows (`forward_taken`): with 189 joint actions
    that skips two of the four big matmuls of an update (the output layer's forward and input
    gradient), and its weight gradient is a row scatter instead of a dense product.
    """

    def __init__(self, sizes: list[int], seeds: list[int], device: torch.device, lane_inputs: np.ndarray | None = None):
        self.sizes, self.L, self.device = sizes, len(seeds), device
        per_lane = [init_layers(s, sizes) if lane_inputs is None or lane_inputs[i].all()
                    else _embedded_init(s, sizes, lane_inputs[i]) for i, s in enumerate(seeds)]
        n = len(sizes) - 1
        self.params: list[torch.Tensor] = []
        for k in range(n):
            w = torch.stack([layers[k][0] if k == n - 1 else layers[k][0].T for layers in per_lane]).contiguous()
            b = torch.stack([layers[k][1] for layers in per_lane])[:, None, :].contiguous()
            self.params += [w.to(device).requires_grad_(True), b.to(device).requires_grad_(True)]
        self._rows = torch.arange(self.L, device=device)[:, None] * sizes[-1]

    @staticmethod
    def hidden(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        h = x
        for k in range(len(params) // 2 - 1):
            h = torch.relu(torch.baddbmm(params[2 * k + 1], h, params[2 * k]))
        return h

    @staticmethod
    def forward(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """x [L, B, in] -> Q [L, B, n_actions] with the weights `params` (online or target)."""
        return torch.baddbmm(params[-1], EnsembleQ.hidden(params, x), params[-2].transpose(1, 2))

    def forward_taken(self, params: list[torch.Tensor], x: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q(x, a) [L, B] for the actions [L, B] only."""
        w, b = params[-2], params[-1]
        L, A, H = w.shape
        if A <= FULL_OUTPUT_ACTIONS:  # a narrow output layer: one small matmul beats the row gather
            return self.forward(params, x).gather(2, actions[:, :, None])[:, :, 0]
        h = self.hidden(params, x)
        rows = (self._rows + actions).reshape(-1)
        w_a = w.reshape(L * A, H).index_select(0, rows).view(L, -1, H)
        b_a = b.reshape(L * A).index_select(0, rows).view(L, -1)
        return (h * w_a).sum(dim=2) + b_a

    def compact(self, keep: np.ndarray, opt: torch.optim.Adam, lr: float) -> torch.optim.Adam:
        """Keep only the lanes at positions `keep` (finished lanes leave the batch, so they stop
        costing compute); returns a new Adam holding the kept lanes' moments and the shared step."""
        index = torch.from_numpy(np.asarray(keep, dtype=np.int64)).to(self.device)
        old = self.params
        self.params = [w.detach().index_select(0, index).clone().requires_grad_(True) for w in old]
        self.L = len(keep)
        self._rows = torch.arange(self.L, device=self.device)[:, None] * self.sizes[-1]
        new = make_adam(self.params, lr)
        for w_old, w_new in zip(old, self.params, strict=True):
            state = opt.state.get(w_old)
            if state:
                new.state[w_new] = {k: v.clone() if k == "step" else v.index_select(0, index).clone()
                                    for k, v in state.items()}
        return new

    def lane_layers(self, lane: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Lane `lane`'s (weight [out, in], bias [out]) per layer, detached on the CPU."""
        n = len(self.params) // 2
        return [
            ((self.params[2 * k][lane] if k == n - 1 else self.params[2 * k][lane].T).detach().cpu().clone(),
             self.params[2 * k + 1][lane, 0].detach().cpu().clone())
            for k in range(n)
        ]


def make_adam(params: list[torch.Tensor], lr: float) -> torch.optim.Adam:
    """Adam; the fused kernel where this torch has it for the device (one pass over every tensor)."""
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, lr=lr)


class LaneUniforms:
    """Per-lane uniform draws, `width` per call, refilled in chunks (the same stream as drawing
    `width` at a time: numpy's generators fill doubles sequentially)."""

    def __init__(self, rngs: list[np.random.Generator], width: int, chunk: int = 512):
        self.rngs, self.width, self.chunk = rngs, width, chunk
        self.buf = np.zeros((len(rngs), chunk, width))
        self.i = chunk

    def next(self) -> np.ndarray:
        if self.i == self.chunk:
            for lane, rng in enumerate(self.rngs):
                self.buf[lane] = rng.random((self.chunk, self.width))
            self.i = 0
        row = self.buf[:, self.i].copy()
        self.i += 1
        return row


class ReplayBuffer:
    """Every lane's replay buffer in one float32 array [L, cap, 2 x obs_dim + 3]: a transition's
    observation, next observation, action, reward and done flag lie side by side, so a sample reads
    one or two cache lines instead of five scattered ones (at 40-60 lanes x 80k slots the buffers
    are hundreds of MB; separate arrays made the replay gather a fifth of a delegation update).
    Actions are stored as float32, exact for any index below 2**24."""

    def __init__(self, lanes: int, cap: int, obs_dim: int):
        self.cap, self.D = cap, obs_dim
        self.data = np.zeros((lanes, cap, 2 * obs_dim + 3), dtype=np.float32)
        self._flat = self.data.reshape(lanes * cap, -1)

    def add(self, slot: int, obs: np.ndarray, next_obs: np.ndarray, actions: np.ndarray, reward: np.ndarray,
            done: np.ndarray) -> None:
        D, row = self.D, self.data[:, slot]
        row[:, :D] = obs
        row[:, D : 2 * D] = next_obs
        row[:, 2 * D] = actions
        row[:, 2 * D + 1] = reward
        row[:, 2 * D + 2] = done

    def sample(self, lanes: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, ...]:
        """(obs, next_obs, actions int64, reward, done), each [len(lanes), B], of slots `idx` [len(lanes), B]."""
        D = self.D
        x = np.take(self._flat, (lanes[:, None] * self.cap + idx).ravel(), axis=0).reshape(*idx.shape, -1)
        return (np.ascontiguousarray(x[:, :, :D]), np.ascontiguousarray(x[:, :, D : 2 * D]),
                x[:, :, 2 * D].astype(np.int64), np.ascontiguousarray(x[:, :, 2 * D + 1]),
                np.ascontiguousarray(x[:, :, 2 * D + 2]))


class GreedyPolicy:
    """A trained ensemble's frozen weights: greedy actions for a batch of lanes (lane l, network l)."""

    def __init__(self, sizes: list[int], layers: list[list[tuple[torch.Tensor, torch.Tensor]]]):
        self.sizes = sizes
        self.layers = layers  # per lane, per layer: (weight [out, in], bias [out]) on the CPU
        n = len(sizes) - 1
        self._w = [torch.stack([lane[k][0].T for lane in layers]).contiguous() for k in range(n)]
        self._b = [torch.stack([lane[k][1] for lane in layers])[:, None, :].contiguous() for k in range(n)]

    @property
    def n_lanes(self) -> int:
        return len(self.layers)

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """obs [L, obs_dim] -> Q [L, n_actions]."""
        with torch.no_grad():
            h = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32))[:, None, :]
            for k, (w, b) in enumerate(zip(self._w, self._b, strict=True)):
                h = torch.baddbmm(b, h, w)
                if k < len(self._w) - 1:
                    h = torch.relu(h)
            return h[:, 0, :].numpy()

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.q_values(obs).argmax(axis=1)

    def subset(self, lanes: list[int]) -> GreedyPolicy:
        return GreedyPolicy(self.sizes, [self.layers[i] for i in lanes])

    def lanes(self, lanes: list[int] | np.ndarray, inputs: np.ndarray | None = None) -> GreedyPolicy:
        """The networks of `lanes`, reading only the inputs `inputs` (bool [in]; None = all)."""
        if inputs is None or inputs.all():
            return self.subset([int(i) for i in lanes])
        keep = torch.from_numpy(np.flatnonzero(inputs))
        layers = [[(lane[0][0][:, keep].clone(), lane[0][1])] + lane[1:] for lane in (self.layers[int(i)] for i in lanes)]
        return GreedyPolicy([int(inputs.sum())] + self.sizes[1:], layers)


@dataclass
class TrainResult:
    policy: GreedyPolicy
    env: VecCoordinatorEnv  # holds per-episode stats and (optionally) the step record
    epsilon: np.ndarray  # [L, episodes]: epsilon at each episode's last step
    updates: np.ndarray  # [L]: gradient steps taken
    steps: np.ndarray  # [L]: environment steps taken
    checkpoints: dict[int, list] = field(default_factory=dict)  # episode -> per lane layers at that episode


def train_batched(
    env: VecCoordinatorEnv,
    p: DqnParams,
    device: torch.device | str = "cpu",
    progress: Callable[[int], None] | None = None,
    max_steps: int | None = None,
    trace: list | None = None,
    lane_inputs: np.ndarray | None = None,
    checkpoints: tuple[int, ...] = (),
) -> TrainResult:
    """Train one DQN per lane of `env` (lane seeds = env.seeds) until every lane has played
    env.episodes episodes (or `max_steps` iterations). `trace`, if given, collects (actions, Q of
    the acting observation) per iteration, for the equivalence test. `lane_inputs` (bool [L, obs_dim]):
    the inputs each lane's network has (the env must give the others as zeros). `checkpoints`:
    episode counts at which each lane's weights are also kept (after that iteration's update)."""
    device = torch.device(device) if isinstance(device, str) else device
    L, A, D = env.L, env.actions.n, env.obs_dim
    seeds = [int(s) for s in env.seeds]
    net = EnsembleQ(layer_sizes(D, A, p), seeds, device, lane_inputs)
    target = [w.detach().clone() for w in net.params]
    opt = make_adam(net.params, p.learning_rate)
    explore = LaneUniforms([lane_rng(s, EXPLORE_STREAM) for s in seeds], 2)
    replay_u = LaneUniforms([lane_rng(s, REPLAY_STREAM) for s in seeds], p.batch_size)
    cap = min(p.buffer_size, env.episodes * env.P * env.K)
    replay = ReplayBuffer(L, cap, D)
    final: list[list[tuple[torch.Tensor, torch.Tensor]] | None] = [None] * L
    eps_log = np.zeros((L, env.episodes), dtype=np.float32)
    updates = 0
    t = 0  # environment steps of every still-active lane
    live = np.arange(L)  # the lanes the tensors hold: finished lanes are compacted out
    saved: dict[int, list] = {}
    greedy = np.zeros(L, dtype=np.int64)
    obs = env.reset()
    while env.active.any() and (max_steps is None or t < max_steps):
        eps = epsilon_at(updates, p)
        with torch.no_grad():
            q = net.forward(net.params, torch.from_numpy(obs[live]).to(device)[:, None, :])[:, 0, :]
            greedy[live] = q.argmax(dim=1).cpu().numpy()
        u = explore.next()
        actions = np.where(u[:, 0] < eps, np.minimum((u[:, 1] * A).astype(np.int64), A - 1), greedy)
        if trace is not None:
            q_all = np.full((L, A), np.nan, dtype=np.float32)
            q_all[live] = q.cpu().numpy()
            trace.append((actions.copy(), q_all))
        was_active = env.active.copy()
        episode_before = env.episode.copy()
        next_obs, reward, done, terminal_obs, stepped = env.step(actions, epsilon=eps)
        replay.add(t % cap, obs, terminal_obs, actions, reward, done)
        ended = np.flatnonzero(done)
        if len(ended):
            eps_log[ended, episode_before[ended]] = eps
        obs = next_obs
        t += 1
        if t > p.learning_starts and t % p.train_frequency == 0:
            filled = min(t, cap)
            idx = np.minimum((replay_u.next() * filled).astype(np.int64), filled - 1)[live]  # every lane draws
            o, o2, a, r, d = (torch.from_numpy(x).to(device) for x in replay.sample(live, idx))
            with torch.no_grad():
                y = r + p.gamma * net.forward(target, o2).max(dim=2).values * (1.0 - d)
            q_sa = net.forward_taken(net.params, o, a)
            loss = ((q_sa - y) ** 2).mean(dim=1).sum()  # every live lane was active this step
            opt.zero_grad()
            loss.backward()
            opt.step()
            updates += 1
            if updates % p.target_sync == 0:
                with torch.no_grad():
                    for tw, w in zip(target, net.params, strict=True):
                        tw.copy_(w)
        if len(ended) and checkpoints:
            for lane in ended[np.isin(env.episode[ended], checkpoints)]:
                saved.setdefault(int(env.episode[lane]), [None] * L)[lane] = net.lane_layers(int(np.searchsorted(live, lane)))
        newly_finished = was_active & ~env.active
        if newly_finished.any():
            for pos in np.flatnonzero(newly_finished[live]):
                final[live[pos]] = net.lane_layers(int(pos))
            keep = np.flatnonzero(env.active[live])
            if len(keep):
                target = [w[torch.from_numpy(keep)].clone() for w in target]
                opt = net.compact(keep, opt, p.learning_rate)
            live = live[keep]
        if progress is not None:
            progress(int(env.episode.min()))
    for pos, lane in enumerate(live):  # stopped by max_steps
        if final[lane] is None:
            final[lane] = net.lane_layers(pos)
    steps = env.total_steps.copy()
    lane_updates = np.maximum(0, steps // p.train_frequency - p.learning_starts // p.train_frequency)
    return TrainResult(GreedyPolicy(net.sizes, final), env, eps_log, lane_updates, steps,
                       {k: v for k, v in saved.items() if all(x is not None for x in v)})
