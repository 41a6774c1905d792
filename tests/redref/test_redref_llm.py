"""REDEREF's controller with a real LLM (SmolLM2-135M through llama.cpp) playing every agent and the
judge: the solver protocol is the only interface, so a model that writes poor sections and
unreadable verdicts must still leave a well-formed delegation trace and updated beliefs."""

from __future__ import annotations

import numpy as np
import pytest

from delegation_lab.redref import experiments as ex
from delegation_lab.redref.controller import Redref
from delegation_lab.redref.judge import ROLE_PROMPTS
from delegation_lab.redref.memory import BeliefState, HashingEmbedder
from delegation_lab.redref.params import RedrefParams
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.params import SolverParams

from tests.conftest import needs_llamacpp
from tests.redref.test_redref import CountingBackend


@pytest.mark.slow
@needs_llamacpp
def test_smollm2_plays_agents_and_judge_through_the_controller():
    params = RedrefParams.model_validate({"tasks": {"pool_size": 40}, "judge": {"calibration_size": 20},
                                          "controller": {"max_depth": 3, "prior": "persistent"}})
    world = ex.build_world(params, HashingEmbedder(128))
    smol = SolverParams(backend="llamacpp", model="smollm2-135m", role_prompts=ROLE_PROMPTS,
                        price={"input_usd_per_mtok": 0.05, "output_usd_per_mtok": 0.10},
                        decoding={"max_tokens": 32, "temperature": 0.0}, llamacpp={"n_threads": 1, "n_ctx": 2048})
    agent = build_solver("smol-agent", smol)
    agent.backend = CountingBackend(agent.backend)
    judge = build_solver("smol-judge", smol)
    judge.backend = CountingBackend(judge.backend)
    names = world.zoo.names
    ctrl = Redref({n: agent for n in names}, judge, params.controller, BeliefState.fresh(names), world.embedder,
                  np.random.default_rng(0), success_score=params.tasks.success_score, expertise=ex.expertise(world.zoo))

    results = [ctrl.run(world.pool.item(t, world.zoo)) for t in range(2)]

    agent_steps = [s for r in results for s in r.steps if s.agent is not None]
    judged = [s for s in agent_steps if s.verdict is not None]
    assert agent.backend.calls == len(agent_steps) == sum(r.calls for r in results) >= 2
    assert all(r.stop in {"success", "depth", "budget", "plateau"} for r in results)
    assert all(s.tokens > 0 for s in agent_steps)  # llama.cpp's own token counts
    # every judged step has a binary verdict and a rationale: the model's, a programmatic pass, or the
    # controller's note that the reply carried no verdict line
    assert judged and all(s.verdict in (0, 1) and s.rationale for s in judged)
    programmatic = sum(s.rationale == "programmatic pass" for s in judged)
    assert judge.backend.calls == len(judged) - programmatic
    # persistent Beta posteriors moved by exactly one pseudo-count per judged step
    assert (ctrl.state.alpha + ctrl.state.beta).sum() == pytest.approx(
        len(names) * (params.controller.alpha0 + params.controller.beta0) + len(judged))
    assert ctrl.state.clock == 2 and len(ctrl.state.memory.records) == len(judged)
