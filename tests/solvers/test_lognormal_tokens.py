"""One log-normal token draw for every simulated backend: the draws are exactly the ones the four
hand-written copies made (REDEREF's engine and split-knowledge backend, the simulated solver,
MARGENT's simulator), so no cached answer, cost or metric moves."""

from __future__ import annotations

import math

import numpy as np
import pytest

from delegation_lab.solvers.pricing import lognormal_tokens, lognormal_tokens_from_normals

MEANS = np.array([1.0, 3.7, 40.0, 180.0, 412.5, 900.0, 2500.0, 12000.0])
CVS = [0.0, 0.1, 0.35, 0.5, 0.8, 1.5]


# the copies as they were before, verbatim but for their names
def engine_before(rng, mean, cv):
    if cv == 0:
        return np.round(mean)
    sigma2 = np.log1p(cv**2)
    return np.maximum(1.0, np.round(rng.lognormal(np.log(mean) - sigma2 / 2, np.sqrt(sigma2))))


def split_knowledge_before(rng, mean, cv):
    sigma2 = np.log1p(cv**2)
    return max(1, round(float(rng.lognormal(np.log(mean) - sigma2 / 2, np.sqrt(sigma2))))) if cv > 0 else round(mean)


def simulated_before(rng, mean, cv):
    if cv == 0:
        return max(1, round(mean))
    sigma2 = math.log1p(cv**2)
    return max(1, round(rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2))))


def margent_before(z, mean, cv):
    if cv == 0:
        return np.full(z.shape, max(1, round(mean)), dtype=np.int64)
    s2 = math.log1p(cv * cv)
    return np.maximum(1, np.round(np.exp(math.log(mean) - s2 / 2 + math.sqrt(s2) * z))).astype(np.int64)


@pytest.mark.parametrize("cv", CVS)
def test_vectorised_draws_are_unchanged(cv):
    means = np.tile(MEANS, 2000)
    old = engine_before(np.random.default_rng(7), means, cv)
    new = lognormal_tokens(np.random.default_rng(7), means, cv)
    assert new.dtype == old.dtype and np.array_equal(new, old)


@pytest.mark.parametrize("cv", CVS)
def test_scalar_draws_are_unchanged_and_consume_the_stream_alike(cv):
    for before in (split_knowledge_before, simulated_before):
        a, b = np.random.default_rng(11), np.random.default_rng(11)
        for k in range(4000):
            mean = float(MEANS[k % len(MEANS)]) + 0.25 * (k % 7)
            assert int(lognormal_tokens(b, mean, cv)) == before(a, np.float64(mean) if before is split_knowledge_before else mean, cv)
        assert a.random() == b.random()  # the generators are in the same state afterwards


@pytest.mark.parametrize("cv", CVS)
def test_draws_from_given_normals_are_unchanged(cv):
    z = np.random.default_rng(3).standard_normal(50_000)
    for mean in MEANS:
        assert np.array_equal(lognormal_tokens_from_normals(z, float(mean), cv).astype(np.int64), margent_before(z, float(mean), cv))


def test_the_draws_have_the_requested_mean_and_spread():
    x = lognormal_tokens(np.random.default_rng(0), np.full(200_000, 500.0), 0.5)
    assert x.min() >= 1 and x.mean() == pytest.approx(500, rel=0.01) and x.std() / x.mean() == pytest.approx(0.5, rel=0.02)
