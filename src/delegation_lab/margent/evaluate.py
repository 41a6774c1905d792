"""Evaluation on collection-disjoint items, by replaying policies on full measured trees.

Every item of an evaluation pool has every call sequence measured (`collect.build_tree(mode="full")`),
so a policy's trajectory is a walk through dense [items, nodes] tables: the learned managers,
the candidate (commit at once), one forced Verifier call, all sub-agents forced in scaffold order,
the untrained prompted manager, and the measured oracle (best evaluated sequence per item, gold
used for analysis only). Also the matched-budget random replay and the call gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.margent.distill import ACTIONS, action_mask
from delegation_lab.margent.params import SUBAGENTS
from delegation_lab.margent.tree import SequenceTree


@dataclass(frozen=True)
class TreeTable:
    """One pool's full tree as dense arrays over (item, node)."""

    tree: SequenceTree
    item_ids: list[str]
    difficulty: np.ndarray  # [I]
    correct: np.ndarray  # [I, K] committing at that node is right
    cost: np.ndarray  # [I, K] cost of reaching the node from its parent (root: the candidate)
    path_cost: np.ndarray  # [I, K]
    features: np.ndarray  # [I, K, F]
    mask: np.ndarray  # [K, len(ACTIONS)]
    decision: np.ndarray  # [I, K] action index of the prompted manager (-1 when absent)
    decision_cost: np.ndarray  # [I, K]

    @classmethod
    def from_frame(cls, frame: pl.DataFrame, tree: SequenceTree) -> TreeTable:
        frame = frame.sort(["item_index", "node"])
        items = frame["item_index"].unique().sort().to_list()
        n_items, n_nodes = len(items), tree.n_nodes
        if frame.height != n_items * n_nodes or items != list(range(n_items)):
            raise InputError(
                f"evaluation tree has {frame.height} rows for {n_items} items x {n_nodes} sequences; "
                "rerun `dvc repro margent_collect` (the tree must be complete)"
            )
        shape = (n_items, n_nodes)
        correct = frame["correct"].to_numpy().reshape(shape)
        cost = frame["cost_usd"].to_numpy().reshape(shape)
        path_cost = cost.copy()
        for k in range(1, n_nodes):  # nodes are numbered breadth-first: a parent precedes its children
            path_cost[:, k] += path_cost[:, tree.parent[k]]
        feats = np.array(frame["features"].to_list(), dtype=np.float32).reshape(n_items, n_nodes, -1)
        mask = np.array([action_mask(seq, tree.pool) for seq in tree.sequences], dtype=bool)
        mask[tree.depth == tree.max_depth, 1:] = False
        index = {a: i for i, a in enumerate(ACTIONS)}
        decision = np.array([index.get(d, -1) if d is not None else -1 for d in frame["decision"].to_list()]).reshape(shape)
        return cls(
            tree, frame.filter(pl.col("node") == 0)["item_id"].to_list(), frame.filter(pl.col("node") == 0)["difficulty"].to_numpy(),
            correct, cost, path_cost, feats, mask, decision, frame["decision_cost_usd"].fill_null(0.0).to_numpy().reshape(shape),
        )

    @property
    def n_items(self) -> int:
        return self.correct.shape[0]

    @property
    def root_correct(self) -> np.ndarray:
        return self.correct[:, 0]


@dataclass(frozen=True)
class Walk:
    """Trajectories of M policies over I items: visited nodes (padded with -1) and the actions taken."""

    nodes: np.ndarray  # [M, I, D + 1]
    actions: np.ndarray  # [M, I, D + 1] (-1 after commit)
    final: np.ndarray  # [M, I]


