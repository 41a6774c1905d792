"""The tree of ordered call sequences: every sequence of distinct sub-agents up to a depth, numbered
breadth-first (root = 0), with parent / child tables so a policy's path is a lookup."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class SequenceTree:
    pool: tuple[str, ...]
    max_depth: int
    sequences: list[tuple[str, ...]] = field(init=False)
    index: dict[tuple[str, ...], int] = field(init=False)
    parent: np.ndarray = field(init=False)  # [n_nodes], -1 for the root
    child: np.ndarray = field(init=False)  # [n_nodes, len(pool)], -1 where the agent is used or depth is full
    depth: np.ndarray = field(init=False)
    last: np.ndarray = field(init=False)  # index in pool of the last agent, -1 for the root

    def __post_init__(self) -> None:
        if not 0 <= self.max_depth <= len(self.pool):
            raise ValueError(f"depth {self.max_depth} outside 0..{len(self.pool)}")
        seqs = [s for d in range(self.max_depth + 1) for s in itertools.permutations(self.pool, d)]
        index = {s: i for i, s in enumerate(seqs)}
        parent = np.array([index[s[:-1]] if s else -1 for s in seqs], dtype=np.int64)
        child = np.full((len(seqs), len(self.pool)), -1, dtype=np.int64)
        for s, i in index.items():
            for a, agent in enumerate(self.pool):
                nxt = (*s, agent)
                if nxt in index:
                    child[i, a] = index[nxt]
        object.__setattr__(self, "sequences", seqs)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "parent", parent)
        object.__setattr__(self, "child", child)
        object.__setattr__(self, "depth", np.array([len(s) for s in seqs], dtype=np.int64))
        object.__setattr__(self, "last", np.array([self.pool.index(s[-1]) if s else -1 for s in seqs], dtype=np.int64))

    @property
    def n_nodes(self) -> int:
        return len(self.sequences)

    def at_depth(self, d: int) -> list[int]:
        return [i for i, s in enumerate(self.sequences) if len(s) == d]
