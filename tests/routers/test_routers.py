"""The router zoo: each router on a synthetic routing problem, the split firewall, bad params, saved
models, and (slow) `dvc repro routers` on the smoke profile with `dlab route`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from delegation_lab.params.root import load_params, parse_params, read_yaml
from delegation_lab.errors import ConfigError
from delegation_lab.evaluation import Verifier
from delegation_lab.evaluation.learned import AnswerFeatures
from delegation_lab.routers import LEARNED, ROUTERS, Inputs
from delegation_lab.routers.artifact import load_router, save_router
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.study import RoutingData, carve_dev, fit_router, outcome_frame, run_study, summary_rows
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA, SUMMARY_SCHEMA

from tests.conftest import BIN, REPO, run

SOLVERS = ["A", "B", "C"]


def synthetic(n: int = 900, seed: int = 0) -> RoutingData:
    """Questions in 6 topics (embedding clusters); topic sets difficulty; C is cheap and fails hard
    topics, A is dear and almost always right, B in between."""
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, 6, n)
    centres = rng.normal(size=(6, 32))
    emb = centres[topic] + 0.3 * rng.normal(size=(n, 32))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    difficulty = topic + 1
    p = np.stack([np.full(n, 0.97), 1.0 - 0.08 * difficulty, 1.05 - 0.17 * difficulty], axis=1).clip(0.02, 0.99)
    correct = rng.random((n, 3)) < p
    cost = np.array([2e-3, 4e-4, 3e-5]) * rng.uniform(0.8, 1.2, (n, 3))
    text = np.stack([rng.integers(50, 300, n), rng.integers(10, 60, n), rng.integers(0, 10, n), difficulty], axis=1).astype(float)
    ids = np.array([f"item{i:04d}" for i in range(n)])
    split = carve_dev(ids, np.where(np.arange(n) < 600, "train", "test"), 0.25, 0)
    return RoutingData(ids, split, Inputs(emb.astype(np.float32), text, synthetic_answers(correct, rng)), correct, cost,
                       SOLVERS, "synthetic")


def synthetic_answers(correct: np.ndarray, rng: np.random.Generator) -> AnswerFeatures:
    """What the routers that read answers see: every answer has a final answer; wrong ones run longer."""
    n, s = correct.shape
    chars = np.log1p(rng.uniform(200, 400, (n, s)) * np.where(correct, 1.0, 2.0))
    own = np.stack([np.ones((n, s)), chars, np.zeros((n, s)), np.zeros((n, s))], axis=2)
    return AnswerFeatures(tuple(SOLVERS), (), own, np.zeros((n, s, 0), np.int8))


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The study fits with `routers.torch_threads` (1); the tests that call `fit_router` directly do
    too: two threads on the loaded 2-core machine made the small torch fits up to 40x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


FAST = RoutersParams.model_validate({
    "seeds": 1, "mlp": {"epochs": 15}, "mf": {"epochs": 20}, "threshold": {"epochs": 30}, "learned_cascade": {"epochs": 30},
    "knn": {"k": 15, "search_dim": 16}, "cluster": {"clusters": 6},
})
JUDGE = Verifier("judge", 0.02, 0.03, 0, "configured")


@pytest.fixture(scope="module")
def study():
    data = synthetic()
    return data, run_study(data, FAST, JUDGE)


def test_every_router_draws_a_curve_between_the_cheap_and_the_strong_solver(study):
    data, result = study
    test = data.rows("test")
    acc_single = data.correct[test].mean(axis=0)
    rows = pl.DataFrame(summary_rows(result, "synthetic", JUDGE.name))
    assert set(rows["method"]) == set(ROUTERS.names())
    for name in ROUTERS.names():
        part = rows.filter(pl.col("method") == name)
        expected = 1 if name == "best_single" else len(getattr(FAST, name).sweep)
        assert part.height == expected, name
        assert (part["n_items"] == test.size).all() and (part["verifier"] == JUDGE.name).all()
    for name in LEARNED:
        part = rows.filter(pl.col("method") == name)
        # its most accurate point beats the cheap solver clearly; its cheapest point costs well under the strong one
        assert part["accuracy"].max() > acc_single[2] + 0.1, name
        assert part["cost_per_item_usd"].min() < 0.6 * data.cost[test, 0].mean(), name
    knn = rows.filter(pl.col("method") == "knn").sort("operating_point")
    lam0 = knn.filter(pl.col("operating_point") == "lambda=0").row(0, named=True)
    lam_big = knn.filter(pl.col("operating_point") == "lambda=1.6").row(0, named=True)
    assert lam_big["cost_per_item_usd"] < lam0["cost_per_item_usd"]  # a cost weight buys savings


def test_a_learned_router_beats_random_mixing_at_equal_cost(study):
    """The topics make routing easy: kNN at a middle lambda dominates the random router's curve."""
    data, result = study
    rows = pl.DataFrame(summary_rows(result, "synthetic", JUDGE.name))
    rand = rows.filter(pl.col("method") == "random").sort("cost_per_item_usd")
    knn = rows.filter(pl.col("method") == "knn")
    for r in knn.iter_rows(named=True):
        random_acc = np.interp(r["cost_per_item_usd"], rand["cost_per_item_usd"].to_numpy(), rand["accuracy"].to_numpy())
        assert r["accuracy"] >= random_acc - 0.02, r["operating_point"]
    assert any(r["accuracy"] > np.interp(r["cost_per_item_usd"], rand["cost_per_item_usd"].to_numpy(), rand["accuracy"].to_numpy()) + 0.05
               for r in knn.iter_rows(named=True))


