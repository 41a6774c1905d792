"""What the `dlab serve` app holds while it runs (`ServerState`) and what every answered request
leaves behind: its journal row and metrics (`record`) and its `x-dlab-*` headers (`dlab_headers`).
Shared by the app's plain responses (`app`) and its streamed ones (`stream`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from delegation_lab.serve.backpressure import Admission, BodyBudget
from delegation_lab.serve.journal import ServedJournal
from delegation_lab.serve.metrics import ServerMetrics
from delegation_lab.serve.policies import Policy, Served
from delegation_lab.solvers.base import mask_secrets


@dataclass
class ServerState:
    policies: dict[str, Policy]
    journal: ServedJournal
    admission: Admission
    metrics: ServerMetrics
    api_key: str | None
    max_body_bytes: int
    secrets: list[str]
    bodies: BodyBudget = field(default_factory=lambda: BodyBudget(64 << 20))
    started: int = field(default_factory=lambda: int(time.time()))



def dlab_headers(request_id: str, policy: Policy, served: Served) -> dict[str, str]:
    headers = {"x-dlab-request-id": request_id, "x-dlab-policy": policy.name, "x-dlab-answered-by": served.answer.solver,
               "x-dlab-called": ",".join(a.solver for a in served.calls), "x-dlab-cost-usd": f"{served.cost_usd:.10g}"}
    if served.answer.error is not None:
        headers["x-dlab-failed-solver"] = served.answer.solver
    return headers


def record(state: ServerState, request_id: str, policy: Policy, item: Any, served: Served, status: int,
           latency: float) -> None:
    """Journal the calls and the decision; count it in the metrics."""
    state.journal.record(served.calls, {
        "request_id": request_id, "created_at": datetime.now(UTC), "model": policy.name, "policy": policy.kind,
        "item_id": item.item_id, "question": mask_secrets(item.question, state.secrets), "gold": item.gold,
        "answered_by": served.answer.solver, "called": [a.solver for a in served.calls],
        "request_hashes": [a.request_hash for a in served.calls], "cost_usd": served.cost_usd,
        "tokens_in": sum(a.tokens_in for a in served.calls), "tokens_out": sum(a.tokens_out for a in served.calls),
        "latency_s": round(latency, 6), "status": status, "error": served.answer.error,
        "decision": json.dumps(served.decision, sort_keys=True),
    })
    state.metrics.requests.labels(policy.name, str(status)).inc()
    state.metrics.latency.labels(policy.name).observe(latency)
    state.metrics.served(served)
