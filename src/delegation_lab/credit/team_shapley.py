"""Exact Shapley credit of the team game (`env.TeamGame`) in closed form, without its 2^n coalitions.

The game factorises by hop: v(S) = prod_h f_h(p, T_h) - token_cost x tokens(S) / 1000, where p says
whether the planner is in S, T_h is the set of S's workers on hop h (at most K), and f_h is whether
hop h is answered right by them (absent hops: 1). Shapley values are linear, so the token part
(additive) credits each agent its own tokens, and the correctness part is a weighted sum over
coalitions that the hop structure turns into polynomial products: with

    F_h^p(x) = sum over T subset of W_h of f_h(p, T) x^|T|        (W_h: the hop's workers)
    D_hk^p(x) = sum over T subset of W_h - k of (f_h(p, T + k) - f_h(p, T)) x^|T|

and w_n(s) = s! (n - s - 1)! / n!, the planner's credit is sum_s w_n(s) [x^s] (prod_h F_h^1 - prod_h F_h^0)
and worker k of hop h gets sum_p sum_s w_n(s) [x^s] x^p D_hk^p prod_{h' != h} F_h'^p. Cost: O(H^2 K 2^K n)
per rollout instead of 2^n coalition replays; `tests/test_credit_shapley.py` checks it against the
enumeration of every coalition.
"""

from __future__ import annotations

import math

import numpy as np

from delegation_lab.credit.env import TeamGame


def _polymul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Coefficient-major polynomials a [D, R] x b [E, R] -> [D, R] (degrees above D - 1 dropped: no
    coalition is that large); coefficient-major keeps every slice contiguous."""
    out = np.zeros_like(a)
    D = a.shape[0]
    for k in range(min(b.shape[0], D)):
        out[k:] += b[k] * a[:D - k]
    return out


def _weights(n: np.ndarray, D: int) -> np.ndarray:
    """w_n(s) [D, R] for each row's agent count n (0 where s >= n)."""
    table = np.zeros((D + 1, D))
    for m in range(1, D + 1):
        for s in range(min(m, D)):
            table[m, s] = math.factorial(s) * math.factorial(m - s - 1) / math.factorial(m)
    return np.ascontiguousarray(table[n].T)


def team_shapley(game: TeamGame, rows: np.ndarray | None = None) -> np.ndarray:
    """float [len(rows), slots]: exact Shapley credit of every agent (0 in absent slots)."""
    r = game.r
    rows = np.arange(r.L) if rows is None else np.asarray(rows, dtype=np.int64)
    H, K = game.H, game.K
    R = len(rows)
    present = game.present[rows]  # [R, slots]
    n = present.sum(axis=1)
    D = 1 + H * K  # coalition sizes 0 .. H*K (workers only; the planner enters as x^p)
    wp = r.worker_present[rows]  # [R, H, K]
    hop_absent = ~r.hop_present[rows]
    recall = r.recall[rows]
    subsets = np.arange(2**K)
    member = ((subsets[:, None] >> np.arange(K)[None, :]) & 1).astype(bool)  # [2^K, K]
    size = member.sum(axis=1)

    def any_member(x: np.ndarray) -> np.ndarray:  # [R, H, K] -> [R, H, 2^K]: x holds for a member of T
        out = np.zeros((R, H, len(subsets)), dtype=bool)
        for k in range(K):  # an OR over the few workers (faster than .any over a short axis)
            out |= member[:, k] & x[:, :, k, None]
        return out

    valid = ~any_member(~wp)  # T within the hop's workers

    def hop_ok(ev: np.ndarray, ds: np.ndarray) -> np.ndarray:  # [R, H, 2^K] f_h(p, T)
        ok = ~any_member(ds[rows]) & (any_member(ev[rows]) | recall[..., None])
        return (ok | hop_absent[..., None]).astype(np.float64)

    f = [hop_ok(game._ev_r, game._ds_r), hop_ok(game._ev_f, game._ds_f)]  # p = 0 (planner masked), p = 1
    F = np.zeros((2, H, K + 1, R))  # F[p, h]: the hop's polynomial, coefficient-major
    for p in (0, 1):
        for t in subsets:
            F[p, :, size[t]] += np.where(valid[:, :, t], f[p][:, :, t], 0.0).T
    w = _weights(n, D)
    credit = np.zeros((R, 1 + H * K))

    def product(p: int, skip: int | None = None) -> np.ndarray:
        out = np.zeros((D, R))
        out[0] = 1.0
        for h in range(H):
            if h != skip:
                out = _polymul(out, F[p, h])
        return out

    credit[:, 0] = (w * (product(1) - product(0))).sum(axis=0)
    for h in range(H):
        rest = [product(0, skip=h), product(1, skip=h)]
        for k in range(K):
            phi = np.zeros(R)
            for p in (0, 1):
                d = np.zeros((K + 1, R))
                for t in subsets[~member[:, k]]:
                    with_k = t | (1 << k)
                    ok = valid[:, h, with_k]  # T + k within the hop's workers (so is T)
                    d[size[t]] += np.where(ok, f[p][:, h, with_k] - f[p][:, h, t], 0.0)
                poly = _polymul(rest[p], d)
                # x^p: with the planner in S, a coalition of s workers has s + 1 members
                phi += (w[p:] * poly[:D - p]).sum(axis=0)
            credit[:, 1 + h * K + k] = np.where(wp[:, h, k], phi, 0.0)
    if game.token_cost:
        credit -= game.token_cost * game._tokens[rows] / 1000.0
    return np.where(present, credit, 0.0)
