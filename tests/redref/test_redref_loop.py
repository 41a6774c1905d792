"""The one REDEREF depth loop (`redref.loop`): the protocol controller, the simulated engine and the
cached routing, driven on the same tasks, agents, costs and verdicts with the same Thompson draws,
take the same decisions action for action — who is called at each depth, who forced exploration
releases, and why each task stops."""

from __future__ import annotations

import json

import numpy as np
import pytest

from delegation_lab.params.root import SolverParams
from delegation_lab.data.items import Item
from delegation_lab.redref.cached import CachedArms, route_cached
from delegation_lab.redref.controller import Redref
from delegation_lab.redref.engine import EngineSetup, run_sequences
from delegation_lab.redref.judge import JUDGE_ROLE
from delegation_lab.redref.loop import NO_AGENT, STOP_CODES
from delegation_lab.redref.memory import BeliefState
from delegation_lab.redref.params import ControllerParams, ZooParams
from delegation_lab.redref.tasks import TaskPool, Zoo, parse_sections
from delegation_lab.solvers.base import Generation, Request, Solver

NAMES = ["law", "finance", "trivia"]
# agent x domain: law writes law; finance writes law and finance; trivia writes nothing, and no
# one writes trivia (those tasks never succeed: they end on depth, budget or plateau)
COMPETENT = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0]], dtype=bool)
TOKENS_IN_EXTRA = np.array([40.0, 0.0, 15.0])
TOKENS_OUT = np.array([220.0, 140.0, 60.0])
SUCCESS_SCORE = 85.0


def world(n_tasks: int = 9) -> tuple[Zoo, TaskPool]:
    """A deterministic split-knowledge world: one part per task, a competent agent writes it at
    score 100 (y = e = 1), anyone else writes nothing (y = e = 0); a call costs the query's tokens
    plus the agent's retrieval context and completion, the same at every depth."""
    zp = ZooParams(quality_sd=0.0, tokens_cv=0.0, critique_tokens=0, fact_score=SUCCESS_SCORE)
    zoo = Zoo(NAMES, np.array([True, False, False]), COMPETENT.astype(float), 100.0 * COMPETENT, TOKENS_IN_EXTRA, TOKENS_OUT, zp)
    domain = np.arange(n_tasks) % len(NAMES)
    required = np.eye(len(NAMES), dtype=bool)[domain]
    pool = TaskPool([f"t{p}" for p in range(n_tasks)], [f"task {p} on {NAMES[d]}" for p, d in enumerate(domain)], required,
                    np.zeros(n_tasks, bool), 100.0 + 7.0 * np.arange(n_tasks), [{NAMES[d]: f"FACT-{p}"} for p, d in enumerate(domain)])
    return zoo, pool


def call_cost(pool: TaskPool) -> np.ndarray:
    """[P, N]: tokens of one call (prompt + retrieval + completion)."""
    return pool.tokens[:, None] + TOKENS_IN_EXTRA[None, :] + TOKENS_OUT[None, :]


class DecisionDraws:
    """A generator whose Beta draws — the Thompson samples, the loop's only random decisions — come
    from `seed`'s stream, as the controller's and the cached routing's do; the engine's simulation
    draws (agents and judge, which this deterministic world makes moot) come from a second stream."""

    def __init__(self, seed: int):
        self.decisions, self.world = np.random.default_rng(seed), np.random.default_rng(seed + 1000)

    def beta(self, a, b, size=None):
        return self.decisions.beta(a, b, size)

    def __getattr__(self, name):
        return getattr(self.world, name)


class Agents:
    """The world's agents through the solver protocol: a competent agent writes the task's part."""

    def __init__(self, pool: TaskPool):
        self.pool, self.cost = pool, call_cost(pool)

    def fingerprint(self):
        return {}

    def generate(self, requests: list[Request]) -> list[Generation]:
        out = []
        for r in requests:
            p, i = self.pool.ids.index(r.item.item_id), NAMES.index(r.context["agent"])
            (domain,) = json.loads(r.item.program)["parts"]
            k = NAMES.index(domain)
            text = f"## {domain} | by {NAMES[i]} | #{r.context['attempt']}\nFact: FACT-{p}" if COMPETENT[i, k] else "(nothing to add)"
            tokens_in = int(self.cost[p, i] - TOKENS_OUT[i])
            out.append(Generation(text=text, tokens_in=tokens_in, tokens_out=int(TOKENS_OUT[i])))
        return out


