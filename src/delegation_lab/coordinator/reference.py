"""The plain single-seed DQN loop the batched trainer must agree with (CleanRL's dqn.py shape):
one nn.Sequential Q-network, torch.optim.Adam, a numpy replay buffer and a Gymnasium env, one step
at a time. Same algorithm and RNG streams as `dqn.train_batched` for one seed; the benchmark times
20 of these one after another against one batched run of 20 seeds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from delegation_lab.coordinator.dqn import EXPLORE_STREAM, REPLAY_STREAM, epsilon_at, init_layers, layer_sizes
from delegation_lab.coordinator.envs import _SingleLaneEnv, lane_rng
from delegation_lab.coordinator.params import DqnParams


def q_network(sizes: list[int], seed: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    for k, (w, b) in enumerate(init_layers(seed, sizes)):
        layer = nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            layer.weight.copy_(w)
            layer.bias.copy_(b)
        mods.append(layer)
        if k < len(sizes) - 2:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


@dataclass
class ReferenceResult:
    q: nn.Sequential
    returns: list[float]
    actions: list[int]
    q_values: list[np.ndarray]
    steps: int
    updates: int


def train_reference(env: _SingleLaneEnv, seed: int, p: DqnParams, episodes: int, max_steps: int | None = None,
                    keep_trace: bool = False) -> ReferenceResult:
    obs_dim = env.observation_space.shape[0]
    n_actions = int(env.action_space.n)
    q = q_network(layer_sizes(obs_dim, n_actions, p), seed)
    target = copy.deepcopy(q)
    opt = torch.optim.Adam(q.parameters(), lr=p.learning_rate)
    explore = lane_rng(seed, EXPLORE_STREAM)
    replay = lane_rng(seed, REPLAY_STREAM)
    cap = min(p.buffer_size, episodes * env.config.packet_size * env.config.max_attempts)
    b_obs = np.zeros((cap, obs_dim), dtype=np.float32)
    b_next = np.zeros((cap, obs_dim), dtype=np.float32)
    b_act = np.zeros(cap, dtype=np.int64)
    b_rew = np.zeros(cap, dtype=np.float32)
    b_done = np.zeros(cap, dtype=np.float32)
    obs, _ = env.reset(seed=seed)
    returns, ep_return = [], 0.0
    actions, q_trace = [], []
    t = updates = done_episodes = 0
    while done_episodes < episodes and (max_steps is None or t < max_steps):
        eps = epsilon_at(updates, p)
        u = explore.random(2)
        with torch.no_grad():
            q_obs = q(torch.from_numpy(obs)[None])[0]
        action = min(int(u[1] * n_actions), n_actions - 1) if u[0] < eps else int(q_obs.argmax())
        if keep_trace:
            actions.append(action)
            q_trace.append(q_obs.numpy().copy())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        slot = t % cap
        b_obs[slot], b_next[slot], b_act[slot], b_rew[slot], b_done[slot] = obs, next_obs, action, reward, terminated
        ep_return += reward
        obs = next_obs
        if terminated or truncated:
            returns.append(ep_return)
            ep_return = 0.0
            done_episodes += 1
            if done_episodes < episodes:
                obs, _ = env.reset()
        t += 1
        if t > p.learning_starts and t % p.train_frequency == 0:
            filled = min(t, cap)
            idx = np.minimum((replay.random(p.batch_size) * filled).astype(np.int64), filled - 1)
            o, o2 = torch.from_numpy(b_obs[idx]), torch.from_numpy(b_next[idx])
            a, r, d = torch.from_numpy(b_act[idx]), torch.from_numpy(b_rew[idx]), torch.from_numpy(b_done[idx])
            with torch.no_grad():
                y = r + p.gamma * target(o2).max(dim=1).values * (1.0 - d)
            q_sa = q(o).gather(1, a[:, None])[:, 0]
            loss = ((q_sa - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            updates += 1
            if updates % p.target_sync == 0:
                target.load_state_dict(q.state_dict())
    return ReferenceResult(q, returns, actions, q_trace, t, updates)
