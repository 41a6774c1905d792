"""The `frugalgpt` scorer cascade: its chain chosen on train, the stop rule on the learned answer scorer,
reference answers bought once per item, operating points that trade cost for accuracy, the split
firewall with answer features, and its params."""

import numpy as np
import pytest

from delegation_lab.errors import ConfigError
from delegation_lab.evaluation import Verifier
from delegation_lab.evaluation.learned import AnswerFeatures
from delegation_lab.routers import Inputs
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.study import RoutingData, carve_dev, fit_router

SOLVERS = ["strong", "mid", "cheap", "dud"]
JUDGE = Verifier("judge", 0.02, 0.03, 0, "configured")


def problem(n: int = 900, models: tuple[str, ...] = ("mid",), seed: int = 0) -> RoutingData:
    """`cheap` is right on 55 %, `mid` 80 %, `strong` 97 %; `dud` is dear and bad (off the Pareto front).
    Agreement with a reference is +1 when both are right, -1 when one is, and +1 a quarter of the time
    when both are wrong; wrong replies run longer."""
    rng = np.random.default_rng(seed)
    skill = np.array([0.97, 0.8, 0.55, 0.3])
    correct = rng.random((n, 4)) < skill
    cost = np.array([2e-3, 2e-4, 1e-5, 3e-3]) * rng.uniform(0.8, 1.2, (n, 4))
    agree = np.zeros((n, 4, len(models)), np.int8)
    for k, m in enumerate(models):
        r = correct[:, [SOLVERS.index(m)]]
        same = np.where(correct & r, 1, np.where(correct ^ r, -1, np.where(rng.random((n, 4)) < 0.25, 1, -1)))
        same[:, SOLVERS.index(m)] = 0
        agree[:, :, k] = same
    own = np.stack([np.ones((n, 4)), np.log1p(rng.uniform(200, 400, (n, 4)) * np.where(correct, 1, 1.6)),
                    np.zeros((n, 4)), np.zeros((n, 4))], axis=2)
    emb = rng.normal(size=(n, 8)).astype(np.float32)
    ids = np.array([f"item{i:04d}" for i in range(n)])
    split = carve_dev(ids, np.where(np.arange(n) < 600, "train", "test"), 0.2, 0)
    inputs = Inputs(emb, np.zeros((n, 4)), AnswerFeatures(tuple(SOLVERS), models, own, agree))
    return RoutingData(ids, split, inputs, correct, cost, SOLVERS, "synthetic")


PARAMS = RoutersParams.model_validate({"frugalgpt": {"sweep": [0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0]}})


def evaluate(data: RoutingData, router, knob: float):
    test = data.rows("test")
    return router.evaluate(data.inputs.take(test), data.item_ids[test], data.correct[test], data.cost[test], knob, JUDGE, 0)


def test_the_chain_runs_cheap_to_expensive_over_the_train_pareto_front():
    data = problem()
    router = fit_router("frugalgpt", PARAMS, data, 0)
    chain = [SOLVERS[j] for j in router.chain]
    assert 2 <= len(chain) <= 3 and "dud" not in chain and chain[-1] == "strong"
    assert list(router.mean_cost[router.chain]) == sorted(router.mean_cost[router.chain])


def test_threshold_moves_cost_and_accuracy_up_together():
    data = problem()
    router = fit_router("frugalgpt", PARAMS, data, 0)
    points = [evaluate(data, router, knob) for knob in router.knobs.values()]
    cost = np.array([p.cost.mean() for p in points])
    accuracy = np.array([p.correct.mean() for p in points])
    assert (np.diff(cost) >= -1e-12).all() and cost[-1] > 3 * cost[0]  # a higher bar escalates more
    assert accuracy[-1] > accuracy[0] + 0.2
    # a middle threshold keeps most of the strong solver's accuracy at a fraction of its cost
    test = data.rows("test")
    strong_acc, strong_cost = data.correct[test, 0].mean(), data.cost[test, 0].mean()
    assert any(a > strong_acc - 0.03 and c < 0.7 * strong_cost for a, c in zip(accuracy, cost, strict=True))


