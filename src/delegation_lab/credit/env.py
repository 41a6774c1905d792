"""A simulated planner-worker tool-use environment (SHARP §3-4 on a MuSiQue-like multi-hop task),
vectorised over rollouts, and its coalition game for Shapley credit.

A question has h hops (2-4). Hop k has a familiarity f_k (the chance that the shared model recalls
the fact with no tool), a difficulty d_k (lowers a tool's hit chance) and an ambiguity a_k (raises
the chance of a distracting caveat); the policy sees noisy copies of the three.

Team (planner + workers, one shared policy with role features, §3.2). The planner decides per hop
how many workers to delegate it to (0, 1 or 2); each worker picks a tool action: `direct` (answer
without a tool: no evidence), `search`, `search_refined` (a context-rich query) or `search_scrape`.
A call returns the hop's fact (evidence), nothing, or a distracting caveat; it may be malformed
(invalid: nothing). A hop is answered right iff no caveat reached it and (evidence did, or the
model recalls the fact); the question is right iff every hop is. So a call can be useful (its
evidence makes the answer right), redundant (another worker or recall had the fact) or harmful
(its caveat turns a right answer wrong, as in the paper's case study F.2).

Counterfactual masking. Every random draw of a rollout is fixed (common random numbers: the
recall draw per hop, and per worker the outcome draw u and the validity draw w), so a coalition S
is replayed exactly: a masked worker's call never happened (no evidence, no caveat, no tokens);
masking the planner masks its decomposition: the workers still run, but on the raw question, with
hit chance x unfocused_hit and caveat chance x unfocused_distract on the same draws (§4.3: the
planner's credit is its structural influence, separate from the workers' direct effects). Value

    v(S) = correct(S) - token_cost x tokens(S) / 1000

with tokens(S) the tokens of the workers in S plus the planner's when it is in S.

Single agent: the same tool actions per hop, chosen and run by one agent in its own context (hit x
single_hit, caveat x single_distract, on the draws of worker slot 0).

Player slots of a team rollout: 0 = planner, 1 + K*k + r = the r-th worker of hop k.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from delegation_lab.credit.params import EnvParams

TOOL_NAMES = ("direct", "search", "search_refined", "search_scrape")
NONE, EVIDENCE, DISTRACTOR = 0, 1, 2
OUTCOME_NAMES = ("none", "evidence", "distractor")
PLANNER, WORKER, SINGLE = 0, 1, 2
ROLE_NAMES = ("planner", "worker", "single")
N_FEATURES = 10
N_ACTIONS = 4


# ----------------------------------------------------------------------------------- questions


@dataclass(frozen=True)
class TaskPool:
    """Questions (rows) x hop slots (columns): the true hop parameters and what the policy sees."""

    hops: np.ndarray  # int [N]
    present: np.ndarray  # bool [N, H]
    familiarity: np.ndarray  # float [N, H] (0 where absent)
    difficulty: np.ndarray
    ambiguity: np.ndarray
    seen: np.ndarray  # float [N, H, 3]: noisy familiarity, difficulty, ambiguity

    @property
    def n(self) -> int:
        return len(self.hops)

    @property
    def max_hops(self) -> int:
        return self.present.shape[1]


def make_pool(env: EnvParams, n: int, rng: np.random.Generator) -> TaskPool:
    H = env.max_hops
    hops = 2 + rng.choice(len(env.hop_probs), size=n, p=np.asarray(env.hop_probs) / sum(env.hop_probs))
    present = np.arange(H)[None, :] < hops[:, None]
    fam = rng.beta(*env.familiarity, size=(n, H)) * present
    diff = rng.random((n, H)) * present
    amb = rng.beta(*env.ambiguity, size=(n, H)) * present
    true = np.stack([fam, diff, amb], axis=-1)
    seen = np.clip(true + env.feature_noise * rng.standard_normal(true.shape), 0.0, 1.0) * present[..., None]
    return TaskPool(hops.astype(np.int64), present, fam, diff, amb, seen.astype(np.float32))


@dataclass(frozen=True)
class Draws:
    """The fixed random draws of rollouts: recall per hop, outcome and validity per worker slot."""

    recall: np.ndarray  # float [L, H]
    outcome: np.ndarray  # float [L, H, K]
    validity: np.ndarray  # float [L, H, K]


def make_draws(rng: np.random.Generator, shape: tuple[int, ...], H: int, K: int) -> Draws:
    return Draws(rng.random((*shape, H)), rng.random((*shape, H, K)), rng.random((*shape, H, K)))


# ---------------------------------------------------------------------------------------- tools


@dataclass(frozen=True)
class ToolTable:
    tokens: np.ndarray
    hit: np.ndarray
    slope: np.ndarray
    distract: np.ndarray
    invalid: np.ndarray

    @classmethod
    def of(cls, env: EnvParams) -> ToolTable:
        specs = [getattr(env.tools, name) for name in TOOL_NAMES]
        return cls(np.array([s.tokens for s in specs], dtype=np.float64), np.array([s.hit for s in specs]),
                   np.array([s.difficulty_slope for s in specs]), np.array([s.distract for s in specs]),
                   np.array([s.invalid for s in specs]))


def tool_outcome(env: EnvParams, tools: ToolTable, tool: np.ndarray, u: np.ndarray, w: np.ndarray,
                 difficulty: np.ndarray, ambiguity: np.ndarray, hit_mult: float,
                 distract_mult: float) -> tuple[np.ndarray, np.ndarray]:
    """(outcome int8, valid bool) of calls `tool` on hops of `difficulty` / `ambiguity` with draws u, w."""
    hit = tools.hit[tool] * (1.0 - tools.slope[tool] * difficulty) * hit_mult
    dis = np.minimum(tools.distract[tool] * env.ambiguity_scale * ambiguity * distract_mult, 1.0 - hit)
    valid = w >= tools.invalid[tool]
    out = np.where(u < hit, EVIDENCE, np.where(u >= 1.0 - dis, DISTRACTOR, NONE))
    return np.where(valid, out, NONE).astype(np.int8), valid


# -------------------------------------------------------------------------------------- features


def _features(pool: TaskPool, task: np.ndarray, role: int, extra: np.ndarray | None = None) -> np.ndarray:
    """float32 [..., H, N_FEATURES] per hop of `task` [...]: role one-hot, seen f / d / a, hops, hop index,
    then (workers) workers on the hop / 2 and the worker's rank on it."""
    H = pool.max_hops
    shape = (*task.shape, H)
    f = np.zeros((*shape, N_FEATURES), dtype=np.float32)
    f[..., role] = 1.0
    f[..., 3:6] = pool.seen[task]
    f[..., 6] = (pool.hops[task] / H)[..., None]
    f[..., 7] = np.arange(H, dtype=np.float32) / H
    return f