def test_threshold_calibration_hits_the_target_strong_share_on_dev(study):
    data, result = study
    router = result.fitted["threshold"]
    dev = data.rows("dev")
    for label, thr in router.knobs.items():
        share = float(label.split("=")[1])
        chosen, _ = router._choose(data.inputs.take(dev), thr)
        assert abs((chosen == router.strong).mean() - share) < 0.03, label


def test_learned_cascade_stops_only_where_the_shared_verifier_accepts(study):
    data, result = study
    test = data.rows("test")
    for p in result.points:
        if p.router != "learned_cascade" or p.split != "test":
            continue
        o = p.outcome
        last = result.fitted["learned_cascade"].order[-1]
        stopped_early = o.chosen != last
        verdict = np.array([JUDGE.accepts(SOLVERS[j], data.item_ids[test][i], data.correct[test][i, j], p.seed)[()]
                            for i, j in enumerate(o.chosen)])
        assert verdict[stopped_early].all()
        assert np.allclose(o.cost, (data.cost[test] * o.called).sum(axis=1))


def test_outcomes_say_whether_a_right_answer_was_within_reach_and_what_the_answer_cost(study):
    """The oracle-gap columns (frontier/gap.py): a router that calls one solver held a right answer
    exactly where it was right; the learned cascade's chain (`reach`) holds every answer it called and
    every later member a false acceptance cut off; only frugalgpt pays for checks (its reference answers)."""
    data, result = study
    test = data.rows("test")
    frame = outcome_frame(result, "x", JUDGE.name)
    assert frame.columns == list(OUTCOME_SCHEMA)
    rows = np.arange(test.size)
    for p in (p for p in result.points if p.split == "test"):
        got = frame.filter((pl.col("method") == p.router) & (pl.col("operating_point") == p.operating_point))
        held = got["held_right"].to_numpy()
        np.testing.assert_allclose(got["answer_cost_usd"].to_numpy(), data.cost[test][rows, p.outcome.chosen])
        assert (held >= got["correct"].to_numpy()).all()
        checks = got["check_cost_usd"].to_numpy()
        if p.router == "frugalgpt":  # its reference answers bought for a check, and its whole chain within reach
            chain = list(result.fitted["frugalgpt"].chain)
            walked = np.array([sum(data.cost[test][i, j] for j in chain[:chain.index(k) + 1]) for i, k in enumerate(p.outcome.chosen)])
            np.testing.assert_allclose(checks, got["cost_usd"].to_numpy() - walked, atol=1e-15)  # the rest of the bill: the checks
            np.testing.assert_array_equal(held, (p.outcome.reach & data.correct[test]).any(axis=1))
            continue
        assert (checks == 0).all()
        if p.router != "learned_cascade":
            np.testing.assert_array_equal(held, got["correct"].to_numpy())
            continue
        assert (p.outcome.reach >= p.outcome.called).all()
        np.testing.assert_array_equal(held, (p.outcome.reach & data.correct[test]).any(axis=1))


