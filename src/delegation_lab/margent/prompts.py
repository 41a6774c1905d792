"""Versioned prompts of the MARGENT team, registered in the platform's template registry.

Manager: `margent_candidate` (write the candidate it would submit now), `margent_revise` (revise it
from a sub-agent's signal), `margent_decide` (commit or delegate to an unused sub-agent). Sub-agents:
`margent_extractor`, `margent_reasoner`, `margent_verifier` (only the Verifier sees the candidate).
Every reply is one JSON object; each template's parser returns the validated object as canonical
JSON, or None when the reply breaks its schema (the team then records an error branch). Bump a
template's version whenever its text or parser changes: the version enters the request hash.
"""

from __future__ import annotations

import json

from delegation_lab.data.items import Item
from delegation_lab.margent.schemas import (
    SIGNAL_TYPES,
    Candidate,
    Decision,
    Frozen,
    SignalError,
    State,
    parse_reply,
)
from delegation_lab.solvers.prompts import PromptTemplate, register

MANAGER_SYSTEM = (
    "You are the manager of a small team solving a problem. Sub-agents can help: Extractor (facts and "
    "their polarity), Reasoner (a decomposition and missing steps), Verifier (an audit of your candidate). "
    "You alone write the answer. Reply with one JSON object and nothing else."
)


def _parser(model: type[Frozen], who: str):
    def parse(text: str, item: Item) -> str | None:
        try:
            return parse_reply(model, text, who).model_dump_json()
        except SignalError:
            return None

    return parse


CANDIDATE = register(PromptTemplate(
    name="margent_candidate",
    version=1,
    system=MANAGER_SYSTEM,
    user=(
        "Problem:\n{question}\n{choices}\n\n"
        "Write the answer you would submit now as JSON: "
        '{{"answer": "<{answer_format}>", "confidence": <0 to 1>, "rationale": "<one sentence>"}}'
    ),
    parser=_parser(Candidate, "manager candidate"),
))

REVISE = register(PromptTemplate(
    name="margent_revise",
    version=1,
    system=MANAGER_SYSTEM,
    user=(
        "Problem:\n{question}\n{choices}\n\nYour current candidate: {candidate}\n"
        "Earlier calls: {history}\n\nThe {agent} returned: {signal}\n\n"
        "Revise your candidate using this signal (keep it if the signal changes nothing) as JSON: "
        '{{"answer": "<{answer_format}>", "confidence": <0 to 1>, "rationale": "<one sentence>"}}'
    ),
    parser=_parser(Candidate, "manager revision"),
))

DECIDE = register(PromptTemplate(
    name="margent_decide",
    version=1,
    system=MANAGER_SYSTEM,
    user=(
        "Problem:\n{question}\n{choices}\n\nYour current candidate: {candidate}\n"
        "Calls so far: {history}\nSub-agents you may still call: {available}\n\n"
        'Decide as JSON: {{"action": "commit"}} to submit the candidate, or '
        '{{"action": "delegate", "agent": "<one of the sub-agents you may still call>"}}'
    ),
    parser=_parser(Decision, "manager decision"),
))

NO_ANSWER = "Never state a final answer, a result or an option letter."

EXTRACTOR = register(PromptTemplate(
    name="margent_extractor",
    version=1,
    system=f"You are the Extractor. List the decision-relevant facts of a problem. {NO_ANSWER} Reply with JSON only.",
    user=(
        "Problem:\n{question}\n{choices}\n\n"
        'Reply as JSON: {{"facts": [{{"statement": "<a fact from the problem>", '
        '"polarity": "supports|contradicts|neutral"}}]}} where polarity says whether the fact supports or '
        "contradicts the natural reading of the problem."
    ),
    parser=_parser(SIGNAL_TYPES["Extractor"], "Extractor"),
))

REASONER = register(PromptTemplate(
    name="margent_reasoner",
    version=1,
    system=f"You are the Reasoner. Decompose a problem into steps. {NO_ANSWER} Reply with JSON only.",
    user=(
        "Problem:\n{question}\n{choices}\n\n"
        'Reply as JSON: {{"decomposition": ["<step>", ...], "missing_steps": ["<a step a solver is likely to miss>", ...]}}'
    ),
    parser=_parser(SIGNAL_TYPES["Reasoner"], "Reasoner"),
))

VERIFIER = register(PromptTemplate(
    name="margent_verifier",
    version=1,
    system=f"You are the Verifier. Audit a candidate solution. {NO_ANSWER} Reply with JSON only.",
    user=(
        "Problem:\n{question}\n{choices}\n\nCandidate solution: {candidate}\n\n"
        'Reply as JSON: {{"verdict": "consistent|inconsistent|uncertain", "issues": ["<a problem with the candidate>", ...]}}'
    ),
    parser=_parser(SIGNAL_TYPES["Verifier"], "Verifier"),
))

ROLE_TEMPLATES = {
    "margent_candidate": CANDIDATE.name,
    "margent_revise": REVISE.name,
    "margent_decide": DECIDE.name,
    "margent_extractor": EXTRACTOR.name,
    "margent_reasoner": REASONER.name,
    "margent_verifier": VERIFIER.name,
}
"""Solver role -> template name (a solver's `role_prompts` may override any of them)."""

BLANK_CANDIDATE = "(not provided)"


def subagent_role(agent: str) -> str:
    return f"margent_{agent.lower()}"


def answer_format(state_or_choices) -> str:
    choices = state_or_choices.x.choices if isinstance(state_or_choices, State) else state_or_choices
    return f"one option letter A-{'ABCDE'[len(choices) - 1]}" if choices else "a number"


def candidate_text(state: State) -> str:
    c = state.candidate
    return json.dumps({"answer": c.answer, "confidence": round(c.confidence, 3), "rationale": c.rationale})


def history_text(state: State) -> str:
    """The calls so far, one JSON object each: who, what came back, and the revision."""
    if not state.history:
        return "none"
    out = []
    for call in state.history:
        signal = call.signal.model_dump(mode="json") if call.signal is not None else {"error": call.error}
        out.append(json.dumps({"agent": call.agent, "signal": signal, "answer_after": call.after.answer}))
    return "\n".join(out)


def signal_text(signal) -> str:
    return json.dumps(signal.model_dump(mode="json")) if signal is not None else "(no usable signal)"


def candidate_context(view) -> dict[str, str]:
    return {"answer_format": answer_format(view.choices)}


def consult_context(state: State, agent: str, sees_candidate: bool) -> dict[str, str]:
    if agent == "Verifier":
        return {"candidate": candidate_text(state) if sees_candidate else BLANK_CANDIDATE}
    return {}


def revise_context(state: State, agent: str, signal) -> dict[str, str]:
    return {
        "candidate": candidate_text(state), "history": history_text(state), "agent": agent,
        "signal": signal_text(signal), "answer_format": answer_format(state),
    }


def decide_context(state: State, pool: tuple[str, ...]) -> dict[str, str]:
    available = state.available(pool)
    return {
        "candidate": candidate_text(state), "history": history_text(state),
        "available": ", ".join(available) if available else "none (you must commit)",
    }


def decision_json(decision: Decision) -> str:
    return decision.model_dump_json(exclude_none=True)
