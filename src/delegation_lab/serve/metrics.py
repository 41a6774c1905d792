"""Prometheus metrics of one server (`GET /metrics`), in a registry of its own: requests by model
and status, latency, in-flight and queued requests, dollars and tokens by solver. Labels are model
and solver names and status codes, never request content or keys."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from delegation_lab.serve.policies import Served


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("dlab_serve_requests", "Chat completion requests by model and HTTP status",
                                ["model", "status"], registry=r)
        self.latency = Histogram("dlab_serve_request_seconds", "Time to answer a request (admitted ones)", ["model"],
                                 registry=r, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
        self.routing = Histogram("dlab_serve_routing_seconds", "Time a policy took to choose its solver", ["model"],
                                 registry=r, buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5))
        self.in_flight = Gauge("dlab_serve_in_flight", "Requests being answered", registry=r)
        self.queued = Gauge("dlab_serve_queued", "Requests admitted and waiting for a slot", registry=r)
        self.rejected = Counter("dlab_serve_rejected", "Requests refused because the queue was full", registry=r)
        self.calls = Counter("dlab_serve_backend_calls", "Backend calls by solver and outcome", ["solver", "outcome"],
                             registry=r)
        self.cost = Counter("dlab_serve_cost_usd", "US dollars spent by solver", ["solver"], registry=r)
        self.tokens = Counter("dlab_serve_tokens", "Tokens by solver and direction", ["solver", "direction"], registry=r)

    def served(self, served: Served) -> None:
        for a in served.calls:
            self.calls.labels(a.solver, "error" if a.error else "ok").inc()
            self.cost.labels(a.solver).inc(a.cost_usd)
            self.tokens.labels(a.solver, "in").inc(a.tokens_in)
            self.tokens.labels(a.solver, "out").inc(a.tokens_out)

    def render(self) -> bytes:
        return generate_latest(self.registry)