def _fingerprints(data: RoutingData) -> dict[str, str]:
    return {name: fit_router(name, FAST, data, 7).fingerprint() for name in ROUTERS.names()}


def test_split_firewall_no_router_reads_test_labels_or_costs():
    data = synthetic()
    before = _fingerprints(data)
    test = data.rows("test")
    data.correct[test] = ~data.correct[test]  # poison: every test label flipped, every test cost x 1000
    data.cost[test] *= 1000.0
    assert _fingerprints(data) == before


def test_the_firewall_check_would_catch_a_router_that_reads_test_labels():
    """The fingerprint is sensitive: moving the test items into train changes every learned router's state."""
    data = synthetic()
    before = _fingerprints(data)
    leaky = RoutingData(data.item_ids, np.where(data.split == "test", "train", data.split), data.inputs, data.correct,
                        data.cost, data.solvers, data.embedder)
    after = _fingerprints(leaky)
    assert all(after[n] != before[n] for n in LEARNED)


def test_dev_split_is_carved_from_train_by_item_hash_only():
    ids = np.array([f"x{i}" for i in range(2000)])
    split = np.where(np.arange(2000) < 1500, "train", "test")
    dev = carve_dev(ids, split, 0.2, 0)
    assert set(dev[1500:]) == {"test"} and 0.15 < (dev[:1500] == "dev").mean() < 0.25
    assert (carve_dev(ids[::-1], split[::-1], 0.2, 0)[::-1] == dev).all()  # order-free


@pytest.mark.parametrize(("section", "key", "match"), [
    ({"routers": ["knn", "gbdt"]}, "routers.routers.1", "Input should be"),
    ({"knn": {"k": 0}}, "routers.knn.k", "greater than 0"),
    ({"mlp": {"sweep": []}}, "routers.mlp.sweep", "at least 1"),
    ({"cluster": {"clusters": -1}}, "routers.cluster.clusters", "greater than 0"),
    ({"knn": {"neighbours": 5}}, "routers.knn.neighbours", "unknown key"),
])
def test_bad_router_params_fail_naming_the_key(section, key, match):
    raw = read_yaml(REPO / "params.yaml")
    raw["routers"] = {**raw["routers"], **section}
    with pytest.raises(ConfigError) as e:
        parse_params(raw)
    assert key in str(e.value) and match in str(e.value)


def test_default_params_carry_every_router_with_several_points():
    params = load_params(REPO / "params.yaml").routers
    assert tuple(params.routers) == ROUTERS.names()
    assert all(len(getattr(params, n).sweep) >= 5 for n in LEARNED)


def test_saved_router_reloads_and_routes_identically(study, tmp_path):
    data, result = study
    x = data.inputs.take(data.rows("test")[:50])
    for name, router in result.fitted.items():
        path = save_router(router, tmp_path / f"{name}.npz", "hashing-32", FAST)
        loaded, header = load_router(path)
        assert header["router"] == name and header["solvers"] == SOLVERS
        assert loaded.fingerprint() == router.fingerprint()
        for knob in router.knobs.values():
            a, b = router.route(x, knob), loaded.route(x, knob)
            assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True)), name


# ------------------------------------------------------------------------------- end to end


@pytest.fixture
def routers_project(smoke_dag) -> Path:
    return smoke_dag[0]  # the session's smoke DAG ran `routers`


