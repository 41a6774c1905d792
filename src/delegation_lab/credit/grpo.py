"""SHARP optimisation (§4.2-4.4, Appendix A/C): rollouts in groups of G per question, the
decomposed reward, agent-specific advantage normalisation and clipped policy updates, for every
seed at once.

Reward of agent i in a rollout (sharp family):

    r_i = alpha * R_global + beta * phi_i + gamma * R_tool_i

R_global = 1 if the question is answered right (broadcast to every agent); phi_i = the agent's
Shapley credit in the rollout's coalition game (`env.TeamGame`), given to a fraction p of the agent
invocations (the others get 0 and cost no counterfactuals, Appendix D); R_tool_i = the share of
the agent's tool calls that were valid (the planner: of the calls it delegated; 1 without calls).

Advantages: per question (group of G rollouts) and per agent role, A_i = (r_i - mean) / (std + delta)
over that role's rewards in the group ("each agent's mean and standard deviation across sampled
trajectories"); the planner's advantage applies to each of its per-hop decisions, a worker's to
its tool choice. `broadcast` (MATPO-like) gives every agent R_global and the trajectory-level
advantage (r - mean_G) / (std_G + delta); `single` is GRPO on alpha * R_global + gamma * R_tool.

Update: the clipped surrogate min(rho A, clip(rho, 1 - eps, 1 + eps) A) averaged over every
decision of the batch, `epochs_per_batch` Adam steps per batch (rho = 1 on the first).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from delegation_lab.credit.env import (
    N_ACTIONS,
    Draws,
    TaskPool,
    TeamGame,
    TeamRollouts,
    ToolTable,
    make_draws,
    planner_features,
    single_features,
    single_rollouts,
    team_rollouts,
    worker_features,
)
from delegation_lab.credit.params import BASE_METHODS, CreditParams, p_method
from delegation_lab.credit.policy import EnsemblePolicy, greedy, masked_log_probs, sample
from delegation_lab.credit.shapley import shapley

ENV_STREAM, ACTION_STREAM, CREDIT_STREAM = 1, 2, 3


@dataclass(frozen=True)
class MethodSpec:
    name: str
    team: bool  # planner + workers (False: one agent)
    reward: Literal["broadcast", "sharp", "single"]
    p_planner: float  # chance the planner's invocation gets Shapley credit
    p_worker: float  # chance a worker's invocation does

    @property
    def uses_credit(self) -> bool:
        return self.p_planner > 0 or self.p_worker > 0


def method_spec(name: str, params: CreditParams) -> MethodSpec:
    fixed = {
        "single": MethodSpec("single", False, "single", 0.0, 0.0),
        "broadcast": MethodSpec("broadcast", True, "broadcast", 0.0, 0.0),
        "no_shapley": MethodSpec("no_shapley", True, "sharp", 0.0, 0.0),
        "planner_only": MethodSpec("planner_only", True, "sharp", 1.0, 0.0),
        "worker_only": MethodSpec("worker_only", True, "sharp", 0.0, 1.0),
        "sharp": MethodSpec("sharp", True, "sharp", 1.0, 1.0),
    }
    if name in fixed:
        return fixed[name]
    for p in params.p_sweep:
        if name == p_method(p):
            return MethodSpec(name, True, "sharp", p, p)
    raise ValueError(f"unknown method {name!r}; known: {list(BASE_METHODS)} and sharp_p<p> for p in p_sweep")


def method_p(spec: MethodSpec) -> float | None:
    """The method's place on the p axis (None when it is not a sharp-family method with one p)."""
    if spec.reward != "sharp" or spec.p_planner != spec.p_worker:
        return None
    return spec.p_planner


# -------------------------------------------------------------------------------------- batches


@dataclass
class Decisions:
    """One role's decisions of a batch, in the network's layout [S, N, ...]."""

    features: torch.Tensor  # [S, N, F]
    allowed: torch.Tensor  # bool [S, N, A]
    actions: torch.Tensor  # long [S, N]
    mask: torch.Tensor  # float [S, N]: 1 for real decisions
    old_log_prob: torch.Tensor | None = None
    advantage: torch.Tensor | None = None
    ref_log_prob: torch.Tensor | None = None  # log pi_ref over the actions (for the KL term)


