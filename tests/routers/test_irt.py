"""The `irt` router (EmbedLLM / IRT-Router) on answers drawn from a multidimensional IRT model: it
recovers the models' ranking and routes better than chance; `add_model` places a held-out model
from n of its answers without touching anything fitted; the new-model experiment and its command."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.params.root import parse_params, read_yaml
from delegation_lab.routers import Inputs
from delegation_lab.routers.artifact import load_router, save_router
from delegation_lab.routers.irt import IrtRouter, map_ability
from delegation_lab.routers.new_model import new_model_experiment, new_model_markdown, without
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.study import RoutingData, carve_dev, fit_router

from tests.conftest import REPO

N_MODELS, DIM, D_EMB = 8, 3, 24
PARAMS = RoutersParams.model_validate({"seeds": 1, "irt": {"dim": 4, "epochs": 100, "weight_decay": 1e-4}})


def irt_data(n: int = 1200, seed: int = 0) -> RoutingData:
    """Labels drawn from P(right) = sigmoid(a_q . theta_m - b_q), a_q and b_q linear in the (noisy)
    question embedding; specialist models, costs spread over three decades."""
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, D_EMB))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    w_a, w_b = rng.normal(size=(D_EMB, DIM)) * 3.0, rng.normal(size=D_EMB) * 2.0
    a = np.log1p(np.exp(emb @ w_a))
    # specialists: model m is strong on latent dimension m mod DIM only, so the best model depends on the question
    theta = 3.0 * np.eye(DIM)[np.arange(N_MODELS) % DIM] - 1.0 + 0.5 * rng.normal(size=(N_MODELS, DIM))
    correct = rng.random((n, N_MODELS)) < 1.0 / (1.0 + np.exp(-(a @ theta.T - (emb @ w_b)[:, None])))
    cost = np.geomspace(1e-5, 1e-2, N_MODELS) * rng.uniform(0.8, 1.2, (n, N_MODELS))
    ids = np.array([f"q{i:05d}" for i in range(n)])
    split = carve_dev(ids, np.where(np.arange(n) < n // 2, "train", "test"), 0.2, 0)
    return RoutingData(ids, split, Inputs(emb.astype(np.float32), np.ones((n, 4))), correct, cost,
                       [f"m{j}" for j in range(N_MODELS)], "synthetic")


@pytest.fixture(scope="module")
def data() -> RoutingData:
    return irt_data()


@pytest.fixture(scope="module")
def fitted(data) -> IrtRouter:
    return fit_router("irt", PARAMS, data, 0)


def test_it_recovers_the_model_ranking_and_routes_better_than_chance(data, fitted):
    test = data.rows("test")
    x, correct = data.inputs.take(test), data.correct[test]
    predicted = fitted.predict(x)[0]
    rho = stats.spearmanr(predicted.mean(axis=0), correct.mean(axis=0)).statistic
    assert rho > 0.9
    chosen, _, _ = fitted.route(x, 0.0)
    routed = correct[np.arange(len(test)), chosen].mean()
    # random choice scores the models' mean accuracy; per-question routing beats even the best single model
    assert routed > correct.mean() + 0.3 and routed > correct.mean(axis=0).max() + 0.1
    # a cost weight moves it to cheaper models
    assert data.cost[test][np.arange(len(test)), fitted.route(x, 1.6)[0]].mean() < 0.5 * data.cost[test][np.arange(len(test)), chosen].mean()


def test_add_model_places_a_held_out_model_and_touches_nothing_fitted(data):
    fit, test = data.rows("train"), data.rows("test")
    h = 5
    base = fit_router("irt", PARAMS, without(data, h), 0)
    before = {k: v.copy() for k, v in base.arrays().items()}
    actual = data.correct[test, h].mean()
    errors = {}
    for n in (0, 200):
        router = copy.deepcopy(base)
        rows = fit[:n]
        router.add_model("m5", data.inputs.take(rows), data.correct[rows, h], float(data.cost[fit, h].mean()))
        after = router.arrays()
        for key, value in before.items():  # the question network and the other abilities, bit for bit
            assert np.array_equal(after[key][: value.shape[0]], value), key
        assert after["w.ability"].shape[0] == N_MODELS and router.solvers[-1] == "m5"
        assert router.mean_cost.shape == (N_MODELS,) and router.reference_cost == router.mean_cost.max()
        errors[n] = abs(router.predict(data.inputs.take(test))[0][:, -1].mean() - actual)
    assert np.allclose(copy.deepcopy(base).abilities().mean(axis=0), base.abilities().mean(axis=0))
    assert errors[200] < 0.05 and errors[200] < errors[0] / 2, errors


def test_a_router_with_an_added_model_saves_and_reloads_for_dlab_route(fitted, data, tmp_path):
    router = copy.deepcopy(fitted)
    rows = data.rows("train")[:30]
    router.add_model("new", data.inputs.take(rows), data.correct[rows, 0], 2e-3)
    loaded, header = load_router(save_router(router, tmp_path / "irt.npz", "synthetic", PARAMS))
    assert header["solvers"][-1] == "new" and loaded.fingerprint() == router.fingerprint()
    x = data.inputs.take(data.rows("test")[:40])
    for knob in router.knobs.values():
        assert all(np.array_equal(u, v) for u, v in zip(router.route(x, knob), loaded.route(x, knob), strict=True))


@pytest.mark.parametrize("section", [{"hidden": 8, "noise": 0.05}, {"dim": 1}])
def test_a_hidden_layer_noise_and_one_dimension_fit_add_and_reload(section, data, tmp_path):
    params = RoutersParams.model_validate({"seeds": 1, "irt": {"epochs": 20, **section}})
    router = fit_router("irt", params, data, 3)
    assert fit_router("irt", params, data, 3).fingerprint() == router.fingerprint()  # the noise is seeded
    rows = data.rows("train")[:50]
    router.add_model("new", data.inputs.take(rows), data.correct[rows, 1], 1e-3)
    loaded, _ = load_router(save_router(router, tmp_path / "irt.npz", "synthetic", params))
    x = data.inputs.take(data.rows("test")[:20])
    assert np.array_equal(loaded.predict(x)[0], router.predict(x)[0])


def test_with_no_answers_the_new_model_is_the_average_model(fitted, data):
    router = copy.deepcopy(fitted)
    router.add_model("new", data.inputs.take(np.array([], dtype=int)), np.zeros(0, bool), 1e-3)
    assert np.allclose(router.abilities()[-1], fitted.abilities().mean(axis=0))


def test_map_ability_solves_the_penalised_logistic_regression():
    rng = np.random.default_rng(1)
    a, b = np.abs(rng.normal(size=(400, 3))), rng.normal(size=400)
    truth = np.array([1.0, -0.5, 2.0])
    y = (rng.random(400) < 1 / (1 + np.exp(-(a @ truth - b)))).astype(float)
    theta = map_ability(a, b, y, np.zeros(3), 0.1 * np.eye(3))
    p = 1 / (1 + np.exp(-(a @ theta - b)))
    assert np.allclose(a.T @ (y - p) - 0.1 * theta, 0, atol=1e-8)  # the gradient vanishes: the optimum
    assert np.abs(theta - truth).max() < 0.6


def test_add_model_refuses_a_routed_name_and_mismatched_labels(fitted, data):
    x = data.inputs.take(np.arange(3))
    with pytest.raises(ValueError, match="already routed"):
        copy.deepcopy(fitted).add_model("m0", x, np.ones(3, bool), 1e-3)
    with pytest.raises(ValueError, match="3 questions but 2 labels"):
        copy.deepcopy(fitted).add_model("new", x, np.ones(2, bool), 1e-3)


@pytest.mark.parametrize(("section", "key", "match"), [
    ({"irt": {"dim": 0}}, "routers.irt.dim", "greater than or equal to 1"),
    ({"irt": {"noise": -0.1}}, "routers.irt.noise", "greater than or equal to 0"),
    ({"irt": {"sweep": []}}, "routers.irt.sweep", "at least 1"),
    ({"irt": {"theta_dim": 4}}, "routers.irt.theta_dim", "unknown key"),
])
def test_bad_irt_params_fail_with_one_line_naming_the_key(section, key, match):
    raw = read_yaml(REPO / "params.yaml")
    raw["routers"] = {**raw["routers"], **section}
    with pytest.raises(ConfigError) as e:
        parse_params(raw)
    header, *errors = str(e.value).splitlines()
    assert header == "params.yaml: invalid configuration" and len(errors) == 1  # one line, naming the key
    assert errors[0].strip().startswith(f"{key}: ") and match in errors[0]


def test_the_new_model_experiment_improves_with_answers(data):
    """One specialist per latent dimension: the held-out best one is covered by no other model, so
    placing it from its answers pays; the question network, fitted without it, caps the gain."""
    specialists = replace(data, correct=data.correct[:, :DIM], cost=data.cost[:, :DIM], solvers=data.solvers[:DIM])
    result = new_model_experiment(specialists, PARAMS, IntervalParams(resamples=200), answers=(0, 10, 200), lambdas=(0.0,),
                                  top=1, random=0)
    assert result["held_out"] == [specialists.solvers[int(np.argmax(specialists.correct[specialists.rows("train")].mean(axis=0)))]]
    rows = {r["answers"]: r for r in result["summary"]["0"]}
    assert rows[0]["share_to_new"] == 0 and rows[0]["vs_retrained"]["ci_high"] < 0  # an average model is never routed to
    assert rows[200]["accuracy"] > rows[0]["accuracy"] + 0.05 and rows[200]["share_to_new"] > 0.2
    assert rows[200]["ability_error"] < rows[0]["ability_error"] / 2
    assert rows[200]["accuracy"] <= rows["retrained"]["accuracy"]
    text = new_model_markdown({"project": "synthetic", **result})
    assert "| 200 |" in text and "| retrained |" in text and "λ = 0," in text


def test_with_models_that_share_its_strengths_n_answers_reach_the_retrain(data):
    result = new_model_experiment(data, PARAMS, IntervalParams(resamples=200), answers=(0, 200), lambdas=(0.0,), top=1, random=0)
    rows = {r["answers"]: r for r in result["summary"]["0"]}
    assert abs(rows[200]["accuracy"] - rows["retrained"]["accuracy"]) < 0.02
    assert rows[200]["ability_error"] < 0.05 < rows[0]["ability_error"]


def test_dlab_new_model_on_a_folder_without_a_project_exits_2_with_one_line(tmp_path):
    done = CliRunner().invoke(app, ["new-model", str(tmp_path)])
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [f"error: {tmp_path}/params.yaml: not found; {tmp_path} is not a project folder"]


def test_out_of_range_answers_are_an_input_error(data):
    with pytest.raises(InputError, match=r"--answers \[10000\]: each n must lie in \[0, "):
        new_model_experiment(data, PARAMS, IntervalParams(resamples=100), answers=(10000,), lambdas=(0.0,), top=1, random=0)
