"""Interventional collection: from one shared, temperature-0 root candidate, force commitment and
every delegation, breadth-first over ordered sequences of distinct sub-agents, and score each
terminal branch with gold (the scorer only).

Two modes over the same code:
- `interventional` (the paper's collection): every item gets its root and the one-step branches;
  a wrong root keeps growing until the first depth that holds a success (all equally short
  successes are kept) or depth D; a correct root stops after the one-step branches.
- `full`: every sequence to the given depth for every item — the measured table that evaluation
  replays policies, baselines and the oracle on.

Batching: at each depth, every branch of every item that delegates to the same sub-agent goes to
that sub-agent in one `consult` call, and every revision of the depth goes to the manager in one
`revise` call. A malformed reply never stops the collection: the branch keeps its parent's
candidate and is recorded with its error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from tqdm import tqdm

from delegation_lab.margent.features import state_features
from delegation_lab.margent.schemas import AgentView, Call, State
from delegation_lab.margent.team import CANDIDATE_READERS, Consultation, GoldScorer, Team, error_candidate
from delegation_lab.margent.tree import SequenceTree

NODE_SCHEMA: dict[str, pl.DataType] = {
    "pool": pl.String,
    "blank": pl.Boolean,
    "item_index": pl.Int64,
    "item_id": pl.String,
    "difficulty": pl.Int64,
    "node": pl.Int64,
    "parent": pl.Int64,
    "depth": pl.Int64,
    "sequence": pl.List(pl.String),
    "agent": pl.String,
    "answer": pl.String,
    "confidence": pl.Float64,
    "rationale": pl.String,
    "correct": pl.Boolean,
    "raises_issue": pl.Boolean,
    "changed": pl.Boolean,
    "error": pl.String,
    "cost_usd": pl.Float64,
    "tokens_in": pl.Int64,
    "tokens_out": pl.Int64,
    "signal": pl.String,
    "decision": pl.String,
    "decision_cost_usd": pl.Float64,
    "decision_error": pl.String,
    "features": pl.List(pl.Float64),
}


@dataclass
class CollectStats:
    branches: int = 0
    consult_calls: dict[str, int] = field(default_factory=dict)  # batched team calls per sub-agent
    revise_calls: int = 0
    candidate_calls: int = 0
    decide_calls: int = 0
    errors: int = 0
    seconds: float = 0.0
    cost_usd: float = 0.0

    def merge(self, other: CollectStats) -> None:
        self.branches += other.branches
        for k, v in other.consult_calls.items():
            self.consult_calls[k] = self.consult_calls.get(k, 0) + v
        self.revise_calls += other.revise_calls
        self.candidate_calls += other.candidate_calls
        self.decide_calls += other.decide_calls
        self.errors += other.errors
        self.seconds += other.seconds
        self.cost_usd += other.cost_usd


@dataclass
class _Node:
    state: State
    error: str | None
    cost: float
    tokens_in: int
    tokens_out: int
    correct: bool = False
    decision: str | None = None
    decision_cost: float = 0.0
    decision_error: str | None = None


VIEW_SCHEMA: dict[str, pl.DataType] = {
    "pool": pl.String,
    "item_index": pl.Int64,
    "item_id": pl.String,
    "question": pl.String,
    "choices": pl.List(pl.String),
    "difficulty": pl.Int64,
    "domain": pl.String,
}


def views_frame(views: list[AgentView], pool_name: str) -> pl.DataFrame:
    """The questions as agents saw them (no gold): what the SFT data renders its prompts from."""
    return pl.DataFrame(
        {
            "pool": [pool_name] * len(views), "item_index": list(range(len(views))), "item_id": [v.item_id for v in views],
            "question": [v.question for v in views], "choices": [list(v.choices) if v.choices else None for v in views],
            "difficulty": [v.difficulty for v in views], "domain": [v.domain for v in views],
        },
        schema=VIEW_SCHEMA,
    )


def build_tree(
    team: Team,
    views: list[AgentView],
    scorer: GoldScorer,
    tree: SequenceTree,
    mode: str = "interventional",
    sees_candidate: bool = True,
    decisions: bool = False,
    pool_name: str = "collection",
    progress: bool = False,
) -> tuple[pl.DataFrame, CollectStats]:
    """Grow the branch tree of every item; return one row per branch (node) and what it took."""
    if mode not in ("interventional", "full"):
        raise ValueError(f"mode must be interventional or full, not {mode!r}")
    start = time.perf_counter()
    stats = CollectStats(consult_calls={a: 0 for a in tree.pool})
    nodes: dict[tuple[int, int], _Node] = {}
    if not views:
        return pl.DataFrame(schema=NODE_SCHEMA), stats

    roots = team.candidates(views)
    stats.candidate_calls += 1
    for i, (view, reply) in enumerate(zip(views, roots, strict=True)):
        cand = reply.value if reply.value is not None else error_candidate(None)
        nodes[(i, 0)] = _Node(State(x=view, candidate=cand), reply.error, reply.cost_usd, reply.tokens_in, reply.tokens_out)
    _score(nodes, [(i, 0) for i in range(len(views))], views, scorer)
    root_right = np.array([nodes[(i, 0)].correct for i in range(len(views))])
    solved = root_right.copy()

    bar = tqdm(total=tree.max_depth, desc=f"collect {pool_name}", unit="depth", disable=not progress)
    for depth in range(1, tree.max_depth + 1):
        if mode == "full":
            grow = np.ones(len(views), dtype=bool)
        elif depth == 1:
            grow = np.ones(len(views), dtype=bool)
        else:
            grow = ~solved
        parents = [(i, p) for p in tree.at_depth(depth - 1) for i in np.flatnonzero(grow) if (i, p) in nodes]
        if not parents:
            break
        pending: list[tuple[int, int, State, Consultation, float, int, int]] = []
        for a, agent in enumerate(tree.pool):
            batch = [(i, p, int(tree.child[p, a])) for i, p in parents if tree.child[p, a] >= 0]
            if not batch:
                continue
            sees = sees_candidate and agent in CANDIDATE_READERS
            replies = team.consult(agent, [nodes[(i, p)].state for i, p, _ in batch], sees)
            stats.consult_calls[agent] += 1
            for (i, p, c), reply in zip(batch, replies, strict=True):
                consultation = Consultation(
                    agent=agent, sees_candidate=sees, signal=reply.value, error=reply.error, signal_tokens=reply.tokens_out
                )
                pending.append((i, c, nodes[(i, p)].state, consultation, reply.cost_usd, reply.tokens_in, reply.tokens_out))
        to_revise = [k for k, item in enumerate(pending) if item[3].signal is not None]
        revised = team.revise([(pending[k][2], pending[k][3]) for k in to_revise]) if to_revise else []
        stats.revise_calls += 1 if to_revise else 0
        revision = dict(zip(to_revise, revised, strict=True))
        new_keys = []
        for k, (i, c, parent_state, consultation, cost, tin, tout) in enumerate(pending):
            error = consultation.error
            after = parent_state.candidate
            reply = revision.get(k)
            if reply is not None:
                cost, tin, tout = cost + reply.cost_usd, tin + reply.tokens_in, tout + reply.tokens_out
                if reply.value is not None:
                    after = reply.value
                else:
                    error = reply.error or "malformed revision"
            call = Call(
                agent=consultation.agent, sees_candidate=consultation.sees_candidate, signal=consultation.signal,
                error=error, before=parent_state.candidate, after=after, signal_tokens=consultation.signal_tokens,
            )
            state = State(x=parent_state.x, history=(*parent_state.history, call), candidate=after)
            nodes[(i, c)] = _Node(state, error, cost, tin, tout)
            new_keys.append((i, c))
        _score(nodes, new_keys, views, scorer)
        for i, c in new_keys:
            solved[i] |= nodes[(i, c)].correct
        bar.update(1)
    bar.close()

    if decisions:
        keys = sorted(nodes)
        replies = team.decide([nodes[k].state for k in keys], tree.pool)
        stats.decide_calls += 1
        for k, reply in zip(keys, replies, strict=True):
            node = nodes[k]
            node.decision_cost = reply.cost_usd
            if reply.value is None:
                node.decision, node.decision_error = "commit", reply.error or "malformed decision"
            else:
                node.decision = "commit" if reply.value.action == "commit" else reply.value.agent
                if node.decision != "commit" and (node.decision in node.state.used or node.decision not in tree.pool):
                    node.decision, node.decision_error = "commit", f"decided on unavailable sub-agent {node.decision}"

    frame = _frame(nodes, views, tree, pool_name, blank=not sees_candidate)
    stats.branches = len(nodes)
    stats.errors = int(frame["error"].is_not_null().sum())
    stats.cost_usd = float(frame["cost_usd"].sum() + frame["decision_cost_usd"].sum())
    stats.seconds = time.perf_counter() - start
    return frame, stats


def _score(nodes: dict[tuple[int, int], _Node], keys: list[tuple[int, int]], views: list[AgentView], scorer: GoldScorer) -> None:
    """Terminal scoring: committing each branch's candidate. Gold stays inside the scorer."""
    if not keys:
        return
    verdicts = scorer.score([views[i].item_id for i, _ in keys], [nodes[k].state.candidate.answer for k in keys])
    for k, v in zip(keys, verdicts, strict=True):
        nodes[k].correct = bool(v)


