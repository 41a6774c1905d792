"""The `coordinator` section of params.yaml: the environments, the DQN (Table 3 of History Matters)
and the cost-weight sweep. Checks that need data (unknown solvers, a missing ability map, a cache
missing train items) live in `coordinator.data` and run before any training starts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from delegation_lab.coordinator.actions import fixed_order_count, joint_action_count
from delegation_lab.params.model import ParamsModel, StudyParams

STUDIES = ("management", "delegation")
METHODS = ("dqn_map", "dqn_nomap", "always_a", "mgmt_policy", "random", "oracle", "fixed_order")
# The delegation study enumerates its joint space in Python (`actions.delegation_actions`): 5 agents'
# 96 875 joint actions take ~2 s and give a 2866-way Q head; 6 agents' 2.9 M would take minutes and
# a head of tens of thousands of outcomes no 1000-episode DQN learns. The method's ceiling, not a knob.
JOINT_ACTIONS_CEILING = joint_action_count(5)


class DqnParams(ParamsModel):
    learning_rate: float = Field(1.0e-3, gt=0)
    """Adam learning rate."""
    hidden: int = Field(128, ge=1)
    """Units in each hidden layer of the Q-network."""
    hidden_layers: int = Field(1, ge=1, le=4)
    """Hidden layers of the Q-network (ReLU); Table 3 gives only the width, 2 layers cost ~3x the CPU time."""
    batch_size: int = Field(32, ge=1)
    """Transitions per gradient step (per seed)."""
    buffer_size: int = Field(80_000, ge=1)
    """Replay capacity per seed (a ring buffer)."""
    target_sync: int = Field(200, ge=1)
    """Gradient updates between copies of the online network into the target network."""
    gamma: float = Field(1.0, ge=0, le=1)
    """Discount factor per attempt. 1.0 (valid: every episode ends after its packet, and the observation carries episode progress) trains on the undiscounted return the study reports; the paper's Table 3 uses 0.99."""
    epsilon_start: float = Field(1.0, ge=0, le=1)
    """Exploration rate before the first gradient step."""
    epsilon_end: float = Field(0.05, ge=0, le=1)
    """Exploration rate after the decay."""
    epsilon_decay_steps: int = Field(20_000, ge=1)
    """Gradient steps over which epsilon falls linearly from epsilon_start to epsilon_end."""
    learning_starts: int = Field(1_000, ge=0)
    """Environment steps (per seed) collected before the first gradient step."""
    train_frequency: int = Field(1, ge=1)
    """Environment steps per gradient step."""


class SweepParams(ParamsModel):
    cost_weights: list[float] = [10.0, 30.0, 100.0, 300.0, 1000.0]
    """Cost weights (lambda) tracing the coordinator's own frontier; the main cost_weight reuses the main runs."""
    seeds: int = Field(5, ge=0)
    """Seeds per cost weight (0 = no sweep); seeds first_seed .. first_seed + seeds - 1."""
    studies: list[Literal["management", "delegation"]] = ["management"]
    """Environments swept (each with its dqn_map coordinator); delegation's 189-way Q-network costs ~4x management's."""

    @model_validator(mode="after")
    def _check(self) -> SweepParams:
        if any(w <= 0 for w in self.cost_weights):
            raise ValueError(f"cost_weights must be positive (got {self.cost_weights})")
        return self


