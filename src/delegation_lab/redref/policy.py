"""Belief-guided delegation (paper 3.1, Algorithm 1 lines 9-14 and 36, A.3.2), batched.

Every function works on arrays with a leading batch dimension (seeds, or seeds x budgets), so the
vectorised experiments and the one-task-at-a-time controller share the same decision code; the
controller simply uses a batch of one.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Selection = Literal["thompson", "random"]


def sample_scores(alpha: np.ndarray, beta: np.ndarray, cool: np.ndarray, rng: np.random.Generator,
                  selection: Selection = "thompson", eligible: np.ndarray | None = None) -> np.ndarray:
    """theta_hat ~ Beta(alpha, beta) per agent (Thompson) or ~ U(0, 1) (random delegation: the identical
    loop with uniform selection); -inf for cooling (and, if given, ineligible) agents (line 9)."""
    if selection == "thompson":
        theta = rng.beta(alpha, beta)
    elif selection == "random":
        theta = rng.random(alpha.shape)
    else:
        raise ValueError(f"unknown selection {selection!r}")
    blocked = cool > 0
    if eligible is not None:
        blocked |= ~eligible
    return np.where(blocked, -np.inf, theta)


def sample_domain_scores(alpha: np.ndarray, beta: np.ndarray, target: np.ndarray, cool: np.ndarray,
                         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Task-conditional Thompson sampling (our variant): alpha, beta [B, N, K] per agent x domain,
    target [B, K] the parts the critique asks for. Draws theta_hat ~ Beta per (agent, domain) pair;
    an agent's score is its best pair among the targets (-inf while cooling). Returns the scores
    [B, N] and each agent's best domain [B, N] (where a judged call's y is credited)."""
    drawn = np.broadcast_to(target[:, None, :], alpha.shape)
    theta = np.full(alpha.shape, -np.inf)
    theta[drawn] = rng.beta(alpha[drawn], beta[drawn])  # only the pairs that can be delegated
    domain = theta.argmax(axis=-1)
    best = np.take_along_axis(theta, domain[..., None], axis=-1)[..., 0]
    return np.where(cool > 0, -np.inf, best), domain


def posterior_mean(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """mu_i = alpha_i / (alpha_i + beta_i)."""
    return alpha / (alpha + beta)


def select(theta: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """i* = argmax theta_hat, ties broken by the larger posterior mean, then the lower index (line 14)."""
    best = theta.max(axis=-1, keepdims=True)
    tied = (theta == best) & np.isfinite(theta)
    return np.argmax(np.where(tied, posterior_mean(alpha, beta), -np.inf), axis=-1)


def release_one(cool: np.ndarray, rows: np.ndarray, among: np.ndarray | None = None) -> np.ndarray:
    """Forced exploration when every agent cools (lines 10-12, A.3.2): release the agent with the
    smallest remaining cooldown (lowest index on ties; only agents in `among` when given) in each row
    where `rows` is True; returns it."""
    j = np.argmin(cool if among is None else np.where(among, cool, np.iinfo(np.int64).max), axis=-1)
    idx = np.nonzero(rows)[0]
    cool[idx, j[idx]] = 0
    return j


def cool_down(cool: np.ndarray, chosen: np.ndarray, r: int, rows: np.ndarray) -> None:
    """After a call (line 36): every other agent's cooldown falls by one, the chosen agent's is set to r,
    so it sits out the next r rounds."""
    idx = np.nonzero(rows)[0]
    if idx.size == 0:
        return
    cool[idx] = np.maximum(cool[idx] - 1, 0)
    cool[idx, chosen[idx]] = r


def update(alpha: np.ndarray, beta: np.ndarray, chosen: np.ndarray, y: np.ndarray, rows: np.ndarray) -> None:
    """alpha_i* += y, beta_i* += 1 - y (eq. 2) in the rows that made a judged call."""
    idx = np.nonzero(rows)[0]
    yy = y[idx].astype(float)
    alpha[idx, chosen[idx]] += yy
    beta[idx, chosen[idx]] += 1.0 - yy
