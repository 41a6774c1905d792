"""`dlab serve`: the policies the frontier chose, deployed as an OpenAI-compatible endpoint whose
traffic is journalled back into answer caches (docs/serving.md).

Modules: `wire` (OpenAI's request and error shapes), `calls` (one solver answering one served
request through its own backend), `policies` (single solvers, saved routers, cascades under the
agreement verifier), `journal` (served answers and decisions, checkpointed and compacted),
`backpressure` (the bounded queue), `metrics` (Prometheus), `stream` (a routed model's stream passed
through), `app` (the FastAPI app and the uvicorn server).
"""
