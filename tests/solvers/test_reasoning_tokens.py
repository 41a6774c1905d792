"""Reasoning models' hidden tokens (issue 43): a replayed o1 / o3 / R1 model must say how its hidden
reasoning is billed (params check refuses it otherwise), its answers bill the declared tokens at the
output price and are flagged, and the frontier names every method whose cost rests on the estimate."""

from __future__ import annotations

import json

import polars as pl
import pytest
from pydantic import ValidationError

from delegation_lab.cli import _frontier_markdown
from delegation_lab.data.items import Item, make_item_id
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.frontier.build import frontier_with_outcomes
from delegation_lab.frontier.estimates import resting_on_estimates
from delegation_lab.params.root import FrontierParams
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.solvers.reasoning import is_reasoning_model
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.tracking.compare import markdown_table
from tests.frontier.test_frontier import _labeled
from tests.replay.test_replay_zeroeval import QUESTIONS, write_result_dirs

PRICE = Price(input_usd_per_mtok=3.0, output_usd_per_mtok=12.0, source="fixture")
HIDDEN = {"tokens_per_item": 1000, "source": "ESTIMATE: a test's"}


@pytest.mark.parametrize("name, thinks", [
    ("o1-mini-2024-09-12", True), ("o1-preview-2024-09-12", True), ("openai/o1", True), ("o3-mini", True),
    ("o4-mini", True), ("deepseek-r1", True), ("QwQ-32B-Preview", True),
    ("gpt-4o-2024-08-06", False), ("gpt-4o-mini", False), ("Meta-Llama-3.1-405B-Instruct", False),
    ("claude-3-opus-20240229", False), ("Phi-3-mini-4k-instruct", False), ("gemini-1.5-pro", False),
])
def test_which_models_bill_hidden_reasoning(name, thinks):
    assert is_reasoning_model(name) is thinks


def _replay(tmp_path, model: str, hidden: dict | None) -> SolverParams:
    folder = tmp_path / "result_dirs" / "gsm"
    if not folder.exists():
        folder = write_result_dirs(tmp_path)
    return SolverParams(backend="replay", model=model, price=PRICE, replay=ReplayParams(
        path=str(folder), format="zeroeval", source_model="Yi-1.5-9B-Chat", hidden_reasoning=hidden))


def test_a_replayed_reasoning_model_without_hidden_reasoning_is_refused(tmp_path):
    with pytest.raises(ValidationError, match=r"replay.hidden_reasoning: .* reasoning model"):
        _replay(tmp_path, "o1-mini-2024-09-12", None)
    _replay(tmp_path, "gpt-4o-mini", None)  # not a reasoning model: nothing to declare
    with pytest.raises(ValidationError, match="source"):
        _replay(tmp_path, "o1-mini-2024-09-12", {"tokens_per_item": 10, "source": ""})


def test_hidden_tokens_are_billed_at_the_output_price_and_flagged(tmp_path):
    items = [Item(item_id=make_item_id("t", str(i)), split="test", question=q, gold=g.strip("# "), domain="gsm",
                  source="t", source_id=str(i)) for i, (q, g) in enumerate(QUESTIONS)]
    plain = _replay(tmp_path / "a", "gpt-4o-mini", None)
    thinking = _replay(tmp_path / "b", "o1-mini-2024-09-12", HIDDEN)
    before = Solver("x", plain, ReplayBackend(plain.replay, plain.price)).solve(items)
    after = Solver("x", thinking, ReplayBackend(thinking.replay, thinking.price)).solve(items)
    for a, b in zip(before, after, strict=True):
        if a.error is not None:
            continue
        assert b.tokens_out == a.tokens_out + 1000
        assert b.cost_usd == pytest.approx(a.cost_usd + 1000 * 12.0 / 1e6)
        extra = json.loads(b.extra)
        assert extra["reasoning_tokens"] == 1000 and extra["reasoning_tokens_estimated"] is True
        assert extra["reasoning_tokens_source"] == "ESTIMATE: a test's"
        assert "reasoning_tokens" not in json.loads(a.extra)


def test_the_frontier_names_methods_whose_cost_rests_on_the_estimate():
    labeled = _labeled()
    estimated = {"A": {"reasoning_tokens_per_item": 1000, "source": "ESTIMATE: x", "answers": 200}}
    _, metrics, _ = frontier_with_outcomes(labeled, pl.DataFrame(schema=SUMMARY_SCHEMA),
                                           FrontierParams(mixture_points=1, cascade={"seeds": 1}), "x",
                                           verifier=Verifier("gold"), estimated=estimated)
    methods = metrics["methods"]
    assert metrics["estimated_reasoning_tokens"] == estimated
    assert methods["always-A"]["cost_rests_on_estimated_tokens"] == ["A"]
    assert "cost_rests_on_estimated_tokens" not in methods["always-B"]
    assert any("A" in k and v.get("cost_rests_on_estimated_tokens") == ["A"] for k, v in methods.items() if v["kind"] == "cascade")
    assert "cost_rests_on_estimated_tokens" not in methods["oracle"]  # a bound, not a contender
    table = _frontier_markdown({"dataset": "x", "split": "test", "n_items": 200, **metrics}, {"single"}, markdown_table)
    assert "always-A †" in table and "always-B †" not in table
    assert "† cost rests on estimated hidden reasoning tokens: A 1000 per answer (ESTIMATE: x)" in table


def test_a_verifier_s_estimated_model_taints_every_point_it_checks():
    estimated = {"o1": {"reasoning_tokens_per_item": 1, "source": "s", "answers": 1}}
    assert resting_on_estimates("A,B", estimated, ["o1", "C"]) == ["o1"]
    assert resting_on_estimates("A,B", estimated, []) == []
    assert resting_on_estimates(None, estimated, []) == []