def walk(table: TreeTable, actions: np.ndarray) -> Walk:
    """Follow per-node actions [M, I, K] (0 = commit, 1 + k = SUBAGENTS[k]) from every root."""
    tree = table.tree
    to_pool = np.array([tree.pool.index(a) if a in tree.pool else -1 for a in SUBAGENTS])
    m, i = actions.shape[:2]
    node = np.zeros((m, i), dtype=np.int64)
    done = np.zeros((m, i), dtype=bool)
    steps = tree.max_depth + 1
    nodes = np.full((m, i, steps), -1, dtype=np.int64)
    taken = np.full((m, i, steps), -1, dtype=np.int64)
    mi, ii = np.meshgrid(np.arange(m), np.arange(i), indexing="ij")
    for t in range(steps):
        nodes[..., t] = np.where(done, -1, node)
        a = actions[mi, ii, node]
        pool_a = np.where(a > 0, to_pool[np.maximum(a - 1, 0)], -1)
        nxt = np.where(pool_a >= 0, tree.child[node, np.maximum(pool_a, 0)], -1)
        commit = done | (a <= 0) | (nxt < 0)
        taken[..., t] = np.where(done, -1, np.where(commit, 0, a))
        node = np.where(commit, node, nxt)
        done |= commit
    return Walk(nodes, taken, node)


def sequence_actions(table: TreeTable, sequence: tuple[str, ...]) -> np.ndarray:
    """Actions [1, I, K] that force `sequence` and then commit."""
    per_node = np.zeros(table.tree.n_nodes, dtype=np.int64)
    for k, seq in enumerate(table.tree.sequences):
        if len(seq) < len(sequence) and tuple(seq) == tuple(sequence[: len(seq)]):
            per_node[k] = 1 + SUBAGENTS.index(sequence[len(seq)])
    return np.broadcast_to(per_node, (1, table.n_items, table.tree.n_nodes)).copy()


def oracle_final(table: TreeTable) -> np.ndarray:
    """Best evaluated sequence per item: commit if the root is right, else the shortest success
    (nodes are numbered breadth-first), else commit."""
    any_right = table.correct.any(axis=1)
    first = np.argmax(table.correct, axis=1)
    return np.where(any_right, first, 0)[None]


def outcomes(table: TreeTable, w: Walk, decision_costs: bool = False) -> dict[str, np.ndarray]:
    """Per policy and item: final correctness, calls, cost."""
    ii = np.arange(table.n_items)[None]
    final = w.final
    correct = table.correct[ii, final]
    calls = table.tree.depth[final]
    cost = table.path_cost[ii, final]
    if decision_costs:
        visited = np.where(w.nodes >= 0, w.nodes, 0)
        cost = cost + (table.decision_cost[ii[..., None], visited] * (w.nodes >= 0)).sum(-1)
    return {"correct": correct, "calls": calls, "cost": cost}


def summarise(table: TreeTable, out: dict[str, np.ndarray]) -> list[dict[str, float]]:
    """Per policy: accuracy, calls, cost, call gap, correction and corruption (fractions of all items)."""
    root = table.root_correct
    rows = []
    for m in range(out["correct"].shape[0]):
        correct, calls = out["correct"][m], out["calls"][m]
        called = calls > 0
        gap = (called[~root].mean() if (~root).any() else 0.0) - (called[root].mean() if root.any() else 0.0)
        rows.append({
            "accuracy": float(correct.mean()), "candidate_accuracy": float(root.mean()), "calls": float(calls.mean()),
            "cost_per_item_usd": float(out["cost"][m].mean()), "call_gap": float(gap),
            "correction": float((~root & correct).mean()), "corruption": float((root & ~correct).mean()),
            "n_items": int(table.n_items),
        })
    return rows


def random_replay(table: TreeTable, final: np.ndarray, resamples: int, confidence: float, seed: int) -> dict[str, float]:
    """Matched-budget replay: the policy's own sequences (role and call count) reassigned to random
    items, `resamples` times; the policy's accuracy beside the replay's central interval."""
    rng = np.random.default_rng(seed)
    n = table.n_items
    perms = np.argsort(rng.random((resamples, n)), axis=1)
    acc = table.correct[np.arange(n)[None], final[perms]].mean(axis=1)
    lo, hi = np.quantile(acc, [(1 - confidence) / 2, (1 + confidence) / 2])
    own = float(table.correct[np.arange(n), final].mean())
    return {"accuracy": own, "low": float(lo), "high": float(hi), "replay_mean": float(acc.mean()), "above": own > hi}
