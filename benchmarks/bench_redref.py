"""REDEREF: seed-batched engine vs one seed at a time vs the protocol controller (tasks per second).

Runs the same split-knowledge task sequences three ways — the vectorised engine with every seed in
one batch, the same engine one seed per call, and the one-task-at-a-time controller through the
solver protocol — and prints each throughput and the speed-up ratios, all measured in this run.
Hashing embeddings keep the model load out of the measurement.
"""

from __future__ import annotations

import time

import numpy as np

from delegation_lab.params.root import load_params
from delegation_lab.redref import experiments as ex
from delegation_lab.redref.engine import run_sequences
from delegation_lab.redref.memory import HashingEmbedder


def main() -> None:
    params = load_params("params.yaml").redref
    world = ex.build_world(params, HashingEmbedder(params.hashing_dim))
    seeds, n_tasks = 32, 40
    seq = ex.draw_sequences(np.arange(world.pool.size), seeds, n_tasks, np.random.default_rng(0), "bench")
    setup = ex.setup_for(params)

    t = time.perf_counter()
    batched = run_sequences(world.zoo, world.pool, seq, world.sim, setup, np.random.default_rng(1), log_steps=False)
    t_batched = time.perf_counter() - t

    t = time.perf_counter()
    for s in range(seeds):
        run_sequences(world.zoo, world.pool, seq[s : s + 1], world.sim, setup, np.random.default_rng([1, s]), log_steps=False)
    t_single = time.perf_counter() - t

    proto_seeds, proto_tasks = 2, 20
    small = params.model_copy(update={"protocol": params.protocol.model_copy(update={"tasks": proto_tasks, "seeds": proto_seeds})})
    t = time.perf_counter()
    metrics, _, _ = ex.run_protocol(world, small)
    t_proto = time.perf_counter() - t

    n = seeds * n_tasks
    rate_b, rate_s, rate_p = n / t_batched, n / t_single, proto_seeds * proto_tasks / t_proto
    print(f"engine, {seeds} seeds in one batch: {rate_b:,.0f} tasks/s ({batched.calls.mean():.2f} calls per task)")
    print(f"engine, one seed per call:        {rate_s:,.0f} tasks/s")
    print(f"protocol controller (Solver API):  {rate_p:,.1f} tasks/s ({metrics['calls']:.2f} calls per task)")
    print(f"seed batching speed-up: {rate_b / rate_s:.1f}x; engine vs protocol controller: {rate_b / rate_p:.0f}x")


if __name__ == "__main__":
    main()