@dataclass
class Batch:
    """What one rollout batch leaves behind for the update, the curves and the trajectories."""

    task: np.ndarray  # [S, B, G]
    correct: np.ndarray  # bool [S, B*G]
    tokens: np.ndarray  # [S, B*G]
    tool_calls: np.ndarray  # [S, B*G]
    subagents: np.ndarray  # [S, B*G]
    reward: np.ndarray  # [S, B*G]: mean agent reward of each rollout
    decisions: list[Decisions]
    coalitions: np.ndarray  # [S]: coalition values evaluated for credit
    credit_seconds: float
    team: TeamRollouts | None = None
    credit: np.ndarray | None = None  # [L, slots] given credit (0 where not selected)
    agent_reward: np.ndarray | None = None  # [L, slots]
    tool_reward: np.ndarray | None = None  # [L, slots]
    single: object | None = None


def allowed_actions(n: int, S: int, N: int, device: torch.device) -> torch.Tensor:
    allowed = torch.zeros(S, N, N_ACTIONS, dtype=torch.bool, device=device)
    allowed[..., :n] = True
    return allowed


def _to(x: np.ndarray, device: torch.device, dtype=torch.float32) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(x), dtype=dtype, device=device)


def group_normalise(r: np.ndarray, mask: np.ndarray, delta: float) -> np.ndarray:
    """(r - mean) / (std + delta) within each group: r, mask [S, B, ...]; statistics over all but S, B."""
    axes = tuple(range(2, r.ndim))
    n = np.maximum(mask.sum(axis=axes, keepdims=True), 1)
    mean = (r * mask).sum(axis=axes, keepdims=True) / n
    std = np.sqrt((((r - mean) * mask) ** 2).sum(axis=axes, keepdims=True) / n)
    return np.where(mask, (r - mean) / (std + delta), 0.0)


