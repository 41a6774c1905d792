"""Coordinator DQN: 20 seeds batched in one process vs 20 sequential runs of the single-seed reference loop.

Both train on the same number of environment steps per seed (management and delegation envs, the
default Table 3 network and the cached answers in data/ when the pipeline has run, otherwise a
synthetic cache with the calibrated accuracies and prices), on one torch thread. Prints, per env,
seed-steps per second of each and the speedup, and checks that the batched lane of seed 0 took the
reference loop's actions. Delegation uses the 52 answering joint actions the stage trains on. Last,
the whole stage against its training loops from the last `dvc repro coordinator` (ratios only).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from delegation_lab.coordinator.actions import answering_actions, delegation_actions, management_actions
from delegation_lab.coordinator.data import SolverTable, load_coordinator_data
from delegation_lab.coordinator.dqn import train_batched
from delegation_lab.coordinator.envs import DelegationEnv, EnvConfig, ManagementEnv, VecCoordinatorEnv
from delegation_lab.coordinator.params import DqnParams
from delegation_lab.coordinator.reference import train_reference
from delegation_lab.pipeline.layout import Layout

SEEDS = 20
STEPS = int(os.environ.get("BENCH_COORDINATOR_STEPS", "2000"))
ROUTES = [["A"], ["A", "B"], ["A", "B", "C"]]
ROOT = Path(__file__).resolve().parents[1]


def table() -> tuple[SolverTable, str]:
    layout = Layout(ROOT)
    if layout.labels.exists() and layout.ability_map.exists():
        return load_coordinator_data(layout, ["A", "B", "C"], True, None).train, "cached answers in data/"
    rng = np.random.default_rng(0)
    n = 6473
    diff = rng.integers(1, 9, n)
    correct = rng.random((n, 3)) < np.array([0.967, 0.845, 0.537])
    cost = np.array([0.00187, 0.00041, 0.000026]) * rng.uniform(0.6, 1.4, (n, 3))
    rate = np.tile(correct.mean(axis=0), (n, 1))
    return SolverTable("train", ("A", "B", "C"), np.array([f"i{i}" for i in range(n)]), diff, correct, cost,
                       cost.copy(), rate, cost.copy()), "a synthetic cache (run `dvc repro ability_map` for the real one)"


def main() -> None:
    torch.set_num_threads(1)
    t, source = table()
    p = DqnParams(learning_starts=STEPS // 3)
    cfg = EnvConfig()
    print(f"{SEEDS} seeds x {STEPS} env steps each ({STEPS - p.learning_starts} updates), {source}, 1 torch thread")
    for kind in ("management", "delegation"):
        # delegation: the 52 answering joint actions the stage trains on (not all 189)
        acts = management_actions(ROUTES, t.solvers) if kind == "management" else answering_actions(delegation_actions(t.solvers))
        # warm-up outside the clock: torch's lazy imports on the first optimiser step, allocator
        warm = DqnParams(learning_starts=5)
        train_batched(VecCoordinatorEnv(t, acts, cfg, [0, 1], 100.0, episodes=10), warm, max_steps=20)
        env = ManagementEnv(t, ROUTES, cfg) if kind == "management" else DelegationEnv(t, cfg, answering=True)
        train_reference(env, 0, warm, episodes=10, max_steps=20)
        vec = VecCoordinatorEnv(t, acts, cfg, list(range(SEEDS)), 100.0, episodes=10_000)
        trace: list = []
        start = time.perf_counter()
        train_batched(vec, p, max_steps=STEPS, trace=trace)
        batched = time.perf_counter() - start
        start = time.perf_counter()
        first = None
        for seed in range(SEEDS):
            env = ManagementEnv(t, ROUTES, cfg) if kind == "management" else DelegationEnv(t, cfg, answering=True)
            ref = train_reference(env, seed, p, episodes=10_000, max_steps=STEPS, keep_trace=seed == 0)
            first = first or ref
        sequential = time.perf_counter() - start
        agree = np.array_equal(np.array([a[0] for a, _ in trace]), np.array(first.actions))
        print(f"{kind:>10}: batched {SEEDS * STEPS / batched:8.0f} seed-steps/s, sequential reference "
              f"{SEEDS * STEPS / sequential:6.0f} seed-steps/s -> speedup {sequential / batched:.1f}x; "
              f"seed 0 actions agree: {'yes' if agree else 'NO'}")
    denormal_adam()
    stage_overhead()


def denormal_adam(lanes: int = 40, steps: int = 100) -> None:
    """Fused Adam on a delegation batch's parameters (40 lanes, 13 -> 128 -> 52) whose gradients are
    zero and moments denormal floats, as a weight that never gets a gradient reaches during training
    (its second moment spends ~16k updates in that range): with denormals kept, then flushed to zero."""
    from contextlib import nullcontext

    from delegation_lab.coordinator.dqn import make_adam
    from delegation_lab.pipeline.torch_runtime import flushed_denormals, torch_threads

    def time_steps(flush: bool) -> float:
        params = [torch.zeros(lanes, 13, 128, requires_grad=True), torch.zeros(lanes, 52, 128, requires_grad=True)]
        opt = make_adam(params, 1e-3)
        for w in params:
            w.grad = torch.zeros_like(w)
        opt.step()
        for state in opt.state.values():
            state["exp_avg"].fill_(1e-39)
            state["exp_avg_sq"].fill_(1e-39)
        with flushed_denormals() if flush else nullcontext():
            start = time.perf_counter()
            for _ in range(steps):
                opt.step()
            return time.perf_counter() - start

    with torch_threads(1):  # as the coordinator trains; the flush is the calling thread's only
        kept, flushed = time_steps(False), time_steps(True)
    print(f"denormal Adam moments ({lanes} lanes, {steps} fused steps): flushing to zero is {kept / flushed:.1f}x faster "
          f"(what torch_runtime.flushed_denormals buys the coordinator's late updates)")


def stage_overhead() -> None:
    """The whole stage against its DQN training loops, from the last `dvc repro coordinator`
    (metrics/coordinator.json `timing`, metrics/timings/coordinator.json): ratios only, since
    the seconds depend on the machine and its load."""
    metrics, timings = ROOT / "metrics" / "coordinator.json", ROOT / "metrics" / "timings" / "coordinator.json"
    if not (metrics.exists() and timings.exists()):
        print("stage overhead: no metrics/coordinator.json yet (run `dvc repro coordinator`)")
        return
    timing = json.loads(metrics.read_text()).get("timing", {})
    batches = timing.get("dqn_batch_seconds")
    if not batches:
        print("stage overhead: metrics/coordinator.json has no timing.dqn_batch_seconds (an older run)")
        return
    stage = json.loads(timings.read_text())
    loops = sum(batches.values())
    print(f"stage overhead: whole stage wall / longest DQN loop {stage['seconds'] / max(batches.values()):.2f}x, "
          f"stage CPU / all DQN loops {stage['cpu_seconds'] / loops:.2f}x, "
          f"DQN loops side by side: {loops / stage['seconds']:.2f} loop-seconds per wall second")


if __name__ == "__main__":
    main()
