"""SHARP optimisation (§4.2-4.4, Appendix A/C): rollouts in groups of G per question, the
decomposed reward, agent-specific advantage normalisation and clipped policy updates, for every
seed at once.

Reward of agent i in a rollout (sharp family):

    r_i = alpha * R_global + beta * phi_i + gamma * R_tool_i

R_global = 1 if the question is answered right (broadcast to every agent); phi_i = the agent's
Shapley credit in the rollout's coalition game (`env.TeamGame`), given to a fraction p of the agent
invocations (the others get 0 and cost no counterfactuals, Appendix D); R_tool_i = the share of
the agent's tool calls that were valid (the planner: of the calls it delegated; 1 without calls).

Advantages: per agent, A_i = (r_i - mean_i) / (std_i + delta) over agent i's rewards in the
mini-batch's rollouts in which it acts (§4.4 "each agent's mean and standard deviation across
sampled trajectories", Appendix C "estimated across each mini-batch"; an agent = the planner, or
worker r of hop h). `advantage_normalisation: agent_group` takes each agent's statistics within its
question's group of G instead, `role` within the group with the workers pooled; the controls
`sharp_role_norm` / `sharp_team_norm` keep SHARP's reward and pool per role / every agent of the
group (only the normalisation differs). The planner's advantage applies to each
of its per-hop decisions, a worker's to its tool choice. `broadcast` (MATPO-like) gives every agent R_global and the trajectory-level
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
    worker_variant_features,
    worker_variant_index,
    worker_variants,
)
from delegation_lab.credit.params import BASE_METHODS, CreditParams, p_method
from delegation_lab.credit.policy import EnsemblePolicy, greedy, masked_log_probs, sample
from delegation_lab.credit.shapley import shapley
from delegation_lab.credit.team_shapley import team_shapley

ENV_STREAM, ACTION_STREAM, CREDIT_STREAM = 1, 2, 3


@dataclass(frozen=True)
class MethodSpec:
    name: str
    team: bool  # planner + workers (False: one agent)
    reward: Literal["broadcast", "sharp", "single"]
    p_planner: float  # chance the planner's invocation gets Shapley credit
    p_worker: float  # chance a worker's invocation does
    estimator: Literal["exact", "leave_one_out"] = "exact"  # how the credit is computed
    normalisation: Literal["agent", "agent_group", "role", "team"] = "agent"  # whose rewards share advantage statistics

    @property
    def uses_credit(self) -> bool:
        return self.p_planner > 0 or self.p_worker > 0


def method_spec(name: str, params: CreditParams) -> MethodSpec:
    est, norm = params.credit_estimator, params.advantage_normalisation
    fixed = {
        "single": MethodSpec("single", False, "single", 0.0, 0.0),
        "broadcast": MethodSpec("broadcast", True, "broadcast", 0.0, 0.0),
        "no_shapley": MethodSpec("no_shapley", True, "sharp", 0.0, 0.0, est, norm),
        "planner_only": MethodSpec("planner_only", True, "sharp", 1.0, 0.0, est, norm),
        "worker_only": MethodSpec("worker_only", True, "sharp", 0.0, 1.0, est, norm),
        "sharp": MethodSpec("sharp", True, "sharp", 1.0, 1.0, est, norm),
        "sharp_loo": MethodSpec("sharp_loo", True, "sharp", 1.0, 1.0, "leave_one_out", norm),
        "sharp_role_norm": MethodSpec("sharp_role_norm", True, "sharp", 1.0, 1.0, est, "role"),
        "sharp_team_norm": MethodSpec("sharp_team_norm", True, "sharp", 1.0, 1.0, est, "team"),
    }
    if name in fixed:
        return fixed[name]
    for p in params.p_sweep:
        if name == p_method(p):
            return MethodSpec(name, True, "sharp", p, p, est, norm)
    raise ValueError(f"unknown method {name!r}; known: {list(BASE_METHODS)} and sharp_p<p> for p in p_sweep")


def method_p(spec: MethodSpec) -> float | None:
    """The method's place on the p axis (None when it is not a sharp-family method with one p, or a
    variant of SHARP's estimator or normalisation)."""
    if spec.reward != "sharp" or spec.p_planner != spec.p_worker or spec.name in VARIANTS:
        return None
    return spec.p_planner


