"""State features of the learned manager: what an agent can see in s_t = (x, h_t, ŷ_t, U_t).

Difficulty of the question, the confidence the manager reports for its current and its root
candidate, depth, the used set, and per sub-agent whether its signal raised an issue and whether
the revision after it changed the answer, plus whether any reply along the way was malformed.
Never the gold answer, never correctness.
"""

from __future__ import annotations

from delegation_lab.margent.params import SUBAGENTS
from delegation_lab.margent.schemas import State

FEATURES = [
    "difficulty", "confidence", "root_confidence", "confidence_change", "depth",
    *[f"used_{a}" for a in SUBAGENTS], *[f"issue_{a}" for a in SUBAGENTS], *[f"changed_{a}" for a in SUBAGENTS],
    "any_error",
]


def state_features(state: State) -> list[float]:
    calls = {c.agent: c for c in state.history}
    conf = state.candidate.confidence
    root = state.root_candidate.confidence
    used = [1.0 if a in calls else 0.0 for a in SUBAGENTS]
    issue = [1.0 if a in calls and calls[a].raises_issue else 0.0 for a in SUBAGENTS]
    changed = [1.0 if a in calls and calls[a].changed else 0.0 for a in SUBAGENTS]
    error = 1.0 if any(c.error for c in state.history) else 0.0
    return [state.x.difficulty / 10.0, conf, root, conf - root, len(state.history) / 3.0, *used, *issue, *changed, error]