def _frame(nodes: dict[tuple[int, int], _Node], views: list[AgentView], tree: SequenceTree, pool_name: str, blank: bool) -> pl.DataFrame:
    if not nodes:
        return pl.DataFrame(schema=NODE_SCHEMA)
    scalar = [c for c in NODE_SCHEMA if c not in ("sequence", "features")]
    cols: dict[str, list] = {name: [] for name in scalar}
    sequences: list[str] = []
    features: list[list[float]] = []
    signal_json: dict[int, str] = {}
    for (i, c), node in sorted(nodes.items()):
        state = node.state
        last = state.history[-1] if state.history else None
        signal = None
        if last is not None and last.signal is not None:
            signal = signal_json.get(id(last.signal))
            if signal is None:
                signal = signal_json[id(last.signal)] = last.signal.model_dump_json()
        values = (
            pool_name, blank, i, views[i].item_id, views[i].difficulty, c, int(tree.parent[c]), int(tree.depth[c]),
            last.agent if last else None, state.candidate.answer, state.candidate.confidence,
            state.candidate.rationale, node.correct, last.raises_issue if last else None, last.changed if last else None,
            node.error, node.cost, node.tokens_in, node.tokens_out, signal, node.decision, node.decision_cost,
            node.decision_error,
        )
        for name, value in zip(scalar, values, strict=True):
            cols[name].append(value)
        sequences.append(">".join(state.sequence))
        features.append(state_features(state))
    frame = pl.DataFrame(cols, schema={c: NODE_SCHEMA[c] for c in scalar})
    seq = pl.Series("sequence", sequences, dtype=pl.String)
    feats = pl.Series("features", np.array(features, dtype=np.float64).reshape(len(features), -1)).cast(pl.List(pl.Float64))
    frame = frame.with_columns(
        pl.when(seq == "").then(pl.lit([], dtype=pl.List(pl.String))).otherwise(seq.str.split(">")).alias("sequence"),
        feats,
    )
    return frame.select(list(NODE_SCHEMA))
