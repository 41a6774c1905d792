"""Answer cache: simulated caching of every default item x 3 solvers, cold vs full-cache rerun.

Prints items/s, the cold / warm ratio, and the backend calls of the rerun (must be 0).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from delegation_lab.params.root import load_params
from delegation_lab.data import build_items
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.cache import AnswerCache


def main() -> None:
    params = load_params("params.yaml")
    t0 = time.perf_counter()
    items = build_items(params.data)
    t_items = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        cold = warm = 0.0
        rerun_calls = 0
        for name, solver_params in params.solvers.items():
            solver = build_solver(name, solver_params)
            cache = AnswerCache(Path(tmp) / f"{name}.parquet", Path(tmp) / "journal" / name)
            requests = [solver.request(i) for i in items]
            t = time.perf_counter()
            cache.fill(solver, requests, batch_size=solver_params.batch_size, progress=False)
            cold += time.perf_counter() - t
            t = time.perf_counter()
            rerun_calls += cache.fill(solver, requests, progress=False).backend_calls
            warm += time.perf_counter() - t
    n = len(items) * len(params.solvers)
    print(f"items: {len(items)} generated ({len(items) / t_items:,.0f} items/s)")
    print(f"cold fill: {n} answers, {n / cold:,.0f} answers/s ({cold:.1f} s for all {len(params.solvers)} solvers)")
    print(f"full-cache rerun: {rerun_calls} backend calls; cold/warm time ratio {cold / warm:.1f}x")


if __name__ == "__main__":
    main()