def planner_features(pool: TaskPool, task: np.ndarray) -> np.ndarray:
    return _features(pool, task, PLANNER)


def single_features(pool: TaskPool, task: np.ndarray) -> np.ndarray:
    return _features(pool, task, SINGLE)


def worker_features(pool: TaskPool, task: np.ndarray, n_workers: np.ndarray, K: int) -> np.ndarray:
    """[..., H, K, N_FEATURES]: the hop's features plus workers on the hop / K and the worker's rank."""
    base = _features(pool, task, WORKER)
    f = np.repeat(base[..., None, :], K, axis=-2)
    f[..., 8] = (n_workers / K)[..., None]
    f[..., 9] = np.arange(K, dtype=np.float32) / K
    return f


def worker_variants(K: int) -> list[tuple[int, int]]:
    """The (workers on the hop, rank) pairs a worker's features can take: K (K + 1) / 2 of them."""
    return [(n, r) for n in range(1, K + 1) for r in range(n)]


def worker_variant_features(pool: TaskPool, task: np.ndarray, K: int) -> np.ndarray:
    """[..., H, V, N_FEATURES]: `worker_features` of every (workers on the hop, rank) variant, so the
    policy runs once per question and variant instead of once per rollout and slot."""
    base = _features(pool, task, WORKER)
    variants = worker_variants(K)
    f = np.repeat(base[..., None, :], len(variants), axis=-2)
    f[..., 8] = np.array([n / K for n, _ in variants], dtype=np.float32)
    f[..., 9] = np.array([r / K for _, r in variants], dtype=np.float32)
    return f


