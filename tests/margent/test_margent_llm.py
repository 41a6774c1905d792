"""MARGENT through real-model backends: versioned prompts through the solver protocol and the
answer cache. A scripted backend checks batching, gold isolation, error branches and caching;
SmolLM2-135M through llama.cpp runs the whole path for real (it mostly writes malformed JSON,
which must become error branches)."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.errors import InputError
from delegation_lab.margent import llm_team, prompts
from delegation_lab.margent.collect import build_tree
from delegation_lab.margent.params import SUBAGENTS, MargentParams
from delegation_lab.margent.schemas import AgentView
from delegation_lab.margent.team import GoldScorer
from delegation_lab.margent.tree import SequenceTree
from delegation_lab.solvers.base import Generation, Solver
from delegation_lab.solvers.params import SolverParams
from delegation_lab.solvers.prompts import TEMPLATES

from tests.conftest import needs_llamacpp

PRICE = {"input_usd_per_mtok": 0.05, "output_usd_per_mtok": 0.10}
SENTINEL = "8888888"
REPLIES = {
    "margent_candidate": '{"answer": "5", "confidence": 0.3, "rationale": "first guess"}',
    "margent_extractor": '{"facts": [{"statement": "The problem starts from a quantity.", "polarity": "supports"}]}',
    "margent_reasoner": "I would rather not answer in JSON.",  # malformed: an error branch
    "margent_verifier": '{"verdict": "inconsistent", "issues": ["the last step is off"]}',
    "margent_revise": '{"answer": "6", "confidence": 0.6, "rationale": "fixed the last step"}',
    "margent_decide": '{"action": "delegate", "agent": "Verifier"}',
}


class ScriptedBackend:
    """Answers each role with a fixed reply and records every request and batch."""

    def __init__(self):
        self.requests = []
        self.batches: list[Counter] = []

    def fingerprint(self):
        return {"scripted": 1}

    def generate(self, requests):
        self.requests += requests
        self.batches.append(Counter(r.role for r in requests))
        return [Generation(text=REPLIES[r.role], tokens_in=100, tokens_out=20) for r in requests]


@pytest.fixture
def scripted(monkeypatch):
    backend = ScriptedBackend()
    monkeypatch.setattr(llm_team, "build_solver", lambda name, params: Solver(name, params, backend))
    return backend


def real_params() -> dict[str, SolverParams]:
    return {"api": SolverParams(backend="openai_compat", model="some-model", price=PRICE)}


ROLES = {"manager": "api", **{a: "api" for a in SUBAGENTS}}


def items_with_secret(n):
    return [i.model_copy(update={"gold": SENTINEL}) for i in generate(ArithParams(min_steps=2, max_steps=4), n, seed=2)]


def test_prompts_are_registered_and_versioned():
    for name in prompts.ROLE_TEMPLATES.values():
        assert TEMPLATES[name].version >= 1 and TEMPLATES[name].name == name
    assert "{candidate}" in prompts.VERIFIER.user and "{candidate}" not in prompts.EXTRACTOR.user + prompts.REASONER.user


def test_llm_collection_batches_caches_and_never_sees_gold(scripted, tmp_path):
    items = items_with_secret(4)
    views = [AgentView.from_item(i) for i in items]
    team = llm_team.LLMTeam(ROLES, real_params(), tmp_path)
    frame, stats = build_tree(team, views, GoldScorer(items), SequenceTree(SUBAGENTS, 2), mode="full", decisions=True)
    assert frame.height == 4 * 10
    # gold never travels: requests carry an item without gold, and no prompt contains it
    assert all(r.item.gold is None and r.item.program is None for r in scripted.requests)
    assert not any(SENTINEL in json.dumps(r.messages) for r in scripted.requests)
    # the malformed Reasoner signal is an error branch, the run carried on
    errors = frame.filter(pl.col("agent") == "Reasoner")
    assert errors["error"].str.starts_with("Reasoner reply is not valid JSON").all()
    assert (errors["answer"] == "5").filter(errors["depth"] == 1).all()  # the candidate stands
    ok = frame.filter(pl.col("agent") == "Verifier")
    assert ok["error"].is_null().all() and (ok["answer"] == "6").all()
    # at most one backend batch per sub-agent per depth, each batch one role; identical requests
    # (the question-only Extractor asked again from other branches of one item) are never re-sent
    assert all(len(batch) == 1 for batch in scripted.batches)
    per_role = Counter(role for batch in scripted.batches for role in batch)
    assert per_role["margent_verifier"] == 2 and per_role["margent_candidate"] == 1
    assert per_role["margent_extractor"] == 1  # depth 2 asks the same 4 Extractor prompts: all cached
    sent = Counter(r.role for r in scripted.requests)
    # Verifier: 4 roots, then [E, V] on the revised candidates; [R, V] audits the unchanged root
    # candidate (the Reasoner's reply was malformed), the same request as [V]: not sent again
    assert sent["margent_extractor"] == 4 and sent["margent_verifier"] == 4 + 4
    assert stats.consult_calls == {a: 2 for a in SUBAGENTS}
    assert frame.filter(pl.col("decision").is_not_null()).height == frame.height
    assert (frame.filter(pl.col("depth") < 2)["decision"].is_in(["Verifier", "commit"])).all()
    assert stats.cost_usd > 0
    # a rerun pays nothing: every reply comes from the cache
    before = len(scripted.requests)
    again = llm_team.LLMTeam(ROLES, real_params(), tmp_path)
    frame2, _ = build_tree(again, views, GoldScorer(items), SequenceTree(SUBAGENTS, 2), mode="full", decisions=True)
    assert again.backend_calls == 0 and len(scripted.requests) == before
    assert frame2.drop("features").equals(frame.drop("features"))


def test_llm_team_refuses_solvers_that_cannot_play_roles(tmp_path):
    sim = {"C": SolverParams(backend="simulated", model="sim", price=PRICE, simulated={})}
    with pytest.raises(InputError, match="solver 'C' .* backend 'simulated'"):
        llm_team.LLMTeam({"manager": "C"}, sim, tmp_path)
    with pytest.raises(InputError, match=r"margent.solvers.verifier: solver 'X' is not in params.yaml solvers"):
        llm_team.team_solvers(MargentParams.model_validate({"solvers": {"verifier": "X"}}), sim)


@pytest.mark.slow
@needs_llamacpp
def test_smollm2_end_to_end_with_error_branches_and_cache(tmp_path):
    items = generate(ArithParams(min_steps=1, max_steps=2), 2, seed=3)
    views = [AgentView.from_item(i) for i in items]
    smol = {"smol": SolverParams(backend="llamacpp", model="smollm2-135m", price=PRICE,
                                 decoding={"max_tokens": 24, "temperature": 0.0}, llamacpp={"n_threads": 1})}
    roles = {"manager": "smol", **{a: "smol" for a in SUBAGENTS}}
    team = llm_team.LLMTeam(roles, smol, tmp_path)
    frame, stats = build_tree(team, views, GoldScorer(items), SequenceTree(SUBAGENTS, 1))
    assert frame.height == 2 * 4 and team.backend_calls >= 2 + 2 * 3
    assert stats.errors > 0  # a 135M model mostly breaks the schemas: error branches, no crash
    assert frame["error"].drop_nulls().str.contains("reply").all()
    cache = pl.read_parquet(tmp_path / "smol.parquet")
    assert set(cache["role"]) >= {"margent_candidate", "margent_extractor", "margent_reasoner", "margent_verifier"}
    assert (cache["tokens_out"] > 0).all() and (cache["cost_usd"] > 0).all()
    again = llm_team.LLMTeam(roles, smol, tmp_path)
    frame2, _ = build_tree(again, views, GoldScorer(items), SequenceTree(SUBAGENTS, 1))
    assert again.backend_calls == 0
    assert frame2.drop("features").equals(frame.drop("features"))
