"""The seed-batched DQN against the plain single-seed reference loop: same initial weights, same
RNG streams, same actions and Q-values step by step, lanes independent of each other, finished
lanes frozen at their last episode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from delegation_lab.coordinator.actions import delegation_actions, management_actions
from delegation_lab.coordinator.dqn import (
    EnsembleQ,
    LaneUniforms,
    epsilon_at,
    init_layers,
    layer_sizes,
    train_batched,
)
from delegation_lab.coordinator.envs import DelegationEnv, EnvConfig, ManagementEnv, VecCoordinatorEnv
from delegation_lab.coordinator.params import DqnParams
from delegation_lab.coordinator.reference import q_network, train_reference

from tests.coordinator.test_coordinator_envs import ABC, ROUTES, random_table

FAST = DqnParams(learning_starts=40, epsilon_decay_steps=150, target_sync=25, batch_size=16)
Q_TOL = 5e-3  # float32 drift between the fused batched Adam and the plain one after a few hundred updates
# (the kernels differ by CPU: up to 3.5e-3 on an AVX-512/AMX machine; the actions agree exactly)


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_epsilon_schedule_is_linear_in_gradient_steps():
    p = DqnParams()
    assert epsilon_at(0, p) == 1.0
    assert epsilon_at(10_000, p) == pytest.approx(0.525)
    assert epsilon_at(20_000, p) == pytest.approx(0.05) and epsilon_at(50_000, p) == pytest.approx(0.05)


def test_lane_uniforms_in_chunks_are_the_sequential_stream():
    draws = LaneUniforms([np.random.default_rng([3, 2]), np.random.default_rng([4, 2])], width=2, chunk=7)
    got = np.stack([draws.next() for _ in range(20)])  # [20, lanes, 2]
    for lane, seed in enumerate((3, 4)):
        rng = np.random.default_rng([seed, 2])
        np.testing.assert_array_equal(got[:, lane], np.stack([rng.random(2) for _ in range(20)]))


def test_ensemble_layers_hold_each_seeds_reference_init():
    sizes = layer_sizes(13, 189, DqnParams(hidden_layers=2))
    net = EnsembleQ(sizes, [0, 7, 19], torch.device("cpu"))
    for lane, seed in enumerate((0, 7, 19)):
        for (w, b), (w_ref, b_ref) in zip(net.lane_layers(lane), init_layers(seed, sizes), strict=True):
            assert torch.equal(w, w_ref) and torch.equal(b, b_ref)
    ref = q_network(sizes, 7)
    x = torch.randn(5, 13)
    xs = x.expand(3, 5, 13).contiguous()
    q = EnsembleQ.forward(net.params, xs)
    np.testing.assert_allclose(q[1].detach(), ref(x).detach(), atol=1e-6)
    taken = torch.randint(0, 189, (3, 5))
    np.testing.assert_allclose(net.forward_taken(net.params, xs, taken).detach(),
                               q.gather(2, taken[:, :, None])[:, :, 0].detach(), atol=1e-6)


def batched_trace(env: VecCoordinatorEnv, p: DqnParams, steps: int) -> tuple[np.ndarray, np.ndarray]:
    trace: list = []
    train_batched(env, p, max_steps=steps, trace=trace)
    return np.stack([a for a, _ in trace]), np.stack([q for _, q in trace])  # [T, L], [T, L, A]


@pytest.mark.parametrize("kind", ["management", "delegation"])
def test_one_seed_batched_takes_the_reference_loops_actions(kind):
    t = random_table(120, seed=1)
    cfg = EnvConfig(packet_size=8)
    steps = 400
    acts = management_actions(ROUTES, ABC) if kind == "management" else delegation_actions(ABC)
    vec = VecCoordinatorEnv(t, acts, cfg, [3], 100.0, episodes=1000)
    actions, q = batched_trace(vec, FAST, steps)
    single = ManagementEnv(t, ROUTES, cfg) if kind == "management" else DelegationEnv(t, cfg)
    ref = train_reference(single, 3, FAST, episodes=1000, max_steps=steps, keep_trace=True)
    assert len(ref.actions) == steps and ref.updates == steps - FAST.learning_starts
    np.testing.assert_array_equal(actions[:, 0], np.array(ref.actions))
    np.testing.assert_allclose(q[:, 0], np.stack(ref.q_values), atol=Q_TOL)
    # the test means something: most late actions were greedy, and greedy choices vary
    greedy_steps = steps - FAST.learning_starts - FAST.epsilon_decay_steps
    assert greedy_steps >= 200
    assert len(set(actions[-greedy_steps:, 0].tolist())) > 1


def test_each_lane_of_a_batch_is_its_own_seeds_reference_run():
    t = random_table(120, seed=2)
    cfg = EnvConfig(packet_size=8)
    seeds = [5, 6, 7]
    vec = VecCoordinatorEnv(t, delegation_actions(ABC), cfg, seeds, 100.0, episodes=1000)
    actions, q = batched_trace(vec, FAST, 300)
    for lane, seed in enumerate(seeds):
        ref = train_reference(DelegationEnv(t, cfg), seed, FAST, episodes=1000, max_steps=300, keep_trace=True)
        np.testing.assert_array_equal(actions[:, lane], np.array(ref.actions))
        np.testing.assert_allclose(q[:, lane], np.stack(ref.q_values), atol=Q_TOL)


def test_lanes_that_finish_early_are_frozen_at_their_last_update():
    t = random_table(60, seed=3)
    cfg = EnvConfig(packet_size=6)
    seeds = [1, 2]
    p = DqnParams(learning_starts=20, epsilon_decay_steps=60, target_sync=10, batch_size=8, hidden=32)
    vec = VecCoordinatorEnv(t, management_actions(ROUTES, ABC), cfg, seeds, 100.0, episodes=12)
    result = train_batched(vec, p)
    assert result.steps[0] != result.steps[1]  # the lanes finish at different iterations
    probe = np.random.default_rng(0).random((50, vec.obs_dim)).astype(np.float32)
    for lane, seed in enumerate(seeds):
        ref = train_reference(ManagementEnv(t, ROUTES, cfg), seed, p, episodes=12)
        assert ref.steps == result.steps[lane] and ref.updates == result.updates[lane]
        np.testing.assert_allclose(vec.stats["return"][lane], ref.returns, atol=1e-9)
        got = result.policy.subset([lane] * 50).q_values(probe)
        want = ref.q(torch.from_numpy(probe)).detach().numpy()
        np.testing.assert_allclose(got, want, atol=Q_TOL)


def test_a_no_map_lane_beside_a_map_lane_is_the_no_map_reference_run():
    """dqn_map and dqn_nomap train in one batch: the env zeroes the no-map lane's map features and
    its network is the no-map init embedded with zero rows, which stay zero."""
    t = random_table(120, seed=4)
    cfg = EnvConfig(packet_size=8)
    sees_map = np.array([True, False])
    vec = VecCoordinatorEnv(t, management_actions(ROUTES, ABC), cfg, [5, 5], 100.0, episodes=1000, map_lanes=sees_map)
    inputs = np.ones((2, vec.obs_dim), dtype=bool)
    inputs[1, :6] = False
    trace: list = []
    result = train_batched(vec, FAST, max_steps=300, trace=trace, lane_inputs=inputs)
    actions = np.stack([a for a, _ in trace])
    for lane, use_map in enumerate(sees_map):
        single = ManagementEnv(t, ROUTES, EnvConfig(packet_size=8, use_map=bool(use_map)))
        ref = train_reference(single, 5, FAST, episodes=1000, max_steps=300, keep_trace=True)
        np.testing.assert_array_equal(actions[:, lane], np.array(ref.actions))
    nomap = result.policy.lanes([1], inputs[1])
    assert nomap.sizes[0] == vec.obs_dim - 6
    probe = np.random.default_rng(0).random((20, vec.obs_dim - 6)).astype(np.float32)
    want = ref.q(torch.from_numpy(probe)).detach().numpy()
    np.testing.assert_allclose(nomap.subset([0] * 20).q_values(probe), want, atol=Q_TOL)


def test_the_replay_buffer_gives_back_each_lanes_transitions():
    from delegation_lab.coordinator.dqn import ReplayBuffer

    rng = np.random.default_rng(0)
    L, cap, D = 3, 10, 4
    buf = ReplayBuffer(L, cap, D)
    rows = []
    for slot in range(cap):
        row = (rng.random((L, D), dtype=np.float32), rng.random((L, D), dtype=np.float32),
               rng.integers(0, 189, L), rng.normal(size=L), rng.random(L) < 0.3)
        buf.add(slot, *row)
        rows.append(row)
    lanes, idx = np.array([0, 2]), np.array([[9, 0, 3], [1, 1, 8]])
    obs, nxt, act, rew, done = buf.sample(lanes, idx)
    for i, lane in enumerate(lanes):
        for j, slot in enumerate(idx[i]):
            o, n, a, r, d = rows[slot]
            np.testing.assert_array_equal(obs[i, j], o[lane])
            np.testing.assert_array_equal(nxt[i, j], n[lane])
            assert act[i, j] == a[lane] and act.dtype == np.int64
            assert rew[i, j] == np.float32(r[lane]) and done[i, j] == float(d[lane])


def test_denormals_are_flushed_inside_the_block_only():
    """A process-wide flush would leak into other code (numpy, hypothesis' float strategies)."""
    from delegation_lab.pipeline.torch_runtime import flushed_denormals

    tiny = torch.tensor([1e-39], dtype=torch.float32)  # a float32 denormal
    assert (tiny * 1.0).item() != 0.0
    with flushed_denormals() as supported:
        if not supported:
            pytest.skip("this CPU cannot flush denormals")
        assert (tiny * 1.0).item() == 0.0
    assert (tiny * 1.0).item() != 0.0