def worker_variant_index(n_workers: np.ndarray, K: int) -> np.ndarray:
    """int [..., H, K]: the variant of each worker slot given the planner's `n_workers` [..., H]
    (0 for an absent slot, whose decision is masked)."""
    rank = np.arange(K)
    index = n_workers[..., None] * (n_workers[..., None] - 1) // 2 + rank
    return np.where(rank < n_workers[..., None], index, 0)


# ------------------------------------------------------------------------------------- rollouts


@dataclass
class TeamRollouts:
    """Planner-worker rollouts (leading dim L), everything a coalition replay needs."""

    task: np.ndarray  # int [L]
    hop_present: np.ndarray  # bool [L, H]
    n_workers: np.ndarray  # int [L, H] (the planner's actions)
    worker_present: np.ndarray  # bool [L, H, K]
    tool: np.ndarray  # int [L, H, K]
    recall: np.ndarray  # bool [L, H]: the model recalls the hop's fact
    out_focused: np.ndarray  # int8 [L, H, K]
    out_raw: np.ndarray  # int8 [L, H, K]: the same draws on the raw question (planner masked)
    valid: np.ndarray  # bool [L, H, K]
    worker_tokens: np.ndarray  # float [L, H, K] (0 where absent)
    planner_tokens: np.ndarray  # float [L]

    @property
    def L(self) -> int:
        return len(self.task)

    @property
    def slots(self) -> int:
        return 1 + self.worker_present.shape[1] * self.worker_present.shape[2]

    def tool_calls(self) -> np.ndarray:
        """bool [L, H, K]: workers that called a tool (not `direct`)."""
        return self.worker_present & (self.tool != 0)


def team_rollouts(env: EnvParams, tools: ToolTable, pool: TaskPool, task: np.ndarray, n_workers: np.ndarray,
                  tool: np.ndarray, draws: Draws) -> TeamRollouts:
    """Run the team on `task` [L] with the planner's `n_workers` [L, H] and the workers' `tool` [L, H, K]."""
    K = tool.shape[-1]
    hop_present = pool.present[task]
    n_workers = np.where(hop_present, n_workers, 0)
    worker_present = np.arange(K)[None, None, :] < n_workers[..., None]
    d = pool.difficulty[task][..., None]
    a = pool.ambiguity[task][..., None]
    focused, valid = tool_outcome(env, tools, tool, draws.outcome, draws.validity, d, a, 1.0, 1.0)
    raw, _ = tool_outcome(env, tools, tool, draws.outcome, draws.validity, d, a, env.unfocused_hit, env.unfocused_distract)
    focused = np.where(worker_present, focused, NONE).astype(np.int8)
    raw = np.where(worker_present, raw, NONE).astype(np.int8)
    recall = (draws.recall < pool.familiarity[task]) & hop_present
    w_tokens = np.where(worker_present, tools.tokens[tool], 0.0)
    p_tokens = (env.planner_tokens + env.planner_tokens_per_hop * pool.hops[task]
                + env.planner_tokens_per_worker * worker_present.sum(axis=(1, 2))).astype(np.float64)
    return TeamRollouts(task, hop_present, n_workers, worker_present, tool, recall, focused, raw,
                        valid & worker_present, w_tokens, p_tokens)


@dataclass
class SingleRollouts:
    task: np.ndarray  # int [L]
    hop_present: np.ndarray  # bool [L, H]
    tool: np.ndarray  # int [L, H]
    outcome: np.ndarray  # int8 [L, H]
    valid: np.ndarray  # bool [L, H]
    recall: np.ndarray  # bool [L, H]
    tokens: np.ndarray  # float [L]
    correct: np.ndarray  # bool [L]

    def tool_calls(self) -> np.ndarray:
        return self.hop_present & (self.tool != 0)


