"""Ray executor of `solve`: answers/s of the local executor and of Ray with 1 and 2 workers, measured in one run.

Two backends: a latency-bound one (`openai_compat` against the tests' fake server on 127.0.0.1,
sleeping SLEEP_S per request, each worker sending one request at a time) and the CPU-bound
simulated backend. Ratios are of cache-fill wall time (actor start-up excluded, printed apart), on a
2-CPU local Ray instance. Target: Ray 2 workers >= 1.7x Ray 1 worker on the latency-bound backend.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.solvers.test_backend_openai_compat import FakeServer  # noqa: E402  (reuses the tests' fake endpoint)

from delegation_lab.data.params import ArithParams
from delegation_lab.solvers.params import SolverParams  # noqa: E402
from delegation_lab.data.arith import generate  # noqa: E402
from delegation_lab.solvers import build_solver  # noqa: E402
from delegation_lab.solvers.cache import AnswerCache  # noqa: E402
from delegation_lab.solvers.executor import build_executor  # noqa: E402

SLEEP_S = 0.1
LATENCY_ITEMS = 160
SIMULATED_ITEMS = 3000
PRICE = {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 3.0}
EXECUTORS = {"local": {}, "ray x1": {"kind": "ray", "workers": 1}, "ray x2": {"kind": "ray", "workers": 2}}


def measure(params: SolverParams, items, tmp: Path) -> tuple[float, float]:
    """(answers/s of the fill, seconds to start the executor)."""
    solver = build_solver("bench", params)
    requests = [solver.request(i) for i in items]
    t0 = time.perf_counter()
    executor = build_executor("bench", params)
    started = time.perf_counter() - t0
    try:
        cache = AnswerCache(tmp / "bench.parquet", tmp / "journal")
        run = cache.fill(solver, requests, batch_size=params.batch_size, progress=False, executor=executor)
    finally:
        executor.close()
    assert run.backend_calls == len(items) and run.retries == 0
    return run.backend_calls / run.seconds, started


def report(title: str, speeds: dict[str, tuple[float, float]]) -> None:
    print(f"{title}:")
    for name, (rate, started) in speeds.items():
        print(f"  {name:7s} {rate:9.1f} answers/s  (executor start {started:.1f} s)")
    local, one, two = (speeds[n][0] for n in EXECUTORS)
    print(f"  ratios: ray x2 / ray x1 = {two / one:.2f}x, ray x1 / local = {one / local:.2f}x, "
          f"ray x2 / local = {two / local:.2f}x")


def main() -> None:
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    server = FakeServer()
    server.sleep_s = SLEEP_S
    try:
        with tempfile.TemporaryDirectory() as tmp:
            latency_items = generate(ArithParams(min_steps=1, max_steps=4), LATENCY_ITEMS, seed=5)
            speeds = {}
            for name, executor in EXECUTORS.items():
                params = SolverParams(
                    backend="openai_compat", model="fake-model", price=PRICE, batch_size=20,
                    openai_compat={"base_url": server.url, "api_key_env": None, "concurrency": 1, "max_retries": 0},
                    executor={**executor, "batch_size": 20} if executor else {},
                )
                speeds[name] = measure(params, latency_items, Path(tmp) / f"latency-{name}")
            report(f"openai_compat fake server, {SLEEP_S * 1000:.0f} ms per request, 1 request at a time per worker, "
                   f"{LATENCY_ITEMS} items", speeds)
            sim_items = generate(ArithParams(min_steps=1, max_steps=8), SIMULATED_ITEMS, seed=6)
            speeds = {}
            for name, executor in EXECUTORS.items():
                params = SolverParams(backend="simulated", model="sim", price=PRICE, simulated={"skill": 1.5},
                                      executor={**executor, "batch_size": 250} if executor else {})
                speeds[name] = measure(params, sim_items, Path(tmp) / f"sim-{name}")
            report(f"simulated backend (CPU-bound), {SIMULATED_ITEMS} items", speeds)
    finally:
        server.close()
        ray.shutdown()


if __name__ == "__main__":
    main()
