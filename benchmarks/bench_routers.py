"""Routers: items routed per second on 10^5 questions, and fit time as a ratio to one epoch of the coordinator DQN.

One run measures everything: fitting every router (default params, one seed, 1 torch thread) on
6473 training questions with 384-dim embeddings (the default's train size and MiniLM's width;
synthetic topics, accuracies and prices as calibrated), routing 10^5 new questions at one
operating point, and one epoch of the coordinator DQN (one seed, management rules, as many
episodes as one pass over the same 6473 items; `coordinator.dqn.train_batched`). The ratio is
router fit seconds / DQN epoch seconds.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from delegation_lab.coordinator.actions import management_actions
from delegation_lab.coordinator.data import SolverTable
from delegation_lab.coordinator.dqn import train_batched
from delegation_lab.coordinator.envs import EnvConfig, VecCoordinatorEnv
from delegation_lab.coordinator.params import DqnParams
from delegation_lab.evaluation import Verifier
from delegation_lab.routers import Inputs
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.study import RoutingData, carve_dev, fit_router

N_TRAIN = 6473
N_ROUTE = int(os.environ.get("BENCH_ROUTERS_ITEMS", "100000"))
DIM = 384
SOLVERS = ["A", "B", "C"]


def problem(n: int, rng: np.random.Generator) -> tuple[Inputs, np.ndarray, np.ndarray]:
    topic = rng.integers(0, 8, n)
    centres = np.random.default_rng(0).normal(size=(8, DIM))
    emb = (centres[topic] + 0.5 * rng.normal(size=(n, DIM))).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    d = topic + 1
    correct = rng.random((n, 3)) < np.stack([np.full(n, 0.967), 1 - 0.03 * d, 1 - 0.08 * d], axis=1)
    cost = np.array([0.00187, 0.00041, 0.000026]) * rng.uniform(0.6, 1.4, (n, 3))
    text = np.stack([rng.integers(50, 400, n), rng.integers(10, 80, n), rng.integers(0, 12, n), d], axis=1).astype(float)
    return Inputs(emb, text), correct, cost


def dqn_epoch_seconds(correct: np.ndarray, cost: np.ndarray) -> float:
    n = correct.shape[0]
    rate = np.tile(correct.mean(axis=0), (n, 1))
    table = SolverTable("train", tuple(SOLVERS), np.array([f"i{i}" for i in range(n)]), np.ones(n, dtype=int), correct,
                        cost, cost.copy(), rate, cost.copy())
    cfg = EnvConfig()
    acts = management_actions([["A"], ["A", "B"], ["A", "B", "C"]], table.solvers)
    episodes = -(-n // cfg.packet_size)
    train_batched(VecCoordinatorEnv(table, acts, cfg, [0], 100.0, episodes=5), DqnParams(learning_starts=5), max_steps=20)  # warm-up
    start = time.perf_counter()
    train_batched(VecCoordinatorEnv(table, acts, cfg, [0], 100.0, episodes=episodes), DqnParams())
    return time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x, correct, cost = problem(N_TRAIN, rng)
    ids = np.array([f"t{i}" for i in range(N_TRAIN)])
    data = RoutingData(ids, carve_dev(ids, np.full(N_TRAIN, "train"), 0.2, 0), x, correct, cost, SOLVERS, "synthetic")
    params = RoutersParams()
    queries, q_correct, q_cost = problem(N_ROUTE, np.random.default_rng(1))
    q_ids = np.array([f"q{i}" for i in range(N_ROUTE)])
    judge = Verifier("judge", 0.02, 0.03, 0, "configured")
    epoch = dqn_epoch_seconds(correct, cost)
    print(f"{N_TRAIN} training items x {DIM}-dim embeddings, {N_ROUTE:,} items routed, 1 torch thread, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"one coordinator DQN epoch ({-(-N_TRAIN // EnvConfig().packet_size)} episodes, 1 seed) = {epoch:.2f} s")
    print(f"{'router':>16} {'fit s':>8} {'fit / DQN epoch':>16} {'route s':>8} {'items routed / s':>17}")
    for name in params.routers:
        start = time.perf_counter()
        router = fit_router(name, params, data, 0)
        fit = time.perf_counter() - start
        knob = list(router.knobs.values())[len(router.knobs) // 2]
        start = time.perf_counter()
        if name == "learned_cascade":  # routing = the full walk with verifier verdicts
            router.evaluate(queries, q_ids, q_correct, q_cost, knob, judge, 0)
        else:
            router.route(queries, knob)
        routed = time.perf_counter() - start
        print(f"{name:>16} {fit:8.2f} {fit / epoch:16.3f} {routed:8.3f} {N_ROUTE / routed:17,.0f}")
        if name == "knn":  # what the inverted-file search costs in prediction quality
            exact = fit_router(name, params.model_copy(update={"knn": params.knn.model_copy(update={"cells": 0})}), data, 0)
            sub = Inputs(queries.embedding[:10_000], queries.text[:10_000])
            gap = np.abs(router.predict(sub)[0] - exact.predict(sub)[0]).mean()
            print(f"{'':>16} (approximate search: mean |predicted accuracy - exact kNN's| = {gap:.3f} on 10^4 items)")


if __name__ == "__main__":
    main()