VARIANTS = ("sharp_loo", "sharp_role_norm", "sharp_team_norm")  # SHARP with one ingredient changed


# -------------------------------------------------------------------------------------- batches


@dataclass
class Decisions:
    """One role's decisions of a batch, in the network's layout [S, N, ...]."""

    features: torch.Tensor  # [S, U, F] of the distinct decisions
    allowed: torch.Tensor  # bool [S, U, A]
    actions: torch.Tensor  # long [S, N]
    mask: torch.Tensor  # float [S, N]: 1 for real decisions
    old_log_prob: torch.Tensor | None = None
    advantage: torch.Tensor | None = None
    ref_log_prob: torch.Tensor | None = None  # log pi_ref [S, U, A] of the distinct decisions (for the KL term)
    index: torch.Tensor | None = None  # long [S, N]: decision n's row of `features` (distinct decisions only)
    first_log_prob: torch.Tensor | None = None  # log pi [S, U, A] with its graph, from the rollout (training)

    def per_decision(self, log_probs: torch.Tensor) -> torch.Tensor:
        """log pi [S, U, A] of the distinct decisions -> [S, N, A] of every decision."""
        if self.index is None:
            return log_probs
        return torch.gather(log_probs, 1, self.index[..., None].expand(-1, -1, log_probs.shape[-1]))


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
    credit_seconds: np.ndarray  # [S]: seconds spent on the member's credit
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


