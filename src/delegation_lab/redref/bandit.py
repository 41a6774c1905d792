"""Theorem 3.1 measured: Thompson sampling on Bernoulli arms whose rewards reach the controller
through a judge with false-positive rate eps_FP and false-negative rate eps_FN. The observed arm
means are theta~_i = delta * theta_i + eps_FP with delta = 1 - eps_FP - eps_FN, so every observed gap
is delta times the true one and the true regret is exactly R(T) = R~(T) / delta; with the
worst-case bound R~(T) = O(sqrt(N T log T)) this gives O(sqrt(N T log T) / delta).

The sweep runs every (delta, seed) pair in one batch (eps_FP = eps_FN = (1 - delta) / 2) and records
the true pseudo-regret sum_t (theta* - theta_{I_t}).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from delegation_lab.redref import policy
from delegation_lab.redref.judge import noisy_verdict


@dataclass
class SweepResult:
    deltas: np.ndarray  # [D]
    regret: np.ndarray  # [D, S]: true pseudo-regret at T
    observed_regret: np.ndarray  # [D, S]: regret on the observed (noisy) problem
    curve: np.ndarray  # [D, C]: mean regret at checkpoints
    checkpoints: np.ndarray  # [C]
    horizon: int
    n_arms: int

    def bound(self) -> np.ndarray:
        """sqrt(N T log T) / delta (the theorem's rate with constant 1)."""
        t = self.horizon
        return np.sqrt(self.n_arms * t * np.log(t)) / self.deltas


def judge_noise_sweep(arms: list[float], deltas: list[float], horizon: int, seeds: int, rng: np.random.Generator,
                      n_checkpoints: int = 20) -> SweepResult:
    theta = np.asarray(arms, dtype=float)
    d = np.asarray(deltas, dtype=float)
    D, N = d.size, theta.size
    eps = np.repeat((1.0 - d) / 2.0, seeds)  # eps_FP = eps_FN
    B = D * seeds
    alpha, beta = np.ones((B, N)), np.ones((B, N))
    cool = np.zeros((B, N), dtype=int)
    rows = np.arange(B)
    all_rows = np.ones(B, dtype=bool)
    regret = np.zeros(B)
    observed = np.zeros(B)
    observed_theta = (1.0 - 2 * eps)[:, None] * theta[None, :] + eps[:, None]
    best, best_obs = theta.max(), observed_theta.max(axis=1)
    checkpoints = np.unique(np.linspace(1, horizon, n_checkpoints).astype(int))
    curve = np.zeros((D, checkpoints.size))
    c = 0
    for t in range(1, horizon + 1):
        scores = policy.sample_scores(alpha, beta, cool, rng, "thompson")
        i = policy.select(scores, alpha, beta)
        reward = rng.random(B) < theta[i]
        y = noisy_verdict(reward, rng.random(B), eps, eps)
        policy.update(alpha, beta, i, y, all_rows)
        regret += best - theta[i]
        observed += best_obs - observed_theta[rows, i]
        if c < checkpoints.size and t == checkpoints[c]:
            curve[:, c] = regret.reshape(D, seeds).mean(axis=1)
            c += 1
    return SweepResult(d, regret.reshape(D, seeds), observed.reshape(D, seeds), curve, checkpoints, horizon, N)


def loglog_slope(deltas: np.ndarray, regret: np.ndarray) -> float:
    """Least-squares slope of log R(T) against log(1 / delta) (1.0 = regret grows exactly like 1/delta)."""
    x = np.log(1.0 / np.asarray(deltas, float))
    y = np.log(np.maximum(np.asarray(regret, float), 1e-12))
    return float(np.polyfit(x, y, 1)[0])