class CoordinatorParams(StudyParams):
    studies: list[Literal["management", "delegation"]] = ["management", "delegation"]
    """Which environments to train and evaluate (History Matters §3.1 and §3.2)."""
    methods: list[Literal["dqn_map", "dqn_nomap", "always_a", "mgmt_policy", "random", "oracle", "fixed_order"]] = list(METHODS)
    """Methods run in each environment; `mgmt_policy` (delegation only) needs the management study; `fixed_order` runs every fixed order of routes (management) or solvers (delegation) and reports the best by late return as `best_fixed_order`."""
    routes: list[list[str]] | None = None
    """Management routes, each a handoff path from the top manager whose last solver answers; null = the prefixes of the `solvers` order (A; A->B; A->B->C)."""
    agents: list[str] | None = None
    """Delegation agents (2 or more distinct names from `solvers`, as many as `max_joint_actions`
    admits: 4 by default); null = every solver in `solvers` order. They are also the columns of both
    environments' observations, so every route must stay among them."""
    max_joint_actions: int = Field(3840, ge=joint_action_count(2), le=JOINT_ACTIONS_CEILING)
    """Most joint actions the delegation study may enumerate: n agents give (2^n - 1) x n^n of them
    (2: 12, 3: 189, 4: 3840, 5: 96 875) and the Q-network's head is their distinct answering outcomes
    (7, 52, 393, 2866). 3840 admits 4 agents; a solver set above it fails the params check (name
    fewer `agents`). At most 96 875 (5 agents): the space is enumerated in Python, and 6 agents'
    2.9 M joint actions are beyond what the method can enumerate or a DQN can learn."""
    max_fixed_orders: int = Field(100, ge=1)
    """Most orders the `fixed_order` baseline may play per environment (each is `seeds` lanes played
    through every training episode, so its time grows linearly with the count): every sequence of 1 ..
    max_attempts distinct routes (management) or agents (delegation); with max_attempts 3, 3 of them
    give 15 orders, 4 give 40, 5 give 85, 42 give 70 644. Above it the params check fails: list a few
    `routes` (null routes are one per agent), name fewer `agents`, or drop fixed_order from `methods`."""
    packet_size: int = Field(32, ge=1)
    """Items per episode (a packet of train items drawn without replacement)."""
    max_attempts: int = Field(3, ge=1)
    """Attempts per item; after this many failures the item is dropped with the fail penalty."""
    fail_penalty: float = Field(1.0, ge=0)
    """Penalty (subtracted from the reward) when an item is dropped after max_attempts failures."""
    rejected_last_answer: Literal["return", "wrong"] = "return"
    """What a dropped item (its last attempt rejected by the verifier) is graded as. `return`: the
    coordinator returns the answer it holds, graded against gold like any other, and a fixed policy
    stops when its route is exhausted (always-A and the oracle after one attempt, a fixed order after
    its last element), so always-A equals solver A alone in accuracy and cost. `wrong`: the paper's
    accounting (History Matters App. D: its labels are both verdict and grade): every policy retries
    up to max_attempts, re-asking its last solver and paying again for the same cached answer, and a
    dropped item is wrong. The reward is the paper's under both (R_corr on acceptance, fail_penalty on a drop)."""
    cost_weight: float = Field(100.0, gt=0)
    """lambda: dollars are scaled by this into the reward."""
    handoff_fee: float = Field(0.05, ge=0)
    """alpha: fee per handoff, as a fraction of the solve cost (management) or of the recipient's expected solve cost (delegation)."""
    episodes: int = Field(1000, ge=1)
    """Training episodes per seed."""
    seeds: int = Field(20, ge=1)
    """Independent runs, seeds first_seed .. first_seed + seeds - 1, all trained batched in one process."""
    first_seed: int = Field(0, ge=0)
    """First seed."""
    late_episodes: int = Field(100, ge=1)
    """Late-training window (last episodes) for the late-train metrics."""
    mgmt_policy_rules: Literal["management", "delegation"] = "management"
    """How mgmt_policy plays the delegation study's packets: `management` = the frozen coordinator's own routes and cost rule (the paper's matched comparison), `delegation` = each route sent as its joint action (kickoff the manager, pass down the route), paying the delegation edge fees."""
    checkpoint_every: int = Field(100, ge=0)
    """Management coordinator checkpoints every this many episodes over the second half of training (0 = none): each is played greedily on the dev split (the ability split, never trained on), and `mgmt_policy_selected` plays, per seed, the best one there beside `mgmt_policy` (the last weights)."""
    dqn: DqnParams = DqnParams()
    """Q-network and DQN schedule (Table 3)."""
    sweep: SweepParams = SweepParams()
    """Cost-weight sweep of the dqn_map coordinator (greedy test evaluation per weight)."""
    device: str = "cpu"
    """torch device for the Q-networks (`cpu`, `cuda`, `cuda:1`, or `auto` = cuda when available)."""
    workers: int = Field(2, ge=1, le=2)
    """Processes for the DQN batches: 2 trains the delegation coordinators in a second process beside the management ones (the DAG's two cores), 1 one after the other; each batch's numbers are the same either way."""
    torch_threads: int | None = Field(1, ge=1)
    """torch.set_num_threads for training (small batched matmuls run best on one thread); null = torch's default."""
    trajectories: bool = True
    """Write every environment step as a trajectory row (train and test)."""
    mlflow_series: list[Literal["return", "accuracy", "cost_usd", "epsilon", "steps"]] = ["return", "accuracy", "cost_usd"]
    """Per-episode curves logged to each MLflow child run (train/<name>), each at most `mlflow_points` points."""
    mlflow_points: int = Field(200, ge=2)
    """Most points per logged curve, capped by `tracking.series_points`: longer curves are averaged over equal runs of episodes, each point logged at the step of its last episode (the full curves are each child run's `curves.parquet` artifact and the trajectories)."""

    @model_validator(mode="after")
    def _check(self) -> CoordinatorParams:
        if self.late_episodes > self.episodes:
            raise ValueError(f"late_episodes ({self.late_episodes}) > episodes ({self.episodes})")
        if not self.studies:
            raise ValueError("studies is empty: name management, delegation or both")
        if not self.methods:
            raise ValueError("methods is empty")
        if len(set(self.methods)) != len(self.methods) or len(set(self.studies)) != len(self.studies):
            raise ValueError("studies and methods must not repeat")
        if "mgmt_policy" in self.methods and "delegation" in self.studies:
            if "management" not in self.studies or not {"dqn_map", "dqn_nomap"} & set(self.methods):
                raise ValueError("mgmt_policy rolls out the trained management coordinator: it needs studies "
                                 "to include management and methods to include dqn_map or dqn_nomap")
        if self.dqn.epsilon_end > self.dqn.epsilon_start:
            raise ValueError("dqn.epsilon_end must not exceed dqn.epsilon_start")
        if self.routes is not None:
            if not self.routes:
                raise ValueError("routes is empty; give at least one route or null")
            for i, route in enumerate(self.routes):
                if not route:
                    raise ValueError(f"routes[{i}] is empty")
                if len(set(route)) != len(route):
                    raise ValueError(f"routes[{i}] {route} visits a solver twice")
                if route[0] != self.routes[0][0]:
                    raise ValueError(f"routes[{i}] {route} starts at {route[0]!r}, not at the manager {self.routes[0][0]!r}")
            if [self.routes[0][0]] not in self.routes:
                raise ValueError(f"routes must include the manager alone ([{self.routes[0][0]}]) for always_a")
            if len({tuple(r) for r in self.routes}) != len(self.routes):
                raise ValueError("routes must not repeat")
        if self.agents is not None and not (2 <= len(self.agents) and len(set(self.agents)) == len(self.agents)):
            raise ValueError(f"agents needs 2 or more distinct solver names (got {self.agents})")
        return self

    def uses_delegation(self) -> bool:
        return "delegation" in self.studies or ("delegation" in self.sweep.studies and self.sweep.seeds > 0)

    def solver_set_problems(self, solvers: list[str]) -> list[str]:
        """What the params check refuses in this section's solver sets, given params `solvers`:
        unknown names, routes off the agents, and sets above the limits the method needs."""
        known = set(solvers)
        problems = []
        named = [("coordinator.agents", self.agents or [])] + [(f"coordinator.routes[{i}]", r) for i, r in enumerate(self.routes or [])]
        for key, names in named:
            unknown = [s for s in names if s not in known]
            if unknown:
                problems.append(f"{key}: unknown solver(s) {unknown}; params `solvers` defines {list(solvers)}")
        columns = list(self.agents) if self.agents is not None else list(solvers)
        off = sorted(({s for r in self.routes or [] for s in r} - set(columns)) & known)
        if off and self.agents is not None:
            problems.append(f"coordinator.routes: use {off}, which coordinator.agents {columns} leaves out; "
                            "both environments share one observation layout over the agents")
        n = len(columns)
        which = f"{n} agents" if self.agents is not None else f"null means every solver: {n} agents"
        if self.uses_delegation() and joint_action_count(n) > self.max_joint_actions:
            fit = max(k for k in range(2, 6) if joint_action_count(k) <= self.max_joint_actions)
            problems.append(f"coordinator.agents: {which} give {_count(joint_action_count(n))} joint actions of the delegation "
                            f"study, above coordinator.max_joint_actions {self.max_joint_actions} ({fit} agents; the method "
                            f"enumerates at most {JOINT_ACTIONS_CEILING}, 5 agents): name at most {fit} agents or drop "
                            "delegation from coordinator.studies and coordinator.sweep.studies")
        if "fixed_order" in self.methods:
            routes = len(self.routes) if self.routes is not None else n
            orders = fixed_order_count(routes, self.max_attempts)
            if "management" in self.studies and orders > self.max_fixed_orders:
                what = f"{routes} routes" if self.routes is not None else f"null means one route per agent, the prefixes of the {n} agents: {routes} routes"
                example = [columns[: k + 1] for k in range(min(3, n))]
                problems.append(f"coordinator.routes: {what}, whose fixed orders at max_attempts {self.max_attempts} number "
                                f"{_count(orders)}, above coordinator.max_fixed_orders {self.max_fixed_orders}: list a few routes "
                                f"from the manager (e.g. {example}), or drop fixed_order from coordinator.methods")
            orders = fixed_order_count(n, self.max_attempts)
            if "delegation" in self.studies and orders > self.max_fixed_orders and joint_action_count(n) <= self.max_joint_actions:
                problems.append(f"coordinator.agents: {which}, whose fixed orders at max_attempts {self.max_attempts} number "
                                f"{orders}, above coordinator.max_fixed_orders {self.max_fixed_orders}: name fewer agents, "
                                "raise max_fixed_orders or drop fixed_order from coordinator.methods")
        return problems


def _count(n: int) -> str:
    """A count for an error message: exact while readable, else in scientific notation."""
    return str(n) if n < 10**9 else f"{float(n):.2e}"