def test_it_stops_where_the_score_clears_the_threshold_and_pays_every_answer_it_bought_once():
    data = problem()
    router = fit_router("frugalgpt", PARAMS, data, 0)
    test = data.rows("test")
    mid, chain = SOLVERS.index("mid"), list(router.chain)
    for knob in (0.5, 0.8):
        out = evaluate(data, router, knob)
        score = out.scores
        for i in range(test.size):
            stage = chain.index(out.chosen[i])
            assert all(score[i, j] < knob for j in chain[:stage])  # escalated past every earlier answer
            assert stage == len(chain) - 1 or score[i, out.chosen[i]] >= knob
            checked = stage > 0 or out.chosen[i] != chain[-1]  # some answer was scored
            assert out.called[i, mid] == (checked or mid in chain[:stage + 1])  # the reference, bought once
            assert set(np.flatnonzero(out.called[i])) == set(chain[:stage + 1]) | ({mid} if checked else set())
        assert np.allclose(out.cost, (data.cost[test] * out.called).sum(axis=1))


def test_a_zero_threshold_keeps_the_first_answer_without_buying_a_check():
    data = problem()
    router = fit_router("frugalgpt", PARAMS, data, 0)
    out = evaluate(data, router, 0.0)
    assert (out.chosen == router.chain[0]).all() and (out.called.sum(axis=1) == 1).all()


def test_without_reference_models_it_buys_only_the_chain():
    data = problem(models=())
    router = fit_router("frugalgpt", PARAMS, data, 0)
    out = evaluate(data, router, 0.8)
    assert not out.called[:, np.setdiff1d(np.arange(4), router.chain)].any()


def test_no_test_label_or_cost_enters_the_fitted_state():
    data = problem()
    before = fit_router("frugalgpt", PARAMS, data, 3).fingerprint()
    test = data.rows("test")
    data.correct[test] = ~data.correct[test]
    data.cost[test] *= 1000.0
    assert fit_router("frugalgpt", PARAMS, data, 3).fingerprint() == before


def test_a_reference_model_that_is_not_routed_is_refused():
    data = problem()
    answers = data.inputs.answers
    data.inputs = Inputs(data.inputs.embedding, data.inputs.text,
                         AnswerFeatures(answers.solvers, ("gpt-9",), answers.own, answers.agree))
    with pytest.raises(ConfigError, match=r"routers\.frugalgpt\.models: gpt-9 not among the routed solvers"):
        fit_router("frugalgpt", PARAMS, data, 0)


@pytest.mark.parametrize(("section", "match"), [
    ({"sweep": [0.5, 1.5]}, "every threshold must lie in"),
    ({"models": ["a", "a"]}, "names repeat"),
    ({"max_length": 0}, "greater than or equal to 1"),
])
def test_bad_params_fail_naming_the_key(section, match):
    with pytest.raises(ValueError, match=match):
        RoutersParams.model_validate({"frugalgpt": section})


def test_the_routers_stage_loads_answer_features_only_for_a_router_that_reads_them(tmp_path):
    from delegation_lab.params.root import load_params
    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.routers.study import load_routing_data

    from tests.routers.test_routers_transfer import write_project

    layout = Layout(write_project(tmp_path / "p"))
    solvers = list(load_params(layout.params_file).solvers)
    without = RoutersParams.model_validate({"routers": ["knn"]})
    assert load_routing_data(layout, solvers, without, ["A"]).inputs.answers is None
    data = load_routing_data(layout, solvers, RoutersParams.model_validate({"routers": ["frugalgpt"]}))
    answers = data.inputs.answers
    assert answers.solvers == tuple(solvers) and answers.models == () and answers.own.shape == (len(data.item_ids), len(solvers), 4)
    # this fake cache parsed "1" for a right answer and "2" for a wrong one, kept no reply text, counted 100 tokens
    assert (answers.own == [1.0, 0.0, np.log1p(100), 1.0]).all()
    # the reference models' answers, compared as the label stage compares: same answer = same correctness
    data = load_routing_data(layout, solvers, RoutersParams.model_validate({"routers": ["frugalgpt"]}), ["A"])
    a = solvers.index("A")
    same = np.where(data.correct == data.correct[:, [a]], 1, -1)
    same[:, a] = 0
    assert data.inputs.answers.models == ("A",) and np.array_equal(data.inputs.answers.agree[..., 0], same)
    with pytest.raises(ConfigError, match=r"routers\.frugalgpt\.models: nobody not among the routed solvers"):
        load_routing_data(layout, solvers, RoutersParams.model_validate({"routers": ["frugalgpt"], "frugalgpt": {"models": ["nobody"]}}))
    with pytest.raises(ConfigError, match=r"evaluation\.verifier\.models \(routers\.frugalgpt\.models null\): nobody"):
        load_routing_data(layout, solvers, RoutersParams.model_validate({"routers": ["frugalgpt"]}), ["nobody"])
