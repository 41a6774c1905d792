"""MARGENT types: no gold anywhere an agent looks, signals that refuse answers, strict replies,
and the params section's errors."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from delegation_lab.params.root import parse_params
from delegation_lab.data.arith import generate
from delegation_lab.data.items import Item
from delegation_lab.data.params import ArithParams
from delegation_lab.errors import ConfigError
from delegation_lab.margent.params import MargentParams, rho_label
from delegation_lab.margent.schemas import (
    AgentView,
    Call,
    Candidate,
    Decision,
    ExtractorSignal,
    ReasonerSignal,
    SignalError,
    State,
    VerifierSignal,
    answer_leak,
    parse_reply,
    parse_signal,
    signal_for,
)

from tests.conftest import REPO

RAW = yaml.safe_load((REPO / "params.yaml").read_text())


def field_names(model: type) -> set[str]:
    """Every field name reachable from a pydantic model (recursively through nested models)."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        names.add(name)
        for arg in getattr(field.annotation, "__args__", ()) + (field.annotation,):
            if isinstance(arg, type) and hasattr(arg, "model_fields") and arg is not model:
                names |= field_names(arg)
    return names


# ---------------------------------------------------------------------------------------------
# gold never reaches an agent


def test_agent_types_have_no_gold_field():
    for model in (AgentView, State, Call, Candidate, Decision, ExtractorSignal, ReasonerSignal, VerifierSignal):
        assert not {n for n in field_names(model) if "gold" in n or n in ("program", "result")}, model


def test_agent_view_drops_gold_and_solved_values():
    item = generate(ArithParams(min_steps=3, max_steps=3), 1, seed=5)[0]
    view = AgentView.from_item(item)
    dumped = view.model_dump_json()
    assert "gold" not in dumped and "result" not in dumped
    steps = item.steps()
    assert [s.value for s in view.structure[1:]] == [float(s["arg"]) for s in steps[1:]]
    assert view.as_item().gold is None and view.as_item().program is None
    with pytest.raises(ValueError, match="gold"):
        AgentView(**item.model_dump(include={"item_id", "question", "gold"}))  # extra fields are refused
    with pytest.raises(ValueError, match="gold"):
        State(x=view, candidate=Candidate(answer="1", confidence=0.5), gold=item.gold)


# ---------------------------------------------------------------------------------------------
# signals


@pytest.mark.parametrize("text", [
    "The final answer is 42.", "the answer is 17", "Answer: B", "#### 12", r"\boxed{3}", "Option C fits best.",
    "the correct choice is obvious", "B)", "The result is 40 after all steps.",
    # leaks the audit found accepted
    "(C) is correct", "Choose D", "I would pick C.", "B", "Therefore 42.", "The total comes to 42.",
    "Candidate should be 17 instead",
    # their near relatives
    "B is the right one", "go with (B)", "(D).", "42", "So 42.", "Thus, 42 apples.", "Therefore 42. Check the units.",
    "It works out to $12.50.", "The total must be 42",
])
def test_answer_leaks_are_caught(text):
    assert answer_leak(text) is not None


@pytest.mark.parametrize("text", [
    "The card starts at $40.", "Step 3 subtracts 12.", "The drug of choice and its dose matter.",
    "Check whether the units are consistent.", "A storm adds 17 litres.",
    # sub-agent signals carry numbers and computations
    "She buys 3 apples at $2 each.", "First compute 3 × 2 = 6, then add the 4 pens.", "so 6 + 4 = 10",
    "Hence 3 × 2 = 6 apples are bought, then add 4.", "which comes to $6, then add 4 pens", "The total budget is $40.",
    "A discount of 20% applies.", "Do so 3 times.",
    # Verifier audits
    "Step 2 multiplies instead of dividing.", "The candidate ignores the discount.",
    "Step 2 should be a division, not a multiplication.", "Therefore the units must match.",
    # capital letters and choice verbs that are no label
    "Pick a number between the two totals.", "Choose the larger of the two amounts.", "Vitamin B deficiency is common.",
])
def test_plain_facts_pass(text):
    assert answer_leak(text) is None


@pytest.mark.parametrize("text", [
    "The problem starts from 40.", "Step 1 multiplies by 3.", "Step 4 subtracts -5.",
    "Step 3 divides by 2.5, which a quick reading misses.", "Start from the initial quantity.", "Apply step 4.",
    "Step 2 is not reflected in the working.", "The candidate does not follow step 3.",
])
def test_simulator_signal_templates_pass(text):
    """The texts the simulated team emits (simulator._make_signal) are never taken for answers."""
    assert answer_leak(text) is None


def test_signal_with_an_answer_or_label_is_rejected():
    with pytest.raises(SignalError, match="Extractor signal contains a final answer"):
        signal_for("Extractor", {"facts": [{"statement": "So the answer is 42.", "polarity": "supports"}]})
    with pytest.raises(SignalError, match="Verifier signal contains a final answer or a choice label"):
        parse_signal("Verifier", '{"verdict": "inconsistent", "issues": ["Option B is the right one"]}')
    with pytest.raises(SignalError, match="Reasoner"):
        parse_signal("Reasoner", '{"decomposition": ["add the two amounts", "Answer: 7"]}')


