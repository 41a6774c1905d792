"""Avengers-Pro (routers/avengers_pro.py): the top-p cluster aggregation, its agreement with the
single-cluster `cluster` router at top_p = 1, the alpha sweep, params validation. `topic_data` is
the routing problem test_routerdc.py uses too."""

from __future__ import annotations

import numpy as np
import pytest

from delegation_lab.params.root import parse_params, read_yaml
from delegation_lab.errors import ConfigError
from delegation_lab.routers import Inputs
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.study import RoutingData, carve_dev, fit_router

from tests.conftest import REPO

TOPICS = 4
SOLVERS = ["spec0", "spec1", "spec2", "spec3", "generalist"]
COST = np.array([1e-4, 2e-4, 3e-4, 4e-4, 2e-3])  # specialists cheap, the generalist dear


def topic_data(n: int = 800, seed: int = 0) -> RoutingData:
    """Questions in 4 topics (embedding clusters); solver t is right on 90 % of topic t and 25 %
    elsewhere, the generalist on 60 % everywhere at 5-20x the price. The right solver depends on
    the cluster: the per-topic best reaches ~0.9, a uniform random pick ~0.45."""
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, TOPICS, n)
    emb = rng.normal(size=(TOPICS, 32))[topic] + 0.35 * rng.normal(size=(n, 32))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    p = np.full((n, len(SOLVERS)), 0.25)
    p[np.arange(n), topic] = 0.9
    p[:, 4] = 0.6
    correct = rng.random(p.shape) < p
    cost = COST * rng.uniform(0.9, 1.1, p.shape)
    ids = np.array([f"q{i:04d}" for i in range(n)])
    split = carve_dev(ids, np.where(np.arange(n) < n // 2, "train", "test"), 0.25, 0)
    text = np.ones((n, 4))
    data = RoutingData(ids, split, Inputs(emb.astype(np.float32), text), correct, cost, SOLVERS, "synthetic")
    data.topic = topic  # type: ignore[attr-defined]  # the truth the tests compare against
    return data


def per_topic_best(data: RoutingData) -> float:
    """Test accuracy of the solver best on each topic's training items."""
    train, test = data.rows("train"), data.rows("test")
    best = {t: data.correct[train][data.topic[train] == t].mean(axis=0).argmax() for t in range(TOPICS)}
    return float(np.mean([data.correct[i, best[data.topic[i]]] for i in test]))


def accuracy_cost(router, data: RoutingData, knob: float) -> tuple[float, float]:
    test = data.rows("test")
    chosen = router.route(data.inputs.take(test), knob)[0]
    rows = np.arange(test.size)
    return float(data.correct[test][rows, chosen].mean()), float(data.cost[test][rows, chosen].mean())


PARAMS = RoutersParams.model_validate({"avengers_pro": {"clusters": 8, "top_p": 2}, "cluster": {"clusters": 8}})


def test_alpha_one_approaches_the_per_topic_best_and_alpha_moves_cost():
    data = topic_data()
    router = fit_router("avengers_pro", PARAMS, data, 0)
    acc = {a: accuracy_cost(router, data, a) for a in (0.0, 0.5, 1.0)}
    best = per_topic_best(data)
    random_pick = data.correct[data.rows("test")].mean()
    assert acc[1.0][0] >= best - 0.05 and acc[1.0][0] > random_pick + 0.3
    assert acc[0.0][1] < acc[1.0][1]  # thrift: the cheapest specialist everywhere
    assert acc[0.0][1] == pytest.approx(COST[0], rel=0.15)


def test_top_p_one_is_the_cluster_router():
    data = topic_data()
    one = RoutersParams.model_validate({"avengers_pro": {"clusters": 8, "top_p": 1}, "cluster": {"clusters": 8}})
    ours, single = fit_router("avengers_pro", one, data, 3), fit_router("cluster", one, data, 3)
    x = data.inputs.take(data.rows("test"))
    for alpha in one.avengers_pro.sweep:
        assert np.array_equal(ours.route(x, alpha)[0], single.route(x, alpha)[0])


def test_a_sharp_beta_is_the_nearest_cluster_and_beta_zero_weighs_the_top_p_equally():
    data = topic_data()
    sharp = RoutersParams.model_validate({"avengers_pro": {"clusters": 8, "top_p": 3, "beta": 1e6}})
    x = data.inputs.take(data.rows("test"))
    w = fit_router("avengers_pro", sharp, data, 0).cluster_weights(x)
    assert np.allclose(w.max(axis=1), 1.0)
    flat = RoutersParams.model_validate({"avengers_pro": {"clusters": 8, "top_p": 2, "beta": 0}})
    router = fit_router("avengers_pro", flat, data, 0)
    w = router.cluster_weights(x)
    assert ((w > 0).sum(axis=1) == 2).all() and np.allclose(w[w > 0], 0.5)
    # equal weights let a cluster of another topic outvote the question's own: the default beta does not
    assert accuracy_cost(router, data, 1.0)[0] < accuracy_cost(fit_router("avengers_pro", PARAMS, data, 0), data, 1.0)[0] - 0.05


def test_the_top_p_clusters_outvote_the_nearest_one():
    """Hand-set profiles: the nearest cluster prefers A a little, the next two prefer B a lot, so the
    summed scores pick B at top_p = 3 and A at top_p = 1, with the per-cluster min-max normalisation."""
    params = RoutersParams.model_validate({"avengers_pro": {"clusters": 3, "top_p": 3, "beta": 0}})
    router = fit_router("avengers_pro", params, topic_data(), 0)  # fitted, then its profiles replaced
    router.solvers = ["A", "B"]
    router.centres = np.array([[1.0, 0.0], [0.6, 0.8], [0.6, -0.8]], dtype=np.float32)
    router.cluster_accuracy = np.array([[0.80, 0.78], [0.2, 0.9], [0.3, 0.9]])
    router.cluster_cost = np.ones((3, 2))
    q = Inputs(np.array([[0.99, 0.1]], dtype=np.float32), np.ones((1, 4)))
    assert router.route(q, 1.0)[0][0] == 1
    router.params = params.avengers_pro.model_copy(update={"top_p": 1})
    assert router.route(q, 1.0)[0][0] == 0


@pytest.mark.parametrize(("section", "key", "match"), [
    ({"avengers_pro": {"clusters": 4, "top_p": 5}}, "routers.avengers_pro", "top_p: 5 nearest clusters asked of 4"),
    ({"avengers_pro": {"top_p": 0}}, "routers.avengers_pro.top_p", "greater than 0"),
    ({"avengers_pro": {"beta": -1}}, "routers.avengers_pro.beta", "greater than or equal to 0"),
    ({"avengers_pro": {"sweep": [0.5, 1.5]}}, "routers.avengers_pro", "every alpha must lie in [0, 1]"),
])
def test_bad_avengers_pro_params_fail_naming_the_key(section, key, match):
    raw = read_yaml(REPO / "params.yaml")
    raw["routers"] = {**raw["routers"], **section}
    with pytest.raises(ConfigError) as e:
        parse_params(raw)
    assert key in str(e.value) and match in str(e.value)