@pytest.mark.slow
def test_repro_routers_writes_summaries_outcomes_trajectories_metrics_models(routers_project):
    project = routers_project
    summaries = pl.read_parquet(project / "results" / "summaries" / "routers.parquet")
    assert list(summaries.columns) == list(SUMMARY_SCHEMA) and (summaries["split"] == "test").all()
    assert summaries["verifier"].n_unique() == 1 and summaries["verifier"][0].startswith("judge(")
    assert set(summaries["method"]) == set(ROUTERS.names()) and summaries.join(pl.read_parquet(project / "results" / "runs" / "routers.parquet"), on=["study", "method", "seed", "split", "operating_point"], how="left")["run_id"].null_count() == 0
    outcomes = pl.read_parquet(project / "results" / "outcomes" / "routers.parquet")
    assert list(outcomes.columns) == list(OUTCOME_SCHEMA)
    per_point = outcomes.group_by("method", "operating_point", "seed").agg(pl.col("correct").mean(), pl.col("cost_usd").mean(), pl.len())
    joined = summaries.join(per_point, on=["method", "operating_point", "seed"], how="left")
    assert joined["len"].null_count() == 0 and (joined["len"] == joined["n_items"]).all()
    assert np.allclose(joined["correct"], joined["accuracy"]) and np.allclose(joined["cost_usd"], joined["cost_per_item_usd"])
    metrics = json.loads((project / "metrics" / "routers.json").read_text())
    assert metrics["embedding"]["name"].startswith("hashing") and metrics["embedding"]["fallback"]
    for name in LEARNED:
        ops = metrics["routers"][name]["operating_points"]
        assert len(ops) >= 5 and all(o["accuracy_ci"][0] <= o["accuracy"] <= o["accuracy_ci"][1] for o in ops)
        assert set(metrics["routers"][name]["field"]) == {"gain_at_best_single", "gap_at_oracle", "cost_save", "pareto_dist", "arena_score"}
    part = pl.read_parquet(next((project / "results" / "trajectories" / "study=routers" / "method=knn.lambda_0" / "seed=0").glob("*.parquet")))
    assert part.height == summaries["n_items"][0] and "scores" in json.loads(part["extra"][0])
    assert {p.stem for p in (project / "models" / "routers").glob("*.npz")} == set(ROUTERS.names())
    out = run([str(BIN / "dlab"), "route", "--router", "mlp", "--op", "lambda=0.2", "What is 4 times 7 plus 2?"], project).stdout
    assert "router mlp at lambda=0.2" in out and "expected cost $" in out
    bad = run([str(BIN / "dlab"), "route", "--router", "mlp", "--op", "lambda=9", "q"], project, check=False)
    assert bad.returncode == 1 and "no operating point 'lambda=9'" in bad.stderr


def test_approximate_knn_search_predicts_like_the_exact_one():
    data = synthetic(n=3000)
    data.split[:2400] = np.where(data.split[:2400] == "test", "train", data.split[:2400])
    approx = RoutersParams.model_validate({"knn": {"k": 15, "search_dim": 16, "cells": 8, "probe": 3}})
    exact = RoutersParams.model_validate({"knn": {"k": 15, "search_dim": 16, "cells": 0}})
    a, e = fit_router("knn", approx, data, 0), fit_router("knn", exact, data, 0)
    assert a.candidates.shape[0] == 8 and e.candidates.shape[0] == 0
    x = data.inputs.take(data.rows("test"))
    diff = np.abs(a.predict(x)[0] - e.predict(x)[0])
    assert diff.mean() < 0.02 and np.quantile(diff, 0.99) < 0.15


def test_threshold_pair_naming_an_unknown_solver_fails_naming_the_key():
    params = RoutersParams.model_validate({"threshold": {"strong": "Z"}})
    with pytest.raises(ConfigError, match=r"routers.threshold.strong: unknown solver 'Z'"):
        fit_router("threshold", params, synthetic(300), 0)


def test_trajectory_rows_carry_the_features_scores_and_the_kept_solver(study):
    from delegation_lab.routers.study import trajectory_frame

    data, result = study
    point = next(p for p in result.points if p.router == "mf" and p.split == "test")
    frame = trajectory_frame(result, point)
    extra = json.loads(frame["extra"][0])
    assert frame.height == data.rows("test").size and extra["features"] == "embedding" and len(extra["scores"]) == 3
    assert (frame["action"].to_numpy() == np.array(SOLVERS)[point.outcome.chosen]).all()
