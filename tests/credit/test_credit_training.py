"""The credit study's environment and SHARP optimisation: params refusals, tool outcomes against
their spec, agent-specific vs trajectory-level advantages, the p-selection of credited agents,
seeds batched = seeds alone, learning, and the held-out evaluation's common draws."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from delegation_lab.params.root import parse_params
from delegation_lab.credit.env import (
    DISTRACTOR,
    EVIDENCE,
    NONE,
    TOOL_NAMES,
    TeamGame,
    ToolTable,
    make_draws,
    make_pool,
    team_rollouts,
    tool_outcome,
)
from delegation_lab.credit.evaluate import accuracy_now, evaluate, make_eval_set
from delegation_lab.credit.grpo import Trainer, group_normalise, method_spec, train, train_methods
from delegation_lab.credit.params import CreditParams, EnvParams
from delegation_lab.credit.shapley import shapley
from delegation_lab.credit.study import make_pools
from delegation_lab.pipeline.torch_runtime import resolve_device
from delegation_lab.errors import ConfigError, InputError

from tests.conftest import REPO

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small(**overrides) -> CreditParams:
    base = dict(seeds=2, iterations=6, tasks_per_batch=6, train_tasks=300, test_tasks=120, eval_replicates=2,
                eval_every=3, p_sweep=[0.5])
    base.update(overrides)
    return CreditParams(**base)


# --------------------------------------------------------------------------------------- params


@pytest.mark.parametrize(("key", "value", "message"), [
    ("alpha", -0.1, "credit.alpha"),
    ("beta", -1.0, "credit.beta"),
    ("gamma", -0.5, "credit.gamma"),
    ("p_sweep", [0.0], "p = 0 is method no_shapley"),
    ("p_sweep", [1.0], "strictly between 0 and 1"),
    ("methods", ["sharp", "sharp"], "must not repeat"),
    ("methods", ["sharp", "shapley"], "credit.methods.1"),
    ("group_size", 1, "credit.group_size"),
    ("token_cost", -0.01, "credit.token_cost"),
])
def test_bad_params_name_the_key(key, value, message):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["credit"][key] = value
    with pytest.raises(ConfigError) as e:
        parse_params(raw)
    assert message in str(e.value)


def test_zero_weights_and_bad_env_are_refused():
    with pytest.raises(ValueError, match="all 0"):
        CreditParams(alpha=0.0, beta=0.0, gamma=0.0)
    with pytest.raises(ValueError, match="sum to 1"):
        EnvParams(hop_probs=[0.5, 0.4])
    with pytest.raises(ValueError, match="Beta"):
        EnvParams(familiarity=[0.0, 1.0])
    # 5 hops x 2 workers + the planner = 11 agents: refused before training, not mid-run by the Shapley pass
    with pytest.raises(ValueError, match="= 11 agents, above the exact-Shapley limit of 10"):
        EnvParams(hop_probs=[0.25, 0.25, 0.25, 0.25])
    assert EnvParams(hop_probs=[0.25, 0.25, 0.25, 0.25], max_workers_per_hop=1).max_hops == 5
    assert EnvParams(hop_probs=[0.1, 0.2, 0.3, 0.2, 0.2], max_workers_per_hop=1).max_hops == 6


def test_a_cuda_device_without_cuda_is_an_input_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(InputError, match="credit.device"):
        resolve_device("cuda", "credit.device")
    assert resolve_device("auto").type == "cpu"


# ---------------------------------------------------------------------------------- environment


@pytest.mark.parametrize("tool", range(len(TOOL_NAMES)))
def test_tool_outcomes_follow_their_spec(tool):
    env = EnvParams()
    tools = ToolTable.of(env)
    rng = np.random.default_rng(tool)
    n = 200_000
    d = np.full(n, 0.5)
    a = np.full(n, 0.25)
    t = np.full(n, tool)
    out, valid = tool_outcome(env, tools, t, rng.random(n), rng.random(n), d, a, 1.0, 1.0)
    spec = getattr(env.tools, TOOL_NAMES[tool])
    hit = spec.hit * (1 - spec.difficulty_slope * 0.5)
    dis = min(spec.distract * env.ambiguity_scale * 0.25, 1 - hit)
    ok = 1 - spec.invalid
    assert valid.mean() == pytest.approx(ok, abs=0.005)
    assert (out == EVIDENCE).mean() == pytest.approx(ok * hit, abs=0.005)
    assert (out == DISTRACTOR).mean() == pytest.approx(ok * dis, abs=0.005)
    # the raw question (planner masked) finds less on the same draws and never more
    raw, _ = tool_outcome(env, tools, t, *(np.random.default_rng(tool).random(n) for _ in range(1)),
                          np.random.default_rng(tool + 100).random(n), d, a, env.unfocused_hit, env.unfocused_distract)
    assert (raw == EVIDENCE).mean() <= (out == EVIDENCE).mean() + 0.01


def test_team_rollouts_answer_right_iff_every_hop_is_right():
    env = EnvParams()
    tools = ToolTable.of(env)
    rng = np.random.default_rng(0)
    pool = make_pool(env, 500, rng)
    K = env.max_workers_per_hop
    task = np.arange(pool.n)
    n_workers = rng.integers(0, K + 1, (pool.n, pool.max_hops))
    tool = rng.integers(0, 4, (pool.n, pool.max_hops, K))
    roll = team_rollouts(env, tools, pool, task, n_workers, tool, make_draws(rng, (pool.n,), pool.max_hops, K))
    correct, tokens = TeamGame(roll, 0.0).full()
    ev = (roll.out_focused == EVIDENCE).any(-1)
    ds = (roll.out_focused == DISTRACTOR).any(-1)
    hop_ok = ~ds & (ev | roll.recall)
    np.testing.assert_array_equal(correct, (hop_ok | ~roll.hop_present).all(axis=1))
    assert not (roll.worker_present & ~roll.hop_present[..., None]).any()  # no worker on an absent hop
    assert (roll.out_focused[~roll.worker_present] == NONE).all()
    expected = (env.planner_tokens + env.planner_tokens_per_hop * pool.hops + env.planner_tokens_per_worker
                * roll.worker_present.sum(axis=(1, 2)) + np.where(roll.worker_present, tools.tokens[tool], 0).sum(axis=(1, 2)))
    np.testing.assert_allclose(tokens, expected)


# --------------------------------------------------------------------------------- advantages


def test_group_normalise_is_per_group_and_ignores_masked_entries():
    rng = np.random.default_rng(0)
    r = rng.normal(size=(2, 3, 8, 5))
    mask = rng.random(r.shape) < 0.7
    adv = group_normalise(r, mask, 1e-6)
    for s in range(2):
        for b in range(3):
            a = adv[s, b][mask[s, b]]
            assert a.mean() == pytest.approx(0.0, abs=1e-9)
            assert a.std() == pytest.approx(1.0, abs=1e-4)
    assert (adv[~mask] == 0).all()
    flat = group_normalise(np.ones((1, 2, 8)), np.ones((1, 2, 8), dtype=bool), 1e-6)
    assert (flat == 0).all()  # a group whose rewards are all equal teaches nothing


def test_sharp_normalises_per_agent_its_controls_per_role_or_team_and_broadcast_per_trajectory():
    p = small()
    train_pool, _ = make_pools(p)
    for name in ("sharp", "sharp_role_norm", "sharp_team_norm", "broadcast"):
        tr = Trainer(method_spec(name, p), p, train_pool, [0, 1], CPU)
        b = tr.collect()
        S, B, G = 2, p.tasks_per_batch, p.group_size
        H, K = tr.H, tr.K
        adv_p = b.decisions[0].advantage.numpy().reshape(S, B, G, H)[..., 0]
        adv_w = b.decisions[1].advantage.numpy().reshape(S, B, G, H * K)
        present = TeamGame(b.team, p.token_cost).present.reshape(S, B, G, -1)
        adv = np.concatenate([adv_p[..., None], adv_w], axis=-1)  # [S, B, G, slots]
        r = b.agent_reward.reshape(S, B, G, -1)
        if name != "broadcast":
            np.testing.assert_allclose(b.agent_reward, np.where(
                present.reshape(S * B * G, -1),
                p.alpha * b.correct.reshape(-1)[:, None] + p.beta * b.credit + p.gamma * b.tool_reward, 0.0))
        if name == "sharp":
            # each agent slot over the mini-batch's rollouts in which it acts (Appendix C)
            for s in range(S):
                for slot in range(present.shape[-1]):
                    here = present[s, ..., slot]
                    if here.sum() > 1 and np.ptp(r[s, ..., slot][here]) > 0:
                        assert adv[s, ..., slot][here].mean() == pytest.approx(0.0, abs=1e-5)
                        assert adv[s, ..., slot][here].std() == pytest.approx(1.0, abs=1e-3)
            assert (adv[~present] == 0).all()
        elif name == "sharp_role_norm":
            # within the question's group: the planner's G rewards among themselves, the workers' pooled
            np.testing.assert_allclose(adv_p, group_normalise(r[..., 0], np.ones_like(r[..., 0], dtype=bool),
                                                              p.adv_delta), atol=1e-5)
            np.testing.assert_allclose(adv_w, group_normalise(r[..., 1:], present[..., 1:], p.adv_delta), atol=1e-5)
        elif name == "sharp_team_norm":
            np.testing.assert_allclose(adv, group_normalise(r, present, p.adv_delta), atol=1e-5)
        else:
            # every agent of a rollout gets the rollout's advantage, and only the global reward counts
            np.testing.assert_allclose(adv_w, np.where(present[..., 1:], adv_p[..., None], adv_w), atol=1e-6)
            np.testing.assert_allclose(adv_p, group_normalise(b.correct.reshape(S, B, G).astype(float),
                                                              np.ones((S, B, G), dtype=bool), p.adv_delta), atol=1e-5)
            assert (b.credit == 0).all() and b.coalitions.sum() == 0


def test_methods_batched_in_one_ensemble_train_like_each_alone():
    p = small(iterations=3)
    train_pool, _ = make_pools(p)
    names = ["no_shapley", "sharp_loo", "sharp_p0.5"]
    together = train_methods([method_spec(n, p) for n in names], p, train_pool, [0, 1], CPU)
    for name, res in zip(names, together, strict=True):
        alone = train(method_spec(name, p), p, train_pool, [0, 1], CPU)
        assert res.spec.name == name
        np.testing.assert_allclose(res.curves["accuracy"], alone.curves["accuracy"])
        np.testing.assert_allclose(res.curves["tokens"], alone.curves["tokens"])
        np.testing.assert_allclose(res.curves["coalitions"], alone.curves["coalitions"])
    assert not np.allclose(together[0].curves["coalitions"], together[1].curves["coalitions"])


def test_p_selects_the_credited_invocations():
    p = small(tasks_per_batch=20)
    train_pool, _ = make_pools(p)
    res = {}
    for name in ("no_shapley", "sharp_p0.5", "sharp"):
        tr = Trainer(method_spec(name, p), p, train_pool, [3], CPU)
        b = tr.collect()
        present = TeamGame(b.team, p.token_cost).present
        res[name] = (b, present)
    b, present = res["no_shapley"]
    assert (b.credit == 0).all() and b.coalitions.sum() == 0
    b, present = res["sharp"]
    exact = shapley(TeamGame(b.team, p.token_cost)).credit
    np.testing.assert_allclose(b.credit, exact)  # p = 1: everyone gets its exact Shapley value
    assert b.coalitions[0] == (2.0 ** present.sum(axis=1)).sum()
    b, present = res["sharp_p0.5"]
    exact = shapley(TeamGame(b.team, p.token_cost)).credit
    given = present & (b.credit != 0)
    np.testing.assert_allclose(b.credit[given], exact[given])
    share = (present & np.isclose(b.credit, exact) & (exact != 0)).sum() / (present & (exact != 0)).sum()
    assert 0.35 < share < 0.65


def test_seeds_batched_train_like_seeds_alone():
    p = small(iterations=4)
    train_pool, _ = make_pools(p)
    spec = method_spec("sharp", p)
    both = train(spec, p, train_pool, [0, 1], CPU)
    alone = train(spec, p, train_pool, [1], CPU)
    np.testing.assert_allclose(both.curves["accuracy"][1], alone.curves["accuracy"][0])
    np.testing.assert_allclose(both.curves["tokens"][1], alone.curves["tokens"][0])
    assert not np.allclose(both.curves["tokens"][0], both.curves["tokens"][1])  # seeds differ


def test_training_raises_held_out_accuracy():
    p = small(seeds=2, iterations=40, tasks_per_batch=16, test_tasks=300, eval_every=40)
    train_pool, test_pool = make_pools(p)
    ev = make_eval_set(p, test_pool)
    res = train(method_spec("sharp", p), p, train_pool, [0, 1], CPU, lambda tr: accuracy_now(tr, ev))
    before, after = res.eval_accuracy[:, 0], res.eval_accuracy[:, -1]
    assert res.eval_iterations == [0, 40]
    assert (after > before + 0.1).all(), (before, after)


def test_evaluation_uses_common_draws_and_reports_coordination_metrics():
    p = small()
    train_pool, test_pool = make_pools(p)
    ev = make_eval_set(p, test_pool)
    assert np.array_equal(make_eval_set(p, test_pool).draws.outcome, ev.draws.outcome)
    tr = Trainer(method_spec("sharp", p), p, train_pool, [0, 1], CPU)
    first, again = evaluate(tr, ev, p), evaluate(tr, ev, p)
    np.testing.assert_array_equal(first.per_seed["accuracy"], again.per_seed["accuracy"])
    per = first.per_seed
    for key in ("useful_share", "harmful_share", "redundant_share"):
        assert ((per[key] >= 0) & (per[key] <= 1)).all()
    np.testing.assert_allclose(per["useful_share"] + per["harmful_share"] + per["redundant_share"], 1.0)
    # the credit of the first replicate is exact and efficient
    game = TeamGame(first.team, p.token_cost)
    correct, tokens = game.full()
    np.testing.assert_allclose(first.credit.credit.sum(axis=1),
                               correct - p.token_cost * tokens / 1000 - first.credit.v_empty, atol=1e-9)
    # LOO on correctness: useful workers' removal turns a right answer wrong
    loo = first.loo[:, 1:]
    wp = first.team.worker_present.reshape(first.team.L, -1)
    assert (first.correct[(loo > 0.5).any(axis=1)]).all()
    assert (~first.correct[(loo < -0.5).any(axis=1)]).all()
    assert (loo[~wp] == 0).all()


def test_the_model_defaults_are_params_yaml():
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    assert parse_params(raw).credit == CreditParams()