class Trainer:
    """Trains one method for every seed at once."""

    def __init__(self, spec: MethodSpec, params: CreditParams, pool: TaskPool, seeds: list[int],
                 device: torch.device):
        self.spec, self.p, self.pool, self.seeds, self.device = spec, params, pool, seeds, device
        self.env = params.env
        self.tools = ToolTable.of(params.env)
        self.K = params.env.max_workers_per_hop
        self.H = pool.max_hops
        self.policy = EnsemblePolicy(seeds, params.hidden).to(device)
        self.reference = EnsemblePolicy(seeds, params.hidden).to(device)  # pi_ref: the initial policy (frozen)
        self.reference.load_state_dict(self.policy.state_dict())
        self.reference.requires_grad_(False)
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=params.learning_rate)
        self.env_rngs = [np.random.default_rng([s, ENV_STREAM]) for s in seeds]
        self.act_rngs = [np.random.default_rng([s, ACTION_STREAM]) for s in seeds]
        self.credit_rngs = [np.random.default_rng([s, CREDIT_STREAM]) for s in seeds]

    @property
    def S(self) -> int:
        return len(self.seeds)

    # ------------------------------------------------------------------------------- acting

    def log_probs(self, features: np.ndarray, n_allowed: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """features [S, N, F] -> (features tensor, allowed, log pi as numpy [S, N, A])."""
        x = _to(features, self.device)
        allowed = allowed_actions(n_allowed, x.shape[0], x.shape[1], self.device)
        with torch.no_grad():
            lp = masked_log_probs(self.policy(x), allowed)
        return x, allowed, lp.cpu().numpy()

    def act(self, features: np.ndarray, n_allowed: int, how: str | np.ndarray) -> tuple[np.ndarray, Decisions]:
        """Actions [S, N] for features [S, N, F]: `sample` from each seed's stream, `greedy`, or sampled
        with the given uniforms [S, N] (the evaluation's fixed draws)."""
        x, allowed, lp = self.log_probs(features, n_allowed)
        if isinstance(how, np.ndarray):
            actions = sample(lp, how)
        elif how == "greedy":
            actions = greedy(lp)
        else:
            u = np.stack([rng.random(features.shape[1]) for rng in self.act_rngs])
            actions = sample(lp, u)
        a = torch.as_tensor(actions, dtype=torch.long, device=self.device)
        old = torch.as_tensor(np.take_along_axis(lp, actions[..., None], axis=-1)[..., 0], device=self.device)
        return actions, Decisions(x, allowed, a, torch.ones_like(old), old)

    # ------------------------------------------------------------------------------ rollouts

    def team_step(self, pool: TaskPool, task: np.ndarray, draws: Draws, how: str | Draws
                  ) -> tuple[TeamRollouts, Decisions, Decisions]:
        """task [S, L] (per seed L rollouts) -> the flattened rollouts [S*L] and both roles' decisions.
        `how`: sample | greedy, or Draws whose `recall` / `outcome` fields are the planner's / workers'
        action uniforms (evaluation)."""
        S, L = task.shape
        H, K = self.H, self.K
        flat = task.reshape(-1)
        how_p = how.recall.reshape(S, L * H) if isinstance(how, Draws) else how
        how_w = how.outcome.reshape(S, L * H * K) if isinstance(how, Draws) else how
        n_workers, planner = self.act(planner_features(pool, flat).reshape(S, L * H, -1), K + 1, how_p)
        n_workers = n_workers.reshape(S * L, H)
        tool, worker = self.act(worker_features(pool, flat, n_workers, K).reshape(S, L * H * K, -1), N_ACTIONS, how_w)
        roll = team_rollouts(self.env, self.tools, pool, flat, n_workers, tool.reshape(S * L, H, K), draws)
        planner.mask = _to(roll.hop_present.reshape(S, L * H), self.device)
        worker.mask = _to(roll.worker_present.reshape(S, L * H * K), self.device)
        return roll, planner, worker

    def single_step(self, pool: TaskPool, task: np.ndarray, draws: Draws, how: str | Draws):
        S, L = task.shape
        flat = task.reshape(-1)
        how_s = how.recall.reshape(S, L * self.H) if isinstance(how, Draws) else how
        tool, dec = self.act(single_features(pool, flat).reshape(S, L * self.H, -1), N_ACTIONS, how_s)
        roll = single_rollouts(self.env, self.tools, pool, flat, tool.reshape(S * L, self.H), draws)
        dec.mask = _to(roll.hop_present.reshape(S, L * self.H), self.device)
        return roll, dec

    def draws(self, shape: tuple[int, ...]) -> Draws:
        """Per seed its own draws of `shape` rollouts, stacked and flattened seed-major."""
        per = [make_draws(rng, shape, self.H, self.K) for rng in self.env_rngs]
        return Draws(*(np.concatenate([getattr(d, f).reshape(-1, *getattr(d, f).shape[len(shape):]) for d in per])
                       for f in ("recall", "outcome", "validity")))

    # ------------------------------------------------------------------------------- rewards

    def collect(self) -> Batch:
        p, S, G, B = self.p, self.S, self.p.group_size, self.p.tasks_per_batch
        task = np.stack([rng.integers(0, self.pool.n, B) for rng in self.env_rngs])  # [S, B]
        task = np.repeat(task[:, :, None], G, axis=2)  # [S, B, G]
        draws = self.draws((B, G))
        if not self.spec.team:
            return self._single_batch(task, draws)
        roll, planner, worker = self.team_step(self.pool, task.reshape(S, B * G), draws, "sample")
        L, H, K = roll.L, self.H, self.K
        game = TeamGame(roll, p.token_cost)
        correct, tokens = game.full()
        calls = roll.tool_calls()
        credit = np.zeros((L, 1 + H * K))
        coalitions = np.zeros(S)
        t0 = time.perf_counter()
        if self.spec.uses_credit:
            sel_p = np.concatenate([rng.random(B * G) < self.spec.p_planner for rng in self.credit_rngs])
            sel_w = np.concatenate([rng.random((B * G, H, K)) < self.spec.p_worker for rng in self.credit_rngs])
            sel = np.concatenate([sel_p[:, None], sel_w.reshape(L, H * K)], axis=1) & game.present
            need = np.flatnonzero(sel.any(axis=1))
            if need.size:
                res = shapley(game, "exact" if p.credit_estimator == "exact" else "leave_one_out", rows=need)
                credit = np.where(sel, res.credit, 0.0)
                n = game.present[need].sum(axis=1)
                cost = 2.0**n if p.credit_estimator == "exact" else n + 2.0
                coalitions = np.bincount(need // (B * G), weights=cost, minlength=S)
        seconds = time.perf_counter() - t0
        global_r = correct.astype(np.float64)
        valid_w = np.where(calls, roll.valid, True).astype(np.float64)  # [L, H, K]
        n_calls = calls.sum(axis=(1, 2))
        valid_p = np.where(n_calls > 0, (roll.valid & calls).sum(axis=(1, 2)) / np.maximum(n_calls, 1), 1.0)
        tool_r = np.concatenate([valid_p[:, None], valid_w.reshape(L, H * K)], axis=1)
        present = game.present
        if self.spec.reward == "broadcast":
            agent_r = np.where(present, p.alpha * global_r[:, None], 0.0)
            adv = group_normalise(global_r.reshape(S, B, G), np.ones((S, B, G), dtype=bool), p.adv_delta)
            adv_p = adv.reshape(L)
            adv_w = np.repeat(adv_p[:, None], H * K, axis=1)
        else:
            agent_r = np.where(present, p.alpha * global_r[:, None] + p.beta * credit + p.gamma * tool_r, 0.0)
            adv_p = group_normalise(agent_r[:, 0].reshape(S, B, G), np.ones((S, B, G), dtype=bool), p.adv_delta).reshape(L)
            adv_w = group_normalise(agent_r[:, 1:].reshape(S, B, G, H * K), present[:, 1:].reshape(S, B, G, H * K),
                                    p.adv_delta).reshape(L, H * K)
        planner.advantage = _to(np.repeat(adv_p[:, None], H, axis=1).reshape(S, -1), self.device)
        worker.advantage = _to(adv_w.reshape(S, -1), self.device)
        mean_r = (agent_r * present).sum(axis=1) / present.sum(axis=1)
        return Batch(task, correct.reshape(S, -1), tokens.reshape(S, -1), calls.sum(axis=(1, 2)).reshape(S, -1),
                     roll.worker_present.sum(axis=(1, 2)).reshape(S, -1), mean_r.reshape(S, -1),
                     [planner, worker], coalitions, seconds, roll, credit, agent_r, tool_r)

    def _single_batch(self, task: np.ndarray, draws: Draws) -> Batch:
        p, S = self.p, self.S
        B, G = task.shape[1], task.shape[2]
        roll, dec = self.single_step(self.pool, task.reshape(S, B * G), draws, "sample")
        calls = roll.tool_calls()
        n_calls = calls.sum(axis=1)
        tool_r = np.where(n_calls > 0, (roll.valid & calls).sum(axis=1) / np.maximum(n_calls, 1), 1.0)
        r = p.alpha * roll.correct + p.gamma * tool_r
        adv = group_normalise(r.reshape(S, B, G), np.ones((S, B, G), dtype=bool), p.adv_delta).reshape(-1)
        dec.advantage = _to(np.repeat(adv[:, None], self.H, axis=1).reshape(S, -1), self.device)
        return Batch(task, roll.correct.reshape(S, -1), roll.tokens.reshape(S, -1), n_calls.reshape(S, -1),
                     np.zeros((S, B * G)), r.reshape(S, -1), [dec], np.zeros(S), 0.0, single=roll)

    # -------------------------------------------------------------------------------- update

    def update(self, batch: Batch) -> float:
        eps = self.p.clip_epsilon
        loss_value = 0.0
        for _ in range(self.p.epochs_per_batch):
            num = torch.zeros(self.S, device=self.device)
            den = torch.zeros(self.S, device=self.device)
            for d in batch.decisions:
                lp = masked_log_probs(self.policy(d.features), d.allowed)
                new = lp.gather(-1, d.actions[..., None])[..., 0]
                ratio = torch.exp(new - d.old_log_prob)
                surr = torch.minimum(ratio * d.advantage, torch.clamp(ratio, 1 - eps, 1 + eps) * d.advantage)
                if self.p.kl_coef:
                    if d.ref_log_prob is None:
                        with torch.no_grad():
                            d.ref_log_prob = masked_log_probs(self.reference(d.features), d.allowed)
                    zero = torch.zeros_like(lp)
                    log_ratio = torch.where(d.allowed, lp, zero) - torch.where(d.allowed, d.ref_log_prob, zero)
                    kl = (lp.exp() * log_ratio).sum(-1)
                    surr = surr - self.p.kl_coef * kl
                num = num + (surr * d.mask).sum(dim=1)
                den = den + d.mask.sum(dim=1)
            loss = -(num / den.clamp(min=1)).sum()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            loss_value = float(loss.detach()) / self.S
        return loss_value


@dataclass
class TrainResult:
    spec: MethodSpec
    seeds: list[int]
    trainer: Trainer
    curves: dict[str, np.ndarray]  # [S, iterations]
    eval_iterations: list[int]
    eval_accuracy: np.ndarray  # [S, checkpoints]
    seconds: float
    train_samples: list[tuple[int, Batch]] = field(default_factory=list)  # (iteration, batch) kept for trajectories


def train(spec: MethodSpec, params: CreditParams, pool: TaskPool, seeds: list[int], device: torch.device,
          evaluate_accuracy: Callable[[Trainer], np.ndarray] | None = None,
          progress: Callable[[int], None] | None = None) -> TrainResult:
    """Train `spec` for `params.iterations` batches with every seed at once."""
    t0 = time.perf_counter()
    trainer = Trainer(spec, params, pool, seeds, device)
    I, S = params.iterations, len(seeds)
    names = ("accuracy", "tokens", "tool_calls", "subagents", "reward", "loss", "coalitions", "credit_seconds",
             "batch_seconds")
    curves = {k: np.zeros((S, I)) for k in names}
    eval_iters: list[int] = []
    eval_acc: list[np.ndarray] = []
    keep: list[tuple[int, Batch]] = []
    every = params.trajectories.train_every
    for it in range(I):
        if evaluate_accuracy is not None and it % params.eval_every == 0:
            eval_iters.append(it)
            eval_acc.append(evaluate_accuracy(trainer))
        t_batch = time.perf_counter()
        batch = trainer.collect()
        loss = trainer.update(batch)
        curves["batch_seconds"][:, it] = time.perf_counter() - t_batch
        curves["accuracy"][:, it] = batch.correct.mean(axis=1)
        curves["tokens"][:, it] = batch.tokens.mean(axis=1)
        curves["tool_calls"][:, it] = batch.tool_calls.mean(axis=1)
        curves["subagents"][:, it] = batch.subagents.mean(axis=1)
        curves["reward"][:, it] = batch.reward.mean(axis=1)
        curves["loss"][:, it] = loss
        curves["coalitions"][:, it] = batch.coalitions
        curves["credit_seconds"][:, it] = batch.credit_seconds / S
        if every and it % every == 0:
            batch.decisions = []  # the tensors are not needed for trajectories
            keep.append((it, batch))
        if progress is not None:
            progress(it + 1)
    if evaluate_accuracy is not None:
        eval_iters.append(I)
        eval_acc.append(evaluate_accuracy(trainer))
    acc = np.stack(eval_acc, axis=1) if eval_acc else np.zeros((S, 0))
    return TrainResult(spec, seeds, trainer, curves, eval_iters, acc, time.perf_counter() - t0, keep)
