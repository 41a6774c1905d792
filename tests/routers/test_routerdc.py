"""RouterDC (routers/routerdc.py): its two contrastive losses, routing where the right solver depends
on the query's cluster, the dev-calibrated lambda sweep, the saved state, params validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from delegation_lab.errors import ConfigError
from delegation_lab.evaluation import Verifier
from delegation_lab.params.root import parse_params, read_yaml
from delegation_lab.routers.artifact import load_router, save_router
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.routerdc import sample_llm_loss, sample_sample_loss
from delegation_lab.routers.study import fit_router

from tests.conftest import REPO
from tests.routers.test_avengers_pro import accuracy_cost, per_topic_best, topic_data
from tests.routers.test_routers import synthetic


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def test_sample_llm_loss_rewards_scoring_the_right_solvers_above_the_wrong():
    labels = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0]])
    good = torch.where(labels > 0, 1.0, -1.0)
    assert sample_llm_loss(good, labels, 2, 2, _gen()) < sample_llm_loss(-good, labels, 2, 2, _gen())


def test_sample_llm_loss_skips_wrong_positives_and_right_negatives():
    scores = torch.randn(3, 4)
    assert sample_llm_loss(scores, torch.zeros(3, 4), 2, 2, _gen()) == 0  # no positive scored > 0
    assert sample_llm_loss(scores, torch.ones(3, 4), 2, 2, _gen()) == 0  # every negative is right: masked out


def test_sample_llm_loss_takes_the_more_accurate_of_equal_labels_as_positives():
    """With a prior, the positive among two right solvers is the more accurate one: only its score
    moves the loss."""
    labels = torch.tensor([[1.0, 1.0, 0.0]])
    prior = torch.tensor([0.2, 0.9, 0.1])
    base = torch.zeros(1, 3)
    lifted = base.clone()
    lifted[0, 0] = 5.0  # the less accurate right solver: not a positive at top_k = 1
    assert sample_llm_loss(lifted, labels, 1, 1, _gen(), prior) == sample_llm_loss(base, labels, 1, 1, _gen(), prior)
    lifted[0, 1] = 5.0
    assert sample_llm_loss(lifted, labels, 1, 1, _gen(), prior) < sample_llm_loss(base, labels, 1, 1, _gen(), prior)


def test_sample_sample_loss_prefers_queries_grouped_by_cluster():
    cluster = torch.arange(4).repeat_interleave(8)
    grouped = torch.nn.functional.one_hot(cluster, 4).float() + 0.05 * torch.randn(32, 4, generator=_gen())
    mixed = grouped[torch.randperm(32, generator=_gen())]
    assert sample_sample_loss(grouped, cluster, 3, _gen()) < sample_sample_loss(mixed, cluster, 3, _gen())
    assert sample_sample_loss(grouped, torch.zeros(32, dtype=torch.long), 3, _gen()) == 0  # no negatives at all


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """As the study runs it (`routers.torch_threads`): two threads on a loaded machine took 40x longer."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def fitted():
    data = topic_data()
    return data, fit_router("routerdc", RoutersParams(), data, 0)


def test_routerdc_approaches_the_per_cluster_best_and_beats_random(fitted):
    data, router = fitted
    acc, _ = accuracy_cost(router, data, 0.0)
    random_pick = data.correct[data.rows("test")].mean()
    assert acc >= per_topic_best(data) - 0.08 and acc > random_pick + 0.25


def test_lambda_zero_is_routerdc_argmax_and_lambda_buys_savings():
    """On the zoo's A / B / C problem (A dear and nearly always right, C cheap): lambda = 0 is the
    argmax score, and raising lambda moves calls from A to the cheaper solvers."""
    data = synthetic()
    router = fit_router("routerdc", RoutersParams(), data, 0)
    x = data.inputs.take(data.rows("test"))
    assert router.platt[0] > 0
    assert np.array_equal(router.route(x, 0.0)[0], router.scores(x).argmax(axis=1))
    costs = [accuracy_cost(router, data, lam)[1] for lam in router.params.sweep]
    assert costs[-1] < 0.3 * costs[0] and all(b <= a * 1.02 for a, b in zip(costs, costs[1:], strict=False))


def test_routerdc_saves_and_reloads_with_its_own_shapes(tmp_path):
    params = RoutersParams.model_validate({"routerdc": {"hidden": 16, "dim": 8, "epochs": 3}})
    data = topic_data(300)
    router = fit_router("routerdc", params, data, 1)
    loaded, header = load_router(save_router(router, tmp_path / "routerdc.npz", "synthetic", params))
    assert header["params"]["hidden"] == 16 and loaded.fingerprint() == router.fingerprint()
    x = data.inputs.take(data.rows("test"))
    assert all(np.array_equal(a, b) for a, b in zip(router.route(x, 0.2), loaded.route(x, 0.2), strict=True))
    out = loaded.evaluate(x, data.item_ids[data.rows("test")], data.correct[data.rows("test")], data.cost[data.rows("test")],
                          0.2, Verifier("judge", 0.0, 0.0, 0, "configured"), 0)
    assert out.correct.shape == (data.rows("test").size,)


def test_max_steps_bounds_the_fit():
    data = topic_data(300)
    short = RoutersParams.model_validate({"routerdc": {"epochs": 50, "max_steps": 1}})
    once = RoutersParams.model_validate({"routerdc": {"epochs": 1, "max_steps": 1}})
    assert fit_router("routerdc", short, data, 0).fingerprint() == fit_router("routerdc", once, data, 0).fingerprint()


@pytest.mark.parametrize(("section", "key", "match"), [
    ({"routerdc": {"temperature": 0}}, "routers.routerdc.temperature", "greater than 0"),
    ({"routerdc": {"top_k": 0}}, "routers.routerdc.top_k", "greater than or equal to 1"),
    ({"routerdc": {"ties": "first"}}, "routers.routerdc.ties", "'accuracy' or 'random'"),
    ({"routerdc": {"cluster_weight": -1}}, "routers.routerdc.cluster_weight", "greater than or equal to 0"),
    ({"routerdc": {"sweep": []}}, "routers.routerdc.sweep", "at least 1"),
])
def test_bad_routerdc_params_fail_naming_the_key(section, key, match):
    raw = read_yaml(REPO / "params.yaml")
    raw["routers"] = {**raw["routers"], **section}
    with pytest.raises(ConfigError) as e:
        parse_params(raw)
    assert key in str(e.value) and match in str(e.value)
