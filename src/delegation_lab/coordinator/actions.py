"""The coordinator's discrete action spaces as lookup tables.

Management (History Matters §2.1 / §3.1): each action is a route, a handoff path from the top
manager down the chain; the route's last solver answers, and the route pays n_e handoffs.

Delegation (§2.2 / §3.2): a joint action is a non-empty kickoff set K of agents and, for every
agent i, a local choice c_i in {answer, pass to the 1st other agent, pass to the 2nd other, ...}
(the others in agent order without i). With 3 agents: 7 kickoff sets x 3^3 choices = 189 actions.

Pass resolution (a fixed point). The holders H are the least set that contains K and, for every
holder h whose choice is a pass, h's target: H_0 = K, H_{k+1} = H_k + {target(h) : h in H_k passes},
until nothing changes (at most n rounds). A pass chosen by an agent that never holds the task is no
handoff at all: it neither moves the task nor costs anything. An agent answers iff it holds the task
and chose `answer`; several may answer; if every holder passes (a cycle such as A->B->A) nobody
answers and the attempt fails with no solve cost. Edge fees: each kickoff edge (one per agent of K)
and each pass made by a holder pays alpha x the recipient's expected solve cost, once per edge, so a
recipient reached twice (kicked off and passed to, or passed to by two holders) pays two fees.

The agent-facing space (`answering_actions`): of the 189 joint actions 65 have nobody answer (a
pass cycle: a sure failure that still pays fees) and many others have the same outcome (the same
answerers and the same edge fees: a non-holder's choice never matters). The coordinator learns over
the 52 distinct outcomes in which somebody answers, each named by its lowest-index joint action.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ActionTable:
    """Per action: which solvers answer and which edges it pays, plus printable names."""

    solvers: tuple[str, ...]
    names: list[str]
    answers: np.ndarray  # bool [n_actions, S]: solver answers in this action
    handoffs: np.ndarray  # int [n_actions]: handoffs on a management route (fee n_e * alpha * C_solve)
    edges: np.ndarray  # int [n_actions, S]: delegation edges into each solver (fee alpha * E[cost])
    full_index: np.ndarray | None = None  # int [n_actions]: each action's index in the full joint space

    @property
    def n(self) -> int:
        return len(self.names)

    def executors(self, action: int) -> list[str]:
        return [s for s, a in zip(self.solvers, self.answers[action], strict=True) if a]

    def index_of(self, full: int) -> int:
        """This table's action with the same outcome as joint action `full` of the full space."""
        if self.full_index is None:
            return int(full)
        source = delegation_actions(self.solvers)
        key = (source.answers[full].tobytes(), source.edges[full].tobytes())
        for a in range(self.n):
            if (self.answers[a].tobytes(), self.edges[a].tobytes()) == key:
                return a
        raise ValueError(f"joint action {source.names[full]!r} has no answerer; it is not in the answering space")


def management_actions(routes: list[list[str]], solvers: tuple[str, ...]) -> ActionTable:
    """One action per route; `solvers` orders the columns."""
    answers = np.zeros((len(routes), len(solvers)), dtype=bool)
    for a, route in enumerate(routes):
        answers[a, solvers.index(route[-1])] = True
    handoffs = np.array([len(r) - 1 for r in routes], dtype=np.int64)
    names = [">".join(r) for r in routes]
    return ActionTable(solvers, names, answers, handoffs, np.zeros((len(routes), len(solvers)), dtype=np.int64))


def joint_action_count(n: int) -> int:
    """Joint actions of n delegation agents: (2^n - 1) kickoff sets x n^n local choices (2: 12, 3: 189,
    4: 3840, 5: 96 875); `delegation_actions` enumerates every one of them."""
    return (2**n - 1) * n**n


def fixed_order_count(elements: int, max_attempts: int) -> int:
    """Orders the `fixed_order` baseline plays: ordered sequences of 1 .. max_attempts distinct
    elements (routes or solvers), as `baselines.fixed_orders` builds them (3 at 3 attempts: 15)."""
    return sum(math.perm(elements, k) for k in range(1, min(max_attempts, elements) + 1))


def kickoff_sets(n: int) -> list[tuple[int, ...]]:
    """Non-empty subsets of range(n), by size then lexicographically: {A},{B},{C},{A,B},{A,C},{B,C},{A,B,C}."""
    return [c for size in range(1, n + 1) for c in itertools.combinations(range(n), size)]


def others(i: int, n: int) -> list[int]:
    return [j for j in range(n) if j != i]


def resolve(kickoff: tuple[int, ...], choices: tuple[int, ...]) -> tuple[list[bool], list[int]]:
    """(answers per agent, edges into each agent) of one joint action; choice 0 = answer, k = pass to the k-th other."""
    n = len(choices)
    target = [others(i, n)[c - 1] if c else -1 for i, c in enumerate(choices)]
    holders = set(kickoff)
    while True:
        reached = {target[h] for h in holders if target[h] >= 0}
        if reached <= holders:
            break
        holders |= reached
    edges = [0] * n
    for k in kickoff:
        edges[k] += 1
    for h in holders:
        if target[h] >= 0:
            edges[target[h]] += 1
    answers = [i in holders and choices[i] == 0 for i in range(n)]
    return answers, edges


def joint_index(kickoff: tuple[int, ...], choices: tuple[int, ...], n: int) -> int:
    k = kickoff_sets(n).index(tuple(sorted(kickoff)))
    return k * n**n + int(np.ravel_multi_index(choices, (n,) * n))


def delegation_actions(agents: tuple[str, ...]) -> ActionTable:
    """All (2^n - 1) x n^n joint actions of `agents` (solver columns in the same order)."""
    n = len(agents)
    names, answers, edges = [], [], []
    for kick in kickoff_sets(n):
        for choices in itertools.product(range(n), repeat=n):
            ans, edg = resolve(kick, choices)
            answers.append(ans)
            edges.append(edg)
            local = ",".join(
                f"{agents[i]}:" + ("answer" if c == 0 else "to_" + agents[others(i, n)[c - 1]])
                for i, c in enumerate(choices)
            )
            names.append("".join(agents[k] for k in kick) + "|" + local)
    return ActionTable(agents, names, np.array(answers, dtype=bool), np.zeros(len(names), dtype=np.int64),
                       np.array(edges, dtype=np.int64))


def route_as_joint_action(route: list[str], agents: tuple[str, ...]) -> int:
    """A management route played in the delegation env: kick off the manager, pass down the route,
    the last solver answers (agents off the route choose `answer`, which they never act on)."""
    n = len(agents)
    idx = [agents.index(s) for s in route]
    choices = [0] * n
    for a, b in itertools.pairwise(idx):
        choices[a] = others(a, n).index(b) + 1
    return joint_index((idx[0],), tuple(choices), n)


def answering_actions(table: ActionTable) -> ActionTable:
    """One action per distinct (answerers, edges) outcome in which somebody answers, in order of
    its first (lowest-index) joint action, whose name it keeps."""
    seen: set[tuple[bytes, bytes]] = set()
    keep = []
    for a in range(table.n):
        key = (table.answers[a].tobytes(), table.edges[a].tobytes())
        if table.answers[a].any() and key not in seen:
            seen.add(key)
            keep.append(a)
    idx = np.array(keep, dtype=np.int64)
    return ActionTable(table.solvers, [table.names[a] for a in keep], table.answers[idx], table.handoffs[idx],
                       table.edges[idx], idx)