def _per_hop_index(L: int, H: int, repeat: int, S: int) -> np.ndarray:
    """int [S, L * H]: for rollout l's hop h, the row (l // repeat) * H + h of the per-question decisions."""
    index = ((np.arange(L) // repeat)[:, None] * H + np.arange(H)[None, :]).reshape(-1)
    return np.broadcast_to(index, (S, L * H))


def group_normalise(r: np.ndarray, mask: np.ndarray, delta: float) -> np.ndarray:
    """(r - mean) / (std + delta) within each group: r, mask [S, B, ...]; statistics over all but S, B."""
    axes = tuple(range(2, r.ndim))
    n = np.maximum(mask.sum(axis=axes, keepdims=True), 1)
    mean = (r * mask).sum(axis=axes, keepdims=True) / n
    std = np.sqrt((((r - mean) * mask) ** 2).sum(axis=axes, keepdims=True) / n)
    return np.where(mask, (r - mean) / (std + delta), 0.0)


def agent_advantages(agent_r: np.ndarray, present: np.ndarray, S: int, B: int, G: int,
                     normalisation: str, delta: float) -> np.ndarray:
    """Advantages [L, slots] of the agents' rewards [L = S*B*G, slots]: `agent` (the paper's): each agent
    slot (the planner; worker r of hop h) over the mini-batch's rollouts in which it acts; `agent_group`:
    the same within each question's group of G; `role`: within the group, the planner apart and the
    workers pooled; `team`: within the group, every agent pooled."""
    L, n = agent_r.shape
    r = agent_r.reshape(S, B, G, n)
    m = present.reshape(S, B, G, n)
    if normalisation == "agent":  # each agent's statistics over the whole mini-batch (Appendix C)
        adv = group_normalise(r.transpose(0, 3, 1, 2).reshape(S, n, B * G), m.transpose(0, 3, 1, 2).reshape(S, n, B * G),
                              delta).reshape(S, n, B, G).transpose(0, 2, 3, 1)
    elif normalisation == "agent_group":
        adv = group_normalise(r.transpose(0, 1, 3, 2).reshape(S, B * n, G), m.transpose(0, 1, 3, 2).reshape(S, B * n, G),
                              delta).reshape(S, B, n, G).transpose(0, 1, 3, 2)
    elif normalisation == "role":
        adv = np.concatenate([group_normalise(r[..., :1], m[..., :1], delta),
                              group_normalise(r[..., 1:], m[..., 1:], delta)], axis=-1)
    else:
        adv = group_normalise(r, m, delta)
    return adv.reshape(L, n)


class Trainer:
    """Trains several methods for every seed at once: one network ensemble whose members are
    (method, seed) pairs, method-major. Each seed's questions, tool draws, action uniforms and credit
    selection come from the seed's own streams and are shared by every method (common random numbers,
    as if each method were trained alone), so the methods differ only by their rewards and advantages."""

    def __init__(self, spec: MethodSpec | list[MethodSpec], params: CreditParams, pool: TaskPool, seeds: list[int],
                 device: torch.device):
        self.specs = [spec] if isinstance(spec, MethodSpec) else list(spec)
        if len({s.team for s in self.specs}) != 1:
            raise ValueError("one Trainer trains either team methods or the single agent, not both")
        self.p, self.pool, self.seeds, self.device = params, pool, seeds, device
        self.team = self.specs[0].team
        self.env = params.env
        self.tools = ToolTable.of(params.env)
        self.K = params.env.max_workers_per_hop
        self.H = pool.max_hops
        members = [s for _ in self.specs for s in seeds]
        self.policy = EnsemblePolicy(members, params.hidden).to(device)
        self.reference = EnsemblePolicy(members, params.hidden).to(device)  # pi_ref: the initial policy (frozen)
        self.reference.load_state_dict(self.policy.state_dict())
        self.reference.requires_grad_(False)
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=params.learning_rate)
        self.env_rngs = [np.random.default_rng([s, ENV_STREAM]) for s in seeds]
        self.act_rngs = [np.random.default_rng([s, ACTION_STREAM]) for s in seeds]
        self.credit_rngs = [np.random.default_rng([s, CREDIT_STREAM]) for s in seeds]

    @property
    def spec(self) -> MethodSpec:
        return self.specs[0]

    @property
    def S(self) -> int:
        """Ensemble members (methods x seeds)."""
        return len(self.specs) * len(self.seeds)

    @property
    def M(self) -> int:
        return len(self.specs)

    def _per_member(self, per_seed: np.ndarray) -> np.ndarray:
        """[seeds, ...] -> [methods x seeds, ...]: every method sees its seed's draws."""
        return np.concatenate([per_seed] * self.M) if self.M > 1 else per_seed

    # ------------------------------------------------------------------------------- acting

    def log_probs(self, features: np.ndarray, n_allowed: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        """features [S, U, F] -> (features tensor, allowed, log pi as numpy [S, U, A])."""
        x = _to(features, self.device)
        allowed = allowed_actions(n_allowed, x.shape[0], x.shape[1], self.device)
        with torch.no_grad():
            lp = masked_log_probs(self.policy(x), allowed)
        return x, allowed, lp.cpu().numpy()

    def act(self, features: np.ndarray, index: np.ndarray, n_allowed: int, how: str | np.ndarray
            ) -> tuple[np.ndarray, Decisions]:
        """Actions [S, N] of decisions whose features are `features[s, index[s, n]]` (features [S, U, F]
        of the distinct decisions, so the network runs once per distinct one): `sample` from each seed's
        stream, `greedy`, or sampled with the given uniforms [S, N] (the evaluation's fixed draws)."""
        first = None
        if isinstance(how, str) and how == "sample":  # training: keep the graph, the first update epoch reuses it
            x = _to(features, self.device)
            allowed = allowed_actions(n_allowed, x.shape[0], x.shape[1], self.device)
            first = masked_log_probs(self.policy(x), allowed)
            lp_unique = first.detach().cpu().numpy()
        else:
            x, allowed, lp_unique = self.log_probs(features, n_allowed)
        lp = np.take_along_axis(lp_unique, index[..., None], axis=1)  # [S, N, A]
        if isinstance(how, np.ndarray):
            actions = sample(lp, how)
        elif how == "greedy":
            actions = greedy(lp)
        else:
            u = self._per_member(np.stack([rng.random(index.shape[1]) for rng in self.act_rngs]))
            actions = sample(lp, u)
        a = torch.as_tensor(actions, dtype=torch.long, device=self.device)
        old = torch.as_tensor(np.take_along_axis(lp, actions[..., None], axis=-1)[..., 0], device=self.device)
        idx = torch.as_tensor(np.ascontiguousarray(index), dtype=torch.long, device=self.device)
        return actions, Decisions(x, allowed, a, torch.ones_like(old), old, index=idx, first_log_prob=first)

    # ------------------------------------------------------------------------------ rollouts

    def team_step(self, pool: TaskPool, task: np.ndarray, draws: Draws, how: str | Draws, repeat: int = 1
                  ) -> tuple[TeamRollouts, Decisions, Decisions]:
        """task [S, L] (per seed L rollouts, each question `repeat` times in a row) -> the flattened
        rollouts [S*L] and both roles' decisions. `how`: sample | greedy, or Draws whose `recall` /
        `outcome` fields are the planner's / workers' action uniforms (evaluation)."""
        S, L = task.shape
        H, K = self.H, self.K
        flat = task.reshape(-1)
        unique = task[:, ::repeat]  # [S, U]: the policy sees only the question, so it runs once per question
        U = unique.shape[1]
        how_p = how.recall.reshape(S, L * H) if isinstance(how, Draws) else how
        how_w = how.outcome.reshape(S, L * H * K) if isinstance(how, Draws) else how
        per_hop = _per_hop_index(L, H, repeat, S)
        n_workers, planner = self.act(planner_features(pool, unique.reshape(-1)).reshape(S, U * H, -1), per_hop,
                                      K + 1, how_p)
        n_workers = n_workers.reshape(S * L, H)
        V = len(worker_variants(K))
        if repeat * K > V:  # fewer distinct (question, hop, variant) rows than worker slots
            variant = worker_variant_index(n_workers, K).reshape(S, L, H, K)
            index = (per_hop.reshape(S, L, H)[..., None] * V + variant).reshape(S, L * H * K)
            features = worker_variant_features(pool, unique.reshape(-1), K).reshape(S, U * H * V, -1)
        else:
            index = np.broadcast_to(np.arange(L * H * K), (S, L * H * K))
            features = worker_features(pool, flat, n_workers, K).reshape(S, L * H * K, -1)
        tool, worker = self.act(features, index, N_ACTIONS, how_w)
        roll = team_rollouts(self.env, self.tools, pool, flat, n_workers, tool.reshape(S * L, H, K), draws)
        planner.mask = _to(roll.hop_present.reshape(S, L * H), self.device)
        worker.mask = _to(roll.worker_present.reshape(S, L * H * K), self.device)
        return roll, planner, worker

    def single_step(self, pool: TaskPool, task: np.ndarray, draws: Draws, how: str | Draws, repeat: int = 1):
        S, L = task.shape
        flat = task.reshape(-1)
        unique = task[:, ::repeat]
        how_s = how.recall.reshape(S, L * self.H) if isinstance(how, Draws) else how
        tool, dec = self.act(single_features(pool, unique.reshape(-1)).reshape(S, unique.shape[1] * self.H, -1),
                             _per_hop_index(L, self.H, repeat, S), N_ACTIONS, how_s)
        roll = single_rollouts(self.env, self.tools, pool, flat, tool.reshape(S * L, self.H), draws)
        dec.mask = _to(roll.hop_present.reshape(S, L * self.H), self.device)
        return roll, dec

    def draws(self, shape: tuple[int, ...]) -> Draws:
        """Per seed its own draws of `shape` rollouts, stacked and flattened seed-major, then repeated
        for every method."""
        per = [make_draws(rng, shape, self.H, self.K) for rng in self.env_rngs]
        return Draws(*(np.concatenate([getattr(d, f).reshape(-1, *getattr(d, f).shape[len(shape):]) for d in per] * self.M)
                       for f in ("recall", "outcome", "validity")))

    # ------------------------------------------------------------------------------- rewards

    def collect(self) -> Batch:
        p, S, G, B = self.p, self.S, self.p.group_size, self.p.tasks_per_batch
        task = self._per_member(np.stack([rng.integers(0, self.pool.n, B) for rng in self.env_rngs]))  # [S, B]
        task = np.repeat(task[:, :, None], G, axis=2)  # [S, B, G]
        draws = self.draws((B, G))
        if not self.team:
            return self._single_batch(task, draws)
        roll, planner, worker = self.team_step(self.pool, task.reshape(S, B * G), draws, "sample", repeat=G)
        L, H, K = roll.L, self.H, self.K
        n_seeds, per_method = len(self.seeds), len(self.seeds) * B * G
        game = TeamGame(roll, p.token_cost)
        correct, tokens = game.full()
        calls = roll.tool_calls()
        present = game.present
        global_r = correct.astype(np.float64)
        valid_w = np.where(calls, roll.valid, True).astype(np.float64)  # [L, H, K]
        n_calls = calls.sum(axis=(1, 2))
        valid_p = np.where(n_calls > 0, (roll.valid & calls).sum(axis=(1, 2)) / np.maximum(n_calls, 1), 1.0)
        tool_r = np.concatenate([valid_p[:, None], valid_w.reshape(L, H * K)], axis=1)
        credit = np.zeros((L, 1 + H * K))
        agent_r = np.zeros_like(credit)
        adv = np.zeros_like(credit)
        coalitions = np.zeros(S)
        seconds = np.zeros(S)
        if any(spec.uses_credit for spec in self.specs):  # the seed's uniforms, compared with each method's p
            u_p = np.concatenate([rng.random(B * G) for rng in self.credit_rngs])
            u_w = np.concatenate([rng.random((B * G, H, K)) for rng in self.credit_rngs]).reshape(-1, H * K)
        # which invocations each method credits; then one credit pass per estimator over every method's rows
        selected: dict[int, np.ndarray] = {}
        need = {"exact": [], "leave_one_out": []}
        for j, spec in enumerate(self.specs):
            if spec.uses_credit:
                rows = slice(j * per_method, (j + 1) * per_method)
                sel = np.concatenate([(u_p < spec.p_planner)[:, None], u_w < spec.p_worker], axis=1) & present[rows]
                selected[j] = sel
                need[spec.estimator].append(np.flatnonzero(sel.any(axis=1)) + j * per_method)
        full = np.zeros((L, 1 + H * K))
        pass_seconds = {}
        for estimator, parts in need.items():
            t0 = time.perf_counter()
            rows_needed = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            if rows_needed.size and estimator == "exact":
                full[rows_needed] = team_shapley(game, rows_needed)
            elif rows_needed.size:
                full[rows_needed] = shapley(game, "leave_one_out", rows=rows_needed).credit[rows_needed]
            pass_seconds[estimator] = (time.perf_counter() - t0) / max(rows_needed.size, 1)  # per credited rollout
        for j, spec in enumerate(self.specs):
            rows = slice(j * per_method, (j + 1) * per_method)
            members = slice(j * n_seeds, (j + 1) * n_seeds)
            if j in selected:
                sel = selected[j]
                credit[rows] = np.where(sel, full[rows], 0.0)
                credited = np.flatnonzero(sel.any(axis=1))
                n = present[rows][credited].sum(axis=1)
                cost = 2.0**n if spec.estimator == "exact" else n + 2.0  # coalitions the estimator covers
                coalitions[members] = np.bincount(credited // (B * G), weights=cost, minlength=n_seeds)
                seconds[members] = pass_seconds[spec.estimator] * credited.size / n_seeds
            if spec.reward == "broadcast":
                agent_r[rows] = np.where(present[rows], p.alpha * global_r[rows, None], 0.0)
                a = group_normalise(global_r[rows].reshape(n_seeds, B, G), np.ones((n_seeds, B, G), dtype=bool),
                                    p.adv_delta).reshape(-1)
                adv[rows] = a[:, None]
            else:
                agent_r[rows] = np.where(present[rows], p.alpha * global_r[rows, None] + p.beta * credit[rows]
                                         + p.gamma * tool_r[rows], 0.0)
                adv[rows] = agent_advantages(agent_r[rows], present[rows], n_seeds, B, G, spec.normalisation, p.adv_delta)
        planner.advantage = _to(np.repeat(adv[:, :1], H, axis=1).reshape(S, -1), self.device)
        worker.advantage = _to(adv[:, 1:].reshape(S, -1), self.device)
        mean_r = (agent_r * present).sum(axis=1) / present.sum(axis=1)
        return Batch(task, correct.reshape(S, -1), tokens.reshape(S, -1), calls.sum(axis=(1, 2)).reshape(S, -1),
                     roll.worker_present.sum(axis=(1, 2)).reshape(S, -1), mean_r.reshape(S, -1),
                     [planner, worker], coalitions, seconds, roll, credit, agent_r, tool_r)

    def _single_batch(self, task: np.ndarray, draws: Draws) -> Batch:
        p, S = self.p, self.S
        B, G = task.shape[1], task.shape[2]
        roll, dec = self.single_step(self.pool, task.reshape(S, B * G), draws, "sample", repeat=G)
        calls = roll.tool_calls()
        n_calls = calls.sum(axis=1)
        tool_r = np.where(n_calls > 0, (roll.valid & calls).sum(axis=1) / np.maximum(n_calls, 1), 1.0)
        r = p.alpha * roll.correct + p.gamma * tool_r
        adv = group_normalise(r.reshape(S, B, G), np.ones((S, B, G), dtype=bool), p.adv_delta).reshape(-1)
        dec.advantage = _to(np.repeat(adv[:, None], self.H, axis=1).reshape(S, -1), self.device)
        return Batch(task, roll.correct.reshape(S, -1), roll.tokens.reshape(S, -1), n_calls.reshape(S, -1),
                     np.zeros((S, B * G)), r.reshape(S, -1), [dec], np.zeros(S), np.zeros(S), single=roll)

    # -------------------------------------------------------------------------------- update

    def update(self, batch: Batch) -> float:
        eps = self.p.clip_epsilon
        loss_value = 0.0
        for epoch in range(self.p.epochs_per_batch):
            num = torch.zeros(self.S, device=self.device)
            den = torch.zeros(self.S, device=self.device)
            for d in batch.decisions:
                if epoch == 0 and d.first_log_prob is not None:  # the rollout's own forward pass (same weights)
                    lp_unique, d.first_log_prob = d.first_log_prob, None
                else:
                    lp_unique = masked_log_probs(self.policy(d.features), d.allowed)  # [S, U, A]
                new = d.per_decision(lp_unique).gather(-1, d.actions[..., None])[..., 0]
                ratio = torch.exp(new - d.old_log_prob)
                surr = torch.minimum(ratio * d.advantage, torch.clamp(ratio, 1 - eps, 1 + eps) * d.advantage)
                if self.p.kl_coef:  # exact KL over the actions, once per distinct decision
                    if d.ref_log_prob is None:
                        with torch.no_grad():
                            d.ref_log_prob = masked_log_probs(self.reference(d.features), d.allowed)
                    zero = torch.zeros_like(lp_unique)
                    log_ratio = torch.where(d.allowed, lp_unique, zero) - torch.where(d.allowed, d.ref_log_prob, zero)
                    kl = (lp_unique.exp() * log_ratio).sum(-1, keepdim=True)  # [S, U, 1]
                    surr = surr - self.p.kl_coef * d.per_decision(kl)[..., 0]
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
    trainer: Trainer | None  # None once returned from a pool worker (the evaluation ran there)
    curves: dict[str, np.ndarray]  # [S, iterations]
    eval_iterations: list[int]
    eval_accuracy: np.ndarray  # [S, checkpoints]
    seconds: float
    train_samples: list[tuple[int, Batch]] = field(default_factory=list)  # (iteration, batch) kept for trajectories
    member_offset: int = 0  # the method's first member in the trainer's ensemble


def train_methods(specs: list[MethodSpec], params: CreditParams, pool: TaskPool, seeds: list[int],
                  device: torch.device, evaluate_accuracy: Callable[[Trainer], np.ndarray] | None = None,
                  progress: Callable[[int], None] | None = None) -> list[TrainResult]:
    """Train every method of `specs` (all team methods, or the single agent) for `params.iterations`
    batches, every method x seed at once in one ensemble; one result per method."""
    t0 = time.perf_counter()
    trainer = Trainer(specs, params, pool, seeds, device)
    I, S, M, n = params.iterations, trainer.S, trainer.M, len(seeds)
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
        elapsed = time.perf_counter() - t_batch
        # a method's batch: its share of the shared rollout and update work, plus its own credit
        credit_per_method = np.repeat(batch.credit_seconds.reshape(M, n).sum(axis=1), n)
        curves["batch_seconds"][:, it] = (elapsed - batch.credit_seconds.sum()) / M + credit_per_method
        curves["accuracy"][:, it] = batch.correct.mean(axis=1)
        curves["tokens"][:, it] = batch.tokens.mean(axis=1)
        curves["tool_calls"][:, it] = batch.tool_calls.mean(axis=1)
        curves["subagents"][:, it] = batch.subagents.mean(axis=1)
        curves["reward"][:, it] = batch.reward.mean(axis=1)
        curves["loss"][:, it] = loss
        curves["coalitions"][:, it] = batch.coalitions
        curves["credit_seconds"][:, it] = batch.credit_seconds
        if every and it % every == 0:
            batch.decisions = []  # the tensors are not needed for trajectories
            keep.append((it, batch))
        if progress is not None:
            progress(it + 1)
    if evaluate_accuracy is not None:
        eval_iters.append(I)
        eval_acc.append(evaluate_accuracy(trainer))
    acc = np.stack(eval_acc, axis=1) if eval_acc else np.zeros((S, 0))
    seconds = (time.perf_counter() - t0) / M
    out = []
    for j, spec in enumerate(trainer.specs):
        members = slice(j * n, (j + 1) * n)
        out.append(TrainResult(spec, seeds, trainer, {k: v[members] for k, v in curves.items()}, eval_iters,
                               acc[members], seconds, [(it, slice_batch(b, j, n)) for it, b in keep], member_offset=j * n))
    return out


def train(spec: MethodSpec, params: CreditParams, pool: TaskPool, seeds: list[int], device: torch.device,
          evaluate_accuracy: Callable[[Trainer], np.ndarray] | None = None,
          progress: Callable[[int], None] | None = None) -> TrainResult:
    """Train one method for `params.iterations` batches with every seed at once."""
    return train_methods([spec], params, pool, seeds, device, evaluate_accuracy, progress)[0]


def slice_batch(batch: Batch, j: int, n: int) -> Batch:
    """Method j's members (seeds j*n .. j*n + n - 1) of a batch of several methods."""
    members = slice(j * n, (j + 1) * n)
    per = batch.correct.shape[1]  # rollouts per member
    rows = slice(j * n * per, (j + 1) * n * per)

    def take(x):
        return None if x is None else x[rows]

    team = None if batch.team is None else TeamRollouts(*(getattr(batch.team, f)[rows]
                                                          for f in TeamRollouts.__dataclass_fields__))
    return Batch(batch.task[members], batch.correct[members], batch.tokens[members], batch.tool_calls[members],
                 batch.subagents[members], batch.reward[members], [], batch.coalitions[members],
                 batch.credit_seconds[members], team, take(batch.credit), take(batch.agent_reward),
                 take(batch.tool_reward), batch.single if batch.team is None else None)
