"""Which solvers' costs rest on estimated hidden reasoning tokens (solvers/reasoning.py), read from the
answers' own flags, and which frontier points they make estimates: a point's cost rests on an estimate
when one of its solvers (its `solver_set`) or the verifier's models bills estimated reasoning tokens."""

from __future__ import annotations

import json

from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.tables import read_table


def estimated_reasoning(layout: Layout, solvers: list[str]) -> dict[str, dict]:
    """solver -> {reasoning_tokens_per_item, source} for each solver whose answers bill estimated reasoning."""
    out = {}
    for solver in solvers:
        extra = read_table(layout.answers(solver), f"answers of solver {solver}").get_column("extra")
        flagged = extra.filter(extra.str.contains("reasoning_tokens_estimated", literal=True))
        if flagged.len():
            first = json.loads(flagged[0])
            out[solver] = {"reasoning_tokens_per_item": first["reasoning_tokens"], "source": first["reasoning_tokens_source"],
                           "answers": flagged.len()}
    return out


def resting_on_estimates(solver_set: str | None, estimated: dict[str, dict], verifier_models: list[str]) -> list[str]:
    """The solvers of a point (and of its verifier) whose costs are estimated, sorted; [] for none."""
    used = set((solver_set or "").split(",")) | set(verifier_models)
    return sorted(used & set(estimated))


def verifier_models(verifier_description: dict) -> list[str]:
    return [str(m) for m in verifier_description.get("models") or []]