class Judge:
    """Judges a candidate a success (and an improvement) exactly when it has the task's part."""

    def fingerprint(self):
        return {}

    def generate(self, requests: list[Request]) -> list[Generation]:
        out = []
        for r in requests:
            assert r.role == JUDGE_ROLE
            (domain,) = json.loads(r.item.program)["parts"]
            ok = domain in parse_sections(r.context["candidate"])
            text = "VERDICT: SUCCESS\nIMPROVED: YES\nSCORE: 100" if ok else "VERDICT: FAILURE\nIMPROVED: NO\nSCORE: 0"
            out.append(Generation(text=f"{text}\nRATIONALE: {'done' if ok else 'missing parts: ' + domain}.", tokens_in=5, tokens_out=5))
        return out


SOLVER = SolverParams.model_validate({
    "backend": "simulated", "model": "loop-test", "price": {"input_usd_per_mtok": 0, "output_usd_per_mtok": 0},
    "role_prompts": {"redref_agent": "redref_agent", "redref_judge": "redref_judge"}, "simulated": {}})


def controller_decisions(zoo, pool, seq, params: ControllerParams, seed: int):
    agents = {n: Solver(n, SOLVER, Agents(pool)) for n in NAMES}
    ctrl = Redref(agents, Solver("judge", SOLVER, Judge()), params, BeliefState.fresh(NAMES, params.alpha0, params.beta0), None,
                  np.random.default_rng(seed), success_score=SUCCESS_SCORE, programmatic=lambda item, text: None)
    loops = [ctrl.run(pool.item(int(p), zoo)).loop for p in seq]
    return (np.stack([lp.delegated[0] for lp in loops]), np.stack([lp.released[0] for lp in loops]),
            np.array([lp.stop[0] for lp in loops]))


def engine_decisions(zoo, pool, seq, params: ControllerParams, seed: int):
    setup = EngineSetup(params, fp=0.0, fn=0.0, success_score=SUCCESS_SCORE)
    out = run_sequences(zoo, pool, seq[None], np.eye(pool.size), setup, DecisionDraws(seed))  # type: ignore[arg-type]
    return out.delegated[0], out.released[0], out.stop[0]


def cached_decisions(zoo, pool, seq, params: ControllerParams, seed: int):
    correct = COMPETENT[:, pool.required.argmax(axis=1)].T  # [P, N]: the judge accepts exactly the correct answers
    arms = CachedArms(NAMES, correct, call_cost(pool), np.ones((pool.size, 3, 3), bool))
    out = route_cached(arms, seq[None], np.eye(pool.size), np.array([params.budget]), params, params.max_depth, params.cooldown,
                       correct[None], np.random.default_rng(seed))
    return out.delegated[0], out.released[0], out.stop[0]


CASES = [  # every stop reason and forced exploration occur among these
    dict(max_depth=6, budget=1e9, cooldown=1, plateau=4, prior="persistent"),
    dict(max_depth=8, budget=1e9, cooldown=3, plateau=8, prior="persistent"),  # r = N: every agent cools, releases
    dict(max_depth=10, budget=700.0, cooldown=2, plateau=6, prior="reset"),  # budget stops
    dict(max_depth=12, budget=1e9, cooldown=0, plateau=2, prior="persistent"),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_controller_engine_and_cached_routing_take_the_same_decisions(case, seed):
    zoo, pool = world()
    seq = np.random.default_rng(seed).permutation(pool.size)
    params = ControllerParams(**case)
    paths = {"controller": controller_decisions(zoo, pool, seq, params, seed),
             "engine": engine_decisions(zoo, pool, seq, params, seed),
             "cached": cached_decisions(zoo, pool, seq, params, seed)}
    delegated, released, stop = paths["controller"]
    assert (delegated != NO_AGENT).any()
    for name, (d, r, s) in paths.items():
        assert np.array_equal(d, delegated), name
        assert np.array_equal(r, released), name
        assert np.array_equal(s, stop), name


def test_the_cases_exercise_every_decision():
    zoo, pool = world()
    stops, releases = set(), 0
    for case in CASES:
        for seed in (0, 1, 2):
            _, released, stop = controller_decisions(zoo, pool, np.random.default_rng(seed).permutation(pool.size),
                                                     ControllerParams(**case), seed)
            stops |= set(stop.tolist())
            releases += int((released != NO_AGENT).sum())
    assert stops == set(STOP_CODES.values()) and releases > 0