def single_rollouts(env: EnvParams, tools: ToolTable, pool: TaskPool, task: np.ndarray, tool: np.ndarray,
                    draws: Draws) -> SingleRollouts:
    """The single agent: one tool action per hop [L, H], on the draws of worker slot 0."""
    hop_present = pool.present[task]
    out, valid = tool_outcome(env, tools, tool, draws.outcome[..., 0], draws.validity[..., 0],
                              pool.difficulty[task], pool.ambiguity[task], env.single_hit, env.single_distract)
    out = np.where(hop_present, out, NONE).astype(np.int8)
    recall = (draws.recall < pool.familiarity[task]) & hop_present
    ok = (out != DISTRACTOR) & ((out == EVIDENCE) | recall)
    correct = (ok | ~hop_present).all(axis=1)
    tokens = (env.single_tokens + env.single_tokens_per_hop * pool.hops[task]
              + np.where(hop_present, tools.tokens[tool], 0.0).sum(axis=1))
    return SingleRollouts(task, hop_present, tool, out, valid & hop_present, recall, tokens, correct)


# ------------------------------------------------------------------------------ coalition game


class TeamGame:
    """The coalition game of team rollouts (see the module docstring): slot 0 planner, then workers."""

    def __init__(self, r: TeamRollouts, token_cost: float):
        L, H, K = r.worker_present.shape
        self.r, self.H, self.K, self.token_cost = r, H, K, float(token_cost)
        self._present = np.concatenate([np.ones((L, 1), dtype=bool), r.worker_present.reshape(L, H * K)], axis=1)
        self._ev_f = r.out_focused == EVIDENCE
        self._ds_f = r.out_focused == DISTRACTOR
        self._ev_r = r.out_raw == EVIDENCE
        self._ds_r = r.out_raw == DISTRACTOR
        self._tokens = np.concatenate([r.planner_tokens[:, None], r.worker_tokens.reshape(L, H * K)], axis=1)

    @property
    def present(self) -> np.ndarray:
        return self._present

    def correct(self, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """bool [R, M]: the question answered right with only the masked-in agents."""
        R, M = len(rows), masks.shape[1]
        masks = np.broadcast_to(masks, (R, M, masks.shape[2]))
        planner = masks[:, :, 0][..., None]  # [R, M, 1]
        workers = masks[:, :, 1:].reshape(R, M, self.H, self.K)
        ev = np.zeros((R, M, self.H), dtype=bool)
        ds = np.zeros((R, M, self.H), dtype=bool)
        for k in range(self.K):  # an OR over the few workers of a hop (faster than .any over a short axis)
            w = workers[..., k]
            ev |= w & np.where(planner, self._ev_f[rows][:, None, :, k], self._ev_r[rows][:, None, :, k])
            ds |= w & np.where(planner, self._ds_f[rows][:, None, :, k], self._ds_r[rows][:, None, :, k])
        ok = ~ds & (ev | self.r.recall[rows][:, None, :])
        return (ok | ~self.r.hop_present[rows][:, None, :]).all(axis=-1)

    def tokens(self, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """float [R, M]: tokens spent by the masked-in agents."""
        masks = np.broadcast_to(masks, (len(rows), *masks.shape[1:]))
        return np.einsum("rms,rs->rm", masks.astype(np.float64), self._tokens[rows])

    def values(self, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        v = self.correct(rows, masks).astype(np.float64)
        if self.token_cost:
            v -= self.token_cost * self.tokens(rows, masks) / 1000.0
        return v

    def full(self) -> tuple[np.ndarray, np.ndarray]:
        """(correct [L], tokens [L]) of the whole team."""
        rows = np.arange(self.r.L)
        everyone = self._present[:, None, :]
        return self.correct(rows, everyone)[:, 0], self._tokens.sum(axis=1)
