"""The coordinator study end to end, minus file output: for each environment (management,
delegation) train the DQN coordinators with every seed batched, roll out the baselines on the same
training packets, evaluate everything greedily on the held-out split, and sweep the cost weight.

Every method of one environment shares the lane seeds, hence the training packets (the packet
stream is the env's own) and the verifier's verdicts (one table per split and lane seed, from the
shared `Verifier`: common random numbers); the held-out evaluation plays the test split once, in
order, in packets of `packet_size` (the last one shorter), with exploration off.
Training runs under torch's deterministic algorithms with a fixed thread count.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from delegation_lab.coordinator import baselines
from delegation_lab.coordinator.actions import (
    ActionTable,
    answering_actions,
    delegation_actions,
    management_actions,
)
from delegation_lab.coordinator.data import (
    CoordinatorData,
    SolverTable,
    check_solver_names,
    load_coordinator_data,
)
from delegation_lab.coordinator.dqn import GreedyPolicy, TrainResult, train_batched
from delegation_lab.coordinator.envs import EnvConfig, VecCoordinatorEnv
from delegation_lab.coordinator.params import CoordinatorParams, DqnParams
from delegation_lab.errors import InputError
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.parallel import spawn_pool
from delegation_lab.pipeline.phases import Phases, stopwatch
from delegation_lab.pipeline.torch_runtime import deterministic_torch, resolve_device


@dataclass
class MethodRun:
    """One method in one environment, every lane (seed, or seed x cost weight) together."""

    study: str  # management | delegation
    method: str  # dqn_map, dqn_nomap, always_a, mgmt_policy, random, oracle
    names: list[str]  # per lane: trajectory / MLflow method name, e.g. management.dqn_map(.lambda10)
    seeds: np.ndarray  # [L]
    cost_weights: np.ndarray  # [L]
    actions: ActionTable
    use_map: bool
    train: VecCoordinatorEnv  # training episodes (stats, step record)
    test: VecCoordinatorEnv  # held-out greedy evaluation
    epsilon: np.ndarray | None  # [L, episodes] for DQN methods
    policy: GreedyPolicy | None
    seconds: float
    solver_set: list[str]
    sweep: bool = False
    points: list[str] | None = None  # per lane operating point (fixed orders: the order); None = lambda
    lane_solvers: list[list[str]] | None = None  # per lane solver set, where it differs by lane
    extra: dict | None = None  # method-specific figures for its metrics block (e.g. the chosen checkpoints)

    @property
    def lanes(self) -> int:
        return len(self.seeds)

    def operating_point(self, lane: int) -> str:
        return self.points[lane] if self.points is not None else f"lambda={self.cost_weights[lane]:g}"

    def solvers_of(self, lane: int) -> list[str]:
        return self.lane_solvers[lane] if self.lane_solvers is not None else self.solver_set



DQN_METHODS = ("dqn_map", "dqn_nomap")
SIDE_BY_SIDE = ("always_a", "random", "oracle")  # fixed policies that play as lanes of one env


@dataclass(frozen=True)
class DqnMember:
    """One method's lanes in an environment's DQN batch."""

    method: str
    seeds: np.ndarray
    weights: np.ndarray
    names: list[str]
    sweep: bool = False


@dataclass(frozen=True)
class EnvLayout:
    """The solver columns both environments share (one observation layout) and the routes."""

    columns: tuple[str, ...]
    routes: list[list[str]]
    manager: str


def env_layout(params: CoordinatorParams, solver_order: list[str]) -> EnvLayout:
    columns = tuple(params.agents) if params.agents is not None else tuple(solver_order)
    routes = params.routes if params.routes is not None else [list(columns[: k + 1]) for k in range(len(columns))]
    return EnvLayout(columns, [list(r) for r in routes], routes[0][0])


def prepare_inputs(params: CoordinatorParams, solver_order: list[str], bucket_edges: list[int] | None,
                   layout: Layout, bucket_by: str = "difficulty") -> tuple[EnvLayout, CoordinatorData]:
    """Every check that needs data, before any training: solver names, device, the ability map,
    a complete cache for the train and test splits, enough train items for one packet."""
    for i, route in enumerate(params.routes or []):
        check_solver_names(route, solver_order, f"coordinator.routes[{i}]")
    if params.agents is not None:
        check_solver_names(params.agents, solver_order, "coordinator.agents")
    env = env_layout(params, solver_order)
    off = sorted({s for r in env.routes for s in r} - set(env.columns))
    if off:
        raise InputError(f"params.yaml coordinator.routes use {off}, which coordinator.agents {list(env.columns)} "
                         "leaves out; both environments share one observation layout over the agents")
    try:
        resolve_device(params.device, "coordinator.device")
    except ValueError as e:
        raise InputError(f"params.yaml coordinator.device: {e}") from None
    data = load_coordinator_data(layout, list(env.columns), "dqn_map" in params.methods, bucket_edges, bucket_by)
    if data.train.n_items < params.packet_size:
        raise InputError(f"params.yaml coordinator.packet_size {params.packet_size} exceeds the "
                         f"{data.train.n_items} train items; lower it or raise data.train_size")
    return env, data


def _progress_bar(enabled: bool, total: int, desc: str) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    if not enabled:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="ep", leave=False)
    state = {"n": 0}

    def update(n: int) -> None:
        if n > state["n"]:
            bar.update(n - state["n"])
            state["n"] = n

    return update, bar.close


def fixed_apart(study: bytes, env_study: str, seeds: np.ndarray, weights: np.ndarray) -> list[MethodRun]:
    """`CoordinatorStudy.fixed_runs` in a worker process (numpy rollouts only). The study comes
    pickled at submission: the pool's feeder thread would otherwise pickle it while this process
    goes on changing it."""
    return pickle.loads(study).fixed_runs(env_study, seeds, weights)


def train_apart(env: VecCoordinatorEnv, p: DqnParams, device: str, lane_inputs: np.ndarray | None,
                threads: int | None) -> tuple[TrainResult, float]:
    """`train_batched` in a worker process, under the same deterministic torch settings; with the
    seconds its training loop took there."""
    with deterministic_torch(threads), stopwatch() as loop:
        result = train_batched(env, p, device, lane_inputs=lane_inputs)
    return result, loop.seconds


class CoordinatorStudy:
    def __init__(self, params: CoordinatorParams, data: CoordinatorData, layout: EnvLayout, progress: bool = False,
                 log: Callable[[str], None] = print, on_run: Callable[[MethodRun], None] | None = None,
                 verifier: Verifier | None = None, phases: Phases | None = None):
        self.p, self.data, self.layout, self.progress, self.log = params, data, layout, progress, log
        # each environment's DQN batch is a phase `dqn_batch_<study>` (the stage passes its own phases)
        self.phases = phases if phases is not None else Phases()
        self.verifier = verifier if verifier is not None else Verifier("gold", source="gold labels")
        self._verdicts: dict[tuple[str, int], np.ndarray] = {}
        self.on_run = on_run  # called with each finished run (e.g. to log it while the next one trains)
        self.train_table = data.train.select(layout.columns)
        self.test_table = data.test.select(layout.columns)
        self.dev_table = data.dev.select(layout.columns) if data.dev is not None else None
        self.selected: dict[str, tuple[GreedyPolicy, dict]] = {}  # per method: checkpoint chosen on the dev split
        self.device = resolve_device(params.device, "coordinator.device")
        self.runs: list[MethodRun] = []
        self._waiting: set[str] = set()  # studies whose fixed baselines play in the worker, not yet collected

    def config(self, use_map: bool) -> EnvConfig:
        p = self.p
        return EnvConfig(p.packet_size, p.max_attempts, p.fail_penalty, p.handoff_fee, use_map, p.rejected_last_answer)

    def limit(self, method: str) -> int:
        return baselines.attempt_limit(method, self.p.rejected_last_answer, self.p.max_attempts)

    def actions(self, study: str) -> ActionTable:
        if study == "management":
            return management_actions(self.layout.routes, self.layout.columns)
        return answering_actions(delegation_actions(self.layout.columns))

    def verdicts(self, table: SolverTable, seeds: np.ndarray) -> np.ndarray:
        """[lanes, items, solvers]: the verifier's verdict on every cached answer, per lane seed."""
        for seed in np.unique(seeds):
            key = (table.split, int(seed))
            if key not in self._verdicts:
                self._verdicts[key] = self.verifier.table(list(table.solvers), table.item_ids, table.correct, [int(seed)])[0]
        return np.stack([self._verdicts[(table.split, int(s))] for s in seeds])

    def env(self, split: str, study: str, use_map: bool, seeds: np.ndarray, weights: np.ndarray,
            record: bool | None = None, map_lanes: np.ndarray | None = None,
            attempt_limits: np.ndarray | None = None) -> VecCoordinatorEnv:
        """The train (sampled packets, `episodes` of them) or test (every item once, in order) env;
        `attempt_limits`: per lane, the attempts before a rejected item ends (None: max_attempts)."""
        table = {"train": self.train_table, "test": self.test_table, "dev": self.dev_table}[split]
        record = self.p.trajectories if record is None else record
        episodes, mode = (self.p.episodes, "sample") if split == "train" else (None, "sequential")
        return VecCoordinatorEnv(table, self.actions(study), self.config(use_map), seeds, weights, episodes, mode, record,
                                 verdicts=self.verdicts(table, seeds), map_lanes=map_lanes, attempt_limits=attempt_limits)

    def envs(self, study: str, use_map: bool, seeds: np.ndarray, weights: np.ndarray, record: bool | None = None,
             attempt_limits: np.ndarray | None = None) -> tuple[VecCoordinatorEnv, VecCoordinatorEnv]:
        return (self.env("train", study, use_map, seeds, weights, record, attempt_limits=attempt_limits),
                self.env("test", study, use_map, seeds, weights, record, attempt_limits=attempt_limits))

    def find(self, study: str, method: str) -> MethodRun | None:
        return next((r for r in self.runs if r.study == study and r.method == method and not r.sweep), None)

    # -------------------------------------------------------------------------------- methods

    def run_method(self, study: str, method: str, seeds: np.ndarray, weights: np.ndarray, names: list[str],
                   sweep: bool = False) -> MethodRun:
        if method == "fixed_order":
            return self._fixed_orders(study, seeds, weights)
        if method in DQN_METHODS:  # pragma: no cover - they train in `train_dqn_group`
            raise ValueError(f"{method} trains with its environment's DQN group")
        with stopwatch() as lap:
            use_map = self.data.has_map
            rules = study
            extra = None
            if method in ("mgmt_policy", "mgmt_policy_selected"):
                source = self.find("management", "dqn_map") or self.find("management", "dqn_nomap")
                assert source is not None  # params validation guarantees the management coordinator ran first
                use_map = source.use_map
                rules = self.p.mgmt_policy_rules
                frozen = source.policy
                if method == "mgmt_policy_selected":
                    frozen, extra = self.selected[source.method]
            train, test = self.envs(rules, use_map, seeds, weights, attempt_limits=np.full(len(seeds), self.limit(method)))
            actions = train.actions
            if method == "always_a":
                act = baselines.always_manager(study, actions, self.layout.manager)
            elif method == "random":
                act = baselines.uniform_random(seeds, actions.n)
            elif method == "oracle":
                act = baselines.oracle()
            elif method.startswith("mgmt_policy") and rules == "management":
                act = baselines.greedy(frozen)
            elif method.startswith("mgmt_policy"):
                act = baselines.management_in_delegation(frozen, self.layout.routes, actions)
            else:  # pragma: no cover - params validation restricts methods
                raise ValueError(method)
            baselines.rollout(train, act)
            if method == "random":  # a fresh stream for the test split, not the one training consumed
                act = baselines.uniform_random(seeds, actions.n, baselines.TEST_POLICY_STREAM)
            baselines.rollout(test, act)
            if method == "always_a":
                solver_set = [self.layout.manager]
            else:
                used = actions.answers.any(axis=0)
                solver_set = [s for s, u in zip(actions.solvers, used, strict=True) if u]
        run = MethodRun(study, method, names, seeds, weights, actions, use_map, train, test, None, None,
                        lap.seconds, solver_set, sweep, extra=extra)
        return self._finish(run)

    def fixed_policies(self, study: str, methods: list[str], seeds: np.ndarray, weights: np.ndarray,
                       finish: bool = True) -> list[MethodRun]:
        """always-A, random and the oracle as lanes of one env (method-major: lane = method x seeds +
        seed index), on the same packets and verdicts as the other methods; each lane's numbers are
        exactly those of its method played alone, at one env step per iteration instead of three."""
        n, use_map = len(seeds), self.data.has_map
        rows = {m: np.arange(k * n, (k + 1) * n) for k, m in enumerate(methods)}
        with stopwatch() as lap:
            limits = np.repeat([self.limit(m) for m in methods], n)
            train, test = self.envs(study, use_map, np.tile(seeds, len(methods)), np.tile(weights, len(methods)),
                                    attempt_limits=limits)
            actions = train.actions

            def policy(method: str, stream: int) -> baselines.Policy:
                if method == "always_a":
                    return baselines.always_manager(study, actions, self.layout.manager)
                if method == "random":  # the test split draws a fresh stream, not the one training consumed
                    return baselines.uniform_random(seeds, actions.n, stream)
                return baselines.oracle(rows[method])

            baselines.rollout(train, baselines.side_by_side([(rows[m], policy(m, baselines.POLICY_STREAM)) for m in methods]),
                              observe=False)
            baselines.rollout(test, baselines.side_by_side([(rows[m], policy(m, baselines.TEST_POLICY_STREAM)) for m in methods]),
                              observe=False)
        seconds = lap.seconds / len(methods)  # each method's share of the batch
        used = [s for s, u in zip(actions.solvers, actions.answers.any(axis=0), strict=True) if u]
        runs = [MethodRun(study, m, [f"{study}.{m}"] * n, seeds, weights, actions, use_map,
                          train.lanes_view(rows[m]), test.lanes_view(rows[m]), None, None, seconds,
                          [self.layout.manager] if m == "always_a" else used)
                for m in methods]
        return [self._finish(r) for r in runs] if finish else runs

    def frozen_management(self, study: str, seeds: np.ndarray, weights: np.ndarray) -> list[MethodRun]:
        """mgmt_policy (the last weights) and mgmt_policy_selected (the dev-selected checkpoints) as
        lanes of one env (method-major), each lane exactly what its method gives played alone."""
        source = self.find("management", "dqn_map") or self.find("management", "dqn_nomap")
        assert source is not None  # params validation guarantees the management coordinator ran first
        selected, extra = self.selected[source.method]
        n, rules = len(seeds), self.p.mgmt_policy_rules
        both = GreedyPolicy(source.policy.sizes, source.policy.layers + selected.layers)
        with stopwatch() as lap:
            train, test = self.envs(rules, source.use_map, np.tile(seeds, 2), np.tile(weights, 2))
            actions = train.actions
            act = (baselines.greedy(both) if rules == "management"
                   else baselines.management_in_delegation(both, self.layout.routes, actions))
            baselines.rollout(train, act)
            baselines.rollout(test, act)
        solver_set = [s for s, u in zip(actions.solvers, actions.answers.any(axis=0), strict=True) if u]
        seconds = lap.seconds / 2
        runs = []
        for k, (method, info) in enumerate((("mgmt_policy", None), ("mgmt_policy_selected", extra))):
            rows = np.arange(k * n, (k + 1) * n)
            runs.append(self._finish(MethodRun(study, method, [f"{study}.{method}"] * n, seeds, weights, actions,
                                               source.use_map, train.lanes_view(rows), test.lanes_view(rows), None,
                                               None, seconds, solver_set, extra=info)))
        return runs

    def dqn_batch(self, study: str, members: list[DqnMember]) -> tuple[VecCoordinatorEnv, np.ndarray | None, np.ndarray, bool]:
        """(train env of every member's lanes, per-lane network inputs, the no-map inputs, any lane sees the map)."""
        seeds = np.concatenate([m.seeds for m in members])
        weights = np.concatenate([m.weights for m in members])
        sees_map = np.concatenate([np.full(len(m.seeds), m.method == "dqn_map") for m in members])
        any_map = bool(sees_map.any())
        train = self.env("train", study, any_map, seeds, weights, map_lanes=sees_map if any_map else None)
        no_map_inputs = np.ones(train.obs_dim, dtype=bool)
        no_map_inputs[: 2 * len(self.layout.columns)] = False
        lane_inputs = None
        if any_map and not sees_map.all():
            lane_inputs = np.where(sees_map[:, None], True, no_map_inputs[None, :])
        return train, lane_inputs, no_map_inputs, any_map

    def train_dqn_group(self, study: str, members: list[DqnMember], apart: Future | None = None) -> list[MethodRun]:
        """Train every DQN lane of one environment in one batch — dqn_map and dqn_nomap (whose map
        features the env zeroes, its network embedded without them) and the cost-weight sweep —
        then evaluate each method greedily on the test split and report it as its own run.
        `apart`: the batch already trains in a second process (`train_apart`); wait for it here."""
        label = "+".join(dict.fromkeys(m.method + (".sweep" if m.sweep else "") for m in members))
        phase = f"dqn_batch_{study}"
        if apart is None:
            with self.phases(phase) as batch:
                train, lane_inputs, no_map_inputs, any_map = self.dqn_batch(study, members)
                update, close = _progress_bar(self.progress, self.p.episodes, f"{study}.{label}")
                result = train_batched(train, self.p.dqn, self.device, update, lane_inputs=lane_inputs,
                                       checkpoints=self.checkpoints(study))
                close()
            trained = batch.seconds
        else:
            _, lane_inputs, no_map_inputs, any_map = self.dqn_batch(study, members)
            result, trained = apart.result()  # the worker timed its training loop
            self.phases.add(phase, trained)
        train = result.env  # the env that was stepped (the worker's copy): its stats and step record
        seeds = train.seeds
        runs, start = [], 0
        for m in members:
            lanes = np.arange(start, start + len(m.seeds))
            start += len(m.seeds)
            use_map = m.method == "dqn_map"
            with stopwatch() as own:
                policy = result.policy.lanes(lanes, None if use_map or not any_map else no_map_inputs)
                test = self.env("test", study, use_map, m.seeds, m.weights)
                baselines.rollout(test, baselines.greedy(policy))
            actions = test.actions
            solver_set = [s for s, u in zip(actions.solvers, actions.answers.any(axis=0), strict=True) if u]
            seconds = trained * len(lanes) / len(seeds) + own.seconds  # its share of the batch and its own rollout
            run = MethodRun(study, m.method, m.names, m.seeds, m.weights, actions, use_map, train.lanes_view(lanes), test,
                            result.epsilon[lanes], policy, seconds, solver_set, m.sweep)
            if result.checkpoints and not m.sweep:
                self.selected[m.method] = self.select_checkpoint(study, m, lanes, result, policy, no_map_inputs, any_map)
            runs.append(self._finish(run))
        self.log(f"coordinator: {study}.{label}: {len(seeds)} lanes trained together in {trained:.1f} s")
        return runs

    def checkpoints(self, study: str) -> tuple[int, ...]:
        """Episodes at which the management coordinator is also kept, when mgmt_policy will play it."""
        p = self.p
        if (study != "management" or not p.checkpoint_every or self.dev_table is None
                or "mgmt_policy" not in p.methods or "delegation" not in p.studies):
            return ()
        return tuple(range(p.episodes // 2, p.episodes, p.checkpoint_every))

    def select_checkpoint(self, study: str, m: DqnMember, lanes: np.ndarray, result: TrainResult, last: GreedyPolicy,
                          no_map_inputs: np.ndarray, any_map: bool) -> tuple[GreedyPolicy, dict]:
        """Per seed, the checkpoint (or the last weights) of highest greedy return on the dev split."""
        use_map = m.method == "dqn_map"
        inputs = None if use_map or not any_map else no_map_inputs
        episodes = sorted(result.checkpoints) + [self.p.episodes]
        candidates = [GreedyPolicy(result.policy.sizes, result.checkpoints[e]).lanes(lanes, inputs) for e in episodes[:-1]]
        candidates.append(last)
        n = len(m.seeds)
        dev = self.env("dev", study, use_map, np.tile(m.seeds, len(candidates)), np.tile(m.weights, len(candidates)),
                       record=False)
        together = GreedyPolicy(last.sizes, [lane for c in candidates for lane in c.layers])
        baselines.rollout(dev, baselines.greedy(together))
        dev_return = (dev.stats["return"].sum(axis=1) / dev.stats["items"].sum(axis=1) * self.p.packet_size).reshape(len(candidates), n)
        best = len(candidates) - 1 - np.argmax(dev_return[::-1], axis=0)  # ties: the later checkpoint
        chosen = GreedyPolicy(last.sizes, [candidates[best[i]].layers[i] for i in range(n)])
        info = {"checkpoint_episode": [int(episodes[b]) for b in best],
                "dev_return_selected_mean": float(dev_return[best, np.arange(n)].mean()),
                "dev_return_last_mean": float(dev_return[-1].mean()), "dev_items": int(self.dev_table.n_items),
                "checkpoints_compared": len(candidates)}
        return chosen, info

    def _finish(self, run: MethodRun) -> MethodRun:
        self.runs.append(run)
        if self.on_run is not None:
            self.on_run(run)
        return run

    def _fixed_orders(self, study: str, seeds: np.ndarray, weights: np.ndarray, finish: bool = True) -> MethodRun:
        """Every fixed order in one batch of lanes (order-major: lane = order x seeds + seed index),
        on the same packets and verdicts as the other methods; no trajectories (they are baselines)."""
        actions = self.actions(study)
        names, plan = baselines.fixed_orders(study, actions, self.layout.routes, self.p.max_attempts)
        n = len(seeds)
        lane_order = np.repeat(np.arange(len(names)), n)
        lane_seeds, lane_weights = np.tile(seeds, len(names)), np.tile(weights, len(names))
        use_map = self.data.has_map
        limits = baselines.order_limits(plan, self.p.rejected_last_answer)[lane_order]
        with stopwatch() as lap:
            train, test = self.envs(study, use_map, lane_seeds, lane_weights, record=False, attempt_limits=limits)
            act = baselines.planned(plan, lane_order)
            baselines.rollout(train, act, observe=False)
            baselines.rollout(test, act, observe=False)
        solvers = [[s for s, u in zip(actions.solvers, actions.answers[np.unique(plan[o])].any(axis=0), strict=True) if u]
                   for o in range(len(names))]
        run = MethodRun(study, "fixed_order", [f"{study}.fixed_order"] * len(lane_seeds), lane_seeds, lane_weights,
                        actions, use_map, train, test, None, None, lap.seconds,
                        sorted({s for ss in solvers for s in ss}, key=actions.solvers.index),
                        points=[names[o] for o in lane_order], lane_solvers=[solvers[o] for o in lane_order])
        return self._finish(run) if finish else run

    def run(self) -> list[MethodRun]:
        with deterministic_torch(self.p.torch_threads):
            return self._run()

    def _run(self) -> list[MethodRun]:
        p, sw = self.p, self.p.sweep
        seeds = np.arange(p.first_seed, p.first_seed + p.seeds)
        weights = np.full(len(seeds), p.cost_weight)
        order = [s for s in ("management", "delegation") if s in p.studies]
        studies = order + [s for s in sw.studies if s not in order]
        groups = {study: [DqnMember(m, seeds, weights, [f"{study}.{m}"] * len(seeds)) for m in DQN_METHODS
                          if m in p.methods and study in order] + self.sweep_members(study) for study in studies}
        with self._workers(groups, order, seeds, weights) as apart:
            return self._run_studies(studies, order, groups, apart, seeds, weights)

    @contextmanager
    def _workers(self, groups: dict[str, list[DqnMember]], order: list[str],
                 seeds: np.ndarray, weights: np.ndarray) -> Iterator[dict[str, Future]]:
        """With `workers: 2`, every DQN batch after the first trains in a second process from the
        start (the first in this one), so the two environments' coordinators train side by side;
        queued behind them there, the first environment's fixed baselines (keyed "<study>.fixed"),
        which this process would otherwise play alone after its batch while that core idles."""
        later = [study for study, members in groups.items() if members][1:]
        if self.p.workers < 2 or not later:
            yield {}
            return
        with spawn_pool(1, deterministic=False) as pool:
            apart = {}
            for study in later:
                train, lane_inputs, _, _ = self.dqn_batch(study, groups[study])
                apart[study] = pool.submit(train_apart, train, self.p.dqn, str(self.device), lane_inputs, self.p.torch_threads)
            for study in order:
                if study not in apart and self.fixed_methods():
                    apart[f"{study}.fixed"] = pool.submit(fixed_apart, pickle.dumps(self), study, seeds, weights)
            try:
                yield apart
            finally:
                for future in apart.values():
                    future.cancel()

    def _run_studies(self, studies: list[str], order: list[str], groups: dict[str, list[DqnMember]],
                     apart: dict[str, Future], seeds: np.ndarray, weights: np.ndarray) -> list[MethodRun]:
        p = self.p
        for study in studies:
            # a batch training in the worker: the fixed policies and the frozen management
            # coordinator (it needs only management's batch) play first, while it trains
            baselines_first = study in apart and study in order
            if baselines_first:
                self._baselines(study, seeds, weights, frozen=True)
            for done in [s for s in order if f"{s}.fixed" in apart and s != study and s in self._waiting]:
                self._collect_fixed(done, apart)  # played in the worker meanwhile
            members = groups[study]
            for run in self.train_dqn_group(study, members, apart.get(study)) if members else []:
                if not run.sweep:
                    self.log(f"coordinator: {study}.{run.method}: late return "
                             f"{run.train.stats['return'][:, -p.late_episodes:].mean():.2f}")
            if study in order:
                fixed_elsewhere = baselines_first or f"{study}.fixed" in apart
                if f"{study}.fixed" in apart:
                    self._waiting.add(study)  # collected once this process has played its own share
                if not baselines_first:
                    self._baselines(study, seeds, weights, frozen=True, fixed=not fixed_elsewhere)
        for done in sorted(self._waiting):
            self._collect_fixed(done, apart)
        return self.runs

    def _collect_fixed(self, study: str, apart: dict[str, Future]) -> None:
        self._waiting.discard(study)
        for run in apart[f"{study}.fixed"].result():
            self._finish(run)
            self._log_run(run)

    def fixed_methods(self) -> list[str]:
        """The methods that need no training: the fixed policies and the fixed orders."""
        return [m for m in self.p.methods if m in SIDE_BY_SIDE or m == "fixed_order"]

    def fixed_runs(self, study: str, seeds: np.ndarray, weights: np.ndarray) -> list[MethodRun]:
        """The fixed methods of `study`, each as its own run (not yet finished)."""
        runs: list[MethodRun] = []
        side = [m for m in self.p.methods if m in SIDE_BY_SIDE]
        for method in self.fixed_methods():
            if method in SIDE_BY_SIDE:
                if method == side[0]:
                    runs += self.fixed_policies(study, side, seeds, weights, finish=False)
            else:
                runs.append(self._fixed_orders(study, seeds, weights, finish=False))
        return runs

    def _log_run(self, run: MethodRun) -> None:
        self.log(f"coordinator: {run.study}.{run.method}: late return "
                 f"{run.train.stats['return'][:, -self.p.late_episodes:].mean():.2f}, {run.seconds:.1f} s")

    def __getstate__(self) -> dict:
        """What a worker process needs to play the fixed baselines: no callbacks, no finished runs."""
        state = dict(self.__dict__)
        state.update(on_run=None, log=print, runs=[], selected={}, _waiting=set())
        return state

    def _baselines(self, study: str, seeds: np.ndarray, weights: np.ndarray, frozen: bool, fixed: bool = True) -> None:
        """The non-learning methods of `study`: the fixed policies and orders (`fixed`) and the frozen
        management coordinator (`frozen`: it needs the management batch trained)."""
        done = [self._finish(run) for run in self.fixed_runs(study, seeds, weights)] if fixed else []
        if frozen and study == "delegation" and "mgmt_policy" in self.p.methods:
            if self.selected:  # the checkpoint chosen on the dev split, beside the last weights
                done += self.frozen_management(study, seeds, weights)
            else:
                done.append(self.run_method(study, "mgmt_policy", seeds, weights, [f"{study}.mgmt_policy"] * len(seeds)))
        for run in done:
            self._log_run(run)

    def sweep_members(self, study: str) -> list[DqnMember]:
        """The cost-weight sweep's lanes of `study` (seed x other cost weight), trained beside the main DQNs."""
        p, sw = self.p, self.p.sweep
        method = "dqn_map" if "dqn_map" in p.methods else "dqn_nomap" if "dqn_nomap" in p.methods else None
        others = [w for w in sw.cost_weights if w != p.cost_weight]
        if method is None or sw.seeds == 0 or not others or study not in sw.studies:
            return []
        base = np.arange(p.first_seed, p.first_seed + sw.seeds)
        seeds = np.tile(base, len(others))
        weights = np.repeat(np.asarray(others, dtype=np.float64), len(base))
        return [DqnMember(method, seeds, weights, [f"{study}.{method}.lambda{w:g}" for w in weights], sweep=True)]
