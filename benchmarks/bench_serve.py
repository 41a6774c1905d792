"""dlab serve: routing overhead per request (p50 / p99, with and without the embedding) and
throughput through the server as a ratio of calling the backend directly, at 1, 16 and 64 concurrent.

Routing: a kNN router fitted on 2,000 questions (all-MiniLM-L6-v2 embeddings, the committed routers'
embedder; the hashing fallback where it is absent) routes 300 new ones one at a time, as a server
does; "without the embedding" is the router's decision on a question already embedded. Throughput:
a fake OpenAI-compatible backend (tests/serve_fixtures.py) that answers after BACKEND_S (a model's
latency), called directly with the same request, or through `dlab serve --model solver:fake` (one
process, journal on). Both ratios are measured in this one run on this machine.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

BACKEND_S = 0.1
CONCURRENCY = (1, 16, 64)
ROUNDS = 8  # requests per concurrent client


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def routing_overhead() -> None:
    from delegation_lab.embeddings import load_embedder, text_features
    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.routers import build_router
    from delegation_lab.routers.artifact import save_router
    from delegation_lab.routers.base import Inputs
    from delegation_lab.routers.params import RoutersParams
    from delegation_lab.routers.serve import SavedRouter

    rng = np.random.default_rng(0)
    words = "apples trains cost speed hours minutes total each more than twice half sold bought left".split()
    questions = [" ".join(rng.choice(words, 14)) + f" {rng.integers(1, 99)}?" for _ in range(2300)]
    embedder = load_embedder("auto", key="bench_serve")
    emb = np.asarray(embedder.encode(questions), dtype=np.float32)
    train, new = slice(0, 2000), slice(2000, None)
    correct = (rng.random((2000, 3)) < [0.95, 0.8, 0.5]).astype(float)
    cost = np.tile([1e-3, 2e-4, 2e-5], (2000, 1))
    params = RoutersParams()
    router = build_router("knn", params, ["A", "B", "C"])
    router.fit(Inputs(emb[train], text_features(questions[train], [None] * 2000)), correct, cost, seed=0)
    router.calibrate(None, None, None)
    with tempfile.TemporaryDirectory() as tmp:
        saved = SavedRouter(save_router(router, Layout(Path(tmp)).router("knn"), embedder.name, params), None)
        with_emb, without = [], []
        for q, e in zip(questions[new], emb[new], strict=True):
            t = time.perf_counter()
            saved.route(saved.inputs([q]))
            with_emb.append(time.perf_counter() - t)
            t = time.perf_counter()
            saved.route(saved.inputs([q], e[None, :]))
            without.append(time.perf_counter() - t)
    print(f"routing overhead per request, kNN at {saved.op} ({embedder.name}, {len(without)} questions one at a time):")
    for name, xs in (("with the embedding", with_emb), ("without the embedding", without)):
        print(f"  {name}: p50 {percentile(xs, 50) * 1e3:.2f} ms, p99 {percentile(xs, 99) * 1e3:.2f} ms")


def throughput(url: str, headers: dict[str, str], model: str, concurrency: int) -> float:
    """Requests per second with `concurrency` clients each sending ROUNDS requests."""
    def client(c: int) -> None:
        with httpx.Client(timeout=120, headers=headers) as http:
            for r in range(ROUNDS):
                body = {"model": model, "messages": [{"role": "user", "content": f"client {c} request {r}"}]}
                http.post(f"{url}/chat/completions", json=body).raise_for_status()

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(client, range(concurrency)))
    return concurrency * ROUNDS / (time.perf_counter() - start)


def serving_throughput() -> None:
    from tests.serve_fixtures import BACKEND_KEY, FakeBackend, ServeProcess, write_project

    fake = FakeBackend(delay_s=BACKEND_S)
    with tempfile.TemporaryDirectory() as tmp:
        root = write_project(Path(tmp) / "project", fake.url)
        server = ServeProcess(root, "--model", "solver:fake", "--log-level", "warning", "--concurrency", "64")
        try:
            print(f"throughput, fake backend answering in {BACKEND_S * 1e3:.0f} ms, {ROUNDS} requests per client:")
            for c in CONCURRENCY:
                direct = throughput(fake.url, {"Authorization": f"Bearer {BACKEND_KEY}"}, "fake-model", c)
                served = throughput(server.url, {}, "solver:fake", c)
                print(f"  {c:>2} concurrent: direct {direct:.1f} req/s, through dlab serve {served:.1f} req/s, "
                      f"ratio {served / direct:.2f}")
        finally:
            server.stop()
            fake.close()


def main() -> None:
    routing_overhead()
    serving_throughput()


if __name__ == "__main__":
    main()