def test_signal_schemas_parse_and_flag_issues():
    e = parse_signal("Extractor", 'Sure!\n```json\n{"facts": [{"statement": "Step 2 divides by 3.", "polarity": "contradicts"}]}\n```')
    r = parse_signal("Reasoner", '{"decomposition": ["start", "apply step 1"], "missing_steps": []}')
    v = parse_signal("Verifier", '{"verdict": "consistent", "issues": []}')
    assert (e.raises_issue, r.raises_issue, v.raises_issue) == (True, False, False)
    assert isinstance(e, ExtractorSignal) and isinstance(r, ReasonerSignal) and isinstance(v, VerifierSignal)


@pytest.mark.parametrize("agent, text, message", [
    ("Verifier", "I think it is fine.", "not valid JSON: no JSON object"),
    ("Verifier", '{"verdict": "consistent|inconsistent"}', "verdict"),
    ("Verifier", '{"verdict": "consistent", "answer": "12"}', "answer: Extra inputs are not permitted"),
    ("Extractor", '{"facts": []}', "facts"),
    ("Extractor", '{"facts": [{"statement": "x", "polarity": "supports"}', "invalid JSON"),
    ("Reasoner", "", "empty reply"),
    ("Planner", "{}", "unknown sub-agent 'Planner'"),
])
def test_malformed_signals_name_the_agent_and_the_problem(agent, text, message):
    with pytest.raises(SignalError) as err:
        parse_signal(agent, text)
    assert message in str(err.value)
    if agent != "Planner":
        assert str(err.value).startswith(agent)


def test_manager_replies_are_validated():
    c = parse_reply(Candidate, '{"answer": "12", "confidence": 0.8, "rationale": "added"}', "manager")
    assert c.answer == "12"
    with pytest.raises(SignalError, match="confidence"):
        parse_reply(Candidate, '{"answer": "12", "confidence": 1.5}', "manager")
    assert parse_reply(Decision, '{"action": "delegate", "agent": "Verifier"}', "m").agent == "Verifier"
    with pytest.raises(SignalError, match="delegate needs an agent"):
        parse_reply(Decision, '{"action": "delegate"}', "m")
    with pytest.raises(SignalError, match="agent"):
        parse_reply(Decision, '{"action": "delegate", "agent": "Oracle"}', "m")


def test_each_subagent_at_most_once():
    view = AgentView(item_id="x", question="q")
    c = Candidate(answer="1", confidence=0.5)
    call = Call(agent="Verifier", sees_candidate=True, signal=VerifierSignal(verdict="consistent"), before=c, after=c)
    state = State(x=view, history=(call,), candidate=c)
    assert state.used == {"Verifier"} and state.available(("Extractor", "Reasoner", "Verifier")) == ["Extractor", "Reasoner"]
    with pytest.raises(ValueError, match="at most once"):
        State(x=view, history=(call, call), candidate=c)


# ---------------------------------------------------------------------------------------------
# params


def problems(update) -> list[str]:
    raw = copy.deepcopy(RAW)
    update(raw["margent"])
    with pytest.raises(ConfigError) as err:
        parse_params(raw)
    return err.value.problems


@pytest.mark.parametrize("depth", [0, 4])
def test_depth_outside_1_to_3_names_the_key(depth):
    (problem,) = problems(lambda m: m["collect"].update(depth=depth))
    assert problem.startswith("margent.collect.depth:")


def test_depth_beyond_the_pool():
    (problem,) = problems(lambda m: m.update(subagents=["Verifier", "Reasoner"]))
    assert "collect.depth=3 exceeds the 2 sub-agents" in problem


def test_negative_rho_and_unknown_subagent_and_bad_selection():
    (p,) = problems(lambda m: m["distill"].update(rho=[0, -1]))
    assert p.startswith("margent.distill.rho:") and "ρ must be >= 0" in p
    ps = problems(lambda m: m.update(subagents=["Extractor", "Planner", "Verifier"]))
    assert any(p.startswith("margent.subagents.1:") and "'Extractor', 'Reasoner' or 'Verifier'" in p for p in ps)
    (p,) = problems(lambda m: m["eval"].update(selected_rho=4))
    assert "eval.selected_rho=4 is not one of distill.rho" in p
    (p,) = problems(lambda m: (m["collect"].update(dev_items=0)))
    assert "collect.dev_items is 0" in p
    (p,) = problems(lambda m: m["distill"].update(rho=[1, 1.0]))
    assert "repeat" in p


def test_rho_labels():
    assert [rho_label(r) for r in MargentParams().distill.rho] == ["0", "0.5", "1", "2", "3", "all"]
    assert json.dumps(MargentParams().model_dump())  # the section serialises (MLflow params, dvc)
    assert Item  # noqa: the item type stays importable beside the views
