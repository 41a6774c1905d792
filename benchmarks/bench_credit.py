"""Shapley credit: coalitions per second of the batched exact pass vs one trajectory at a time vs a per-coalition loop, and 10-agent teams against the 1 s budget.

Games are planner-worker rollouts of the credit study's environment (`env.TeamGame`) with 5-hop
questions: teams of 10 agents (the planner and 9 workers, 2^10 = 1024 coalitions) and of 4 agents
(the planner and 3 workers, 16 coalitions). Three ways to get every agent's exact Shapley value, on
one thread:

- batched: every coalition of every trajectory in one call of the value function (`shapley`);
- per trajectory: the same, one trajectory per call;
- per coalition: the textbook formula, v(S) evaluated coalition by coalition (`shapley_by_definition`).

Prints coalitions per second of each, their ratios, and the share of the 1 s per-trajectory budget
that one 10-agent trajectory takes alone (the slowest way a user would call it). A last line times
the closed form the training uses for its own game (`team_shapley`: per-hop generating functions,
no coalition replays) against the batched enumeration on the same 10-agent rollouts.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from delegation_lab.credit.env import TeamGame, TeamRollouts, ToolTable, make_draws, make_pool, team_rollouts
from delegation_lab.credit.params import EnvParams
from delegation_lab.credit.shapley import shapley, shapley_by_definition
from delegation_lab.credit.team_shapley import team_shapley

TRAJECTORIES = int(os.environ.get("BENCH_CREDIT_TRAJECTORIES", "2000"))
AGENTS = 10


def team_rollouts_of(n: int, agents: int = AGENTS) -> TeamRollouts:
    """n rollouts of 5-hop questions whose planner delegated to exactly `agents - 1` workers."""
    # every question has 5 hops; model_copy skips the params check that refuses 5 hops x 2 workers
    # (11 agents possible) for training: here the teams are built by hand with exactly `agents`
    env = EnvParams().model_copy(update={"hop_probs": [0.0, 0.0, 0.0, 1.0]})
    tools = ToolTable.of(env)
    rng = np.random.default_rng(0)
    pool = make_pool(env, n, rng)
    H, K = pool.max_hops, env.max_workers_per_hop
    per_hop = np.zeros(H, dtype=np.int64)
    for k in range(agents - 1):  # one worker per hop first, then a second one
        per_hop[k % H] += 1
    n_workers = np.tile(per_hop, (n, 1))
    tool = rng.integers(1, 4, (n, H, K))
    roll = team_rollouts(env, tools, pool, np.arange(n), n_workers, tool, make_draws(rng, (n,), H, K))
    assert (1 + roll.worker_present.sum(axis=(1, 2)) == agents).all()
    return roll


def subset(roll: TeamRollouts, idx) -> TeamRollouts:
    return TeamRollouts(*(getattr(roll, f)[idx] for f in TeamRollouts.__dataclass_fields__))


def rates(roll: TeamRollouts, agents: int) -> tuple[float, float, np.ndarray]:
    """(batched coalitions/s, one-trajectory-per-pass coalitions/s, batched credit)."""
    n = roll.L
    game = TeamGame(roll, token_cost=0.01)
    shapley(TeamGame(subset(roll, slice(0, 4)), 0.01))  # warm-up
    t0 = time.perf_counter()
    batched = shapley(game, "exact")
    t_batched = time.perf_counter() - t0
    few = min(200, n)
    t0 = time.perf_counter()
    single = [shapley(TeamGame(subset(roll, slice(i, i + 1)), 0.01), "exact").credit[0] for i in range(few)]
    t_single = (time.perf_counter() - t0) / few
    np.testing.assert_allclose(np.array(single), batched.credit[:few], atol=1e-12)
    return n * 2**agents / t_batched, 2**agents / t_single, batched.credit


def main() -> None:
    torch.set_num_threads(1)
    print(f"exact Shapley of planner-worker rollouts, {TRAJECTORIES} trajectories per team size, one thread")
    roll = team_rollouts_of(TRAJECTORIES, AGENTS)
    rate_batched, rate_single, credit = rates(roll, AGENTS)

    one = TeamGame(subset(roll, slice(0, 1)), 0.01)
    slots = np.flatnonzero(one.present[0])

    def value(s: frozenset) -> float:
        mask = np.zeros((1, 1, one.present.shape[1]), dtype=bool)
        mask[0, 0, slots[list(s)]] = True
        return float(one.values(np.array([0]), mask)[0, 0])

    t0 = time.perf_counter()
    ref = shapley_by_definition(value, AGENTS)
    t_loop = time.perf_counter() - t0
    np.testing.assert_allclose(ref, credit[0, slots], atol=1e-12)
    rate_loop = AGENTS * 2**AGENTS / t_loop  # the formula evaluates 2 coalitions per (agent, coalition without it)
    print(f"  {AGENTS} agents ({2**AGENTS} coalitions each): batched {rate_batched:,.0f} coalitions/s; one trajectory "
          f"per pass {rate_single:,.0f} (batched {rate_batched / rate_single:.1f}x); per-coalition loop {rate_loop:,.0f} "
          f"(one pass per trajectory {rate_single / rate_loop:.0f}x faster, batched {rate_batched / rate_loop:.0f}x)")
    small = 4
    rb, rs, _ = rates(team_rollouts_of(TRAJECTORIES, small), small)
    print(f"  {small} agents ({2**small} coalitions each): batched {rb:,.0f} coalitions/s; one trajectory per pass "
          f"{rs:,.0f} (batched {rb / rs:.0f}x)")
    game = TeamGame(roll, token_cost=0.01)
    t0 = time.perf_counter()
    closed = team_shapley(game)
    t_closed = time.perf_counter() - t0
    np.testing.assert_allclose(closed, credit, atol=1e-12)
    t_enum = TRAJECTORIES * 2**AGENTS / rate_batched
    print(f"  closed form on the same {TRAJECTORIES} {AGENTS}-agent rollouts: {1e3 * t_closed:.1f} ms vs batched "
          f"enumeration {1e3 * t_enum:.1f} ms ({t_enum / t_closed:.0f}x), equal to 1e-12")
    per_trajectory = 2**AGENTS / rate_single
    print(f"  one {AGENTS}-agent trajectory alone takes {per_trajectory:.3%} of the 1 s budget "
          f"(batched: {2**AGENTS / rate_batched:.3%} per trajectory); the three ways agree to 1e-12")


if __name__ == "__main__":
    main()
