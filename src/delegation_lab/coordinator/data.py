"""What the coordinator reads: per item x solver correctness and cost from the answer cache and
labels, the ability-map features of each item's difficulty bucket, and the input checks that must
pass before any training starts (unknown solvers, a missing ability map, an incomplete cache).

Correctness and costs come only from the cache and labels: no solver is ever called here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.ability.maps import bucket_of, domain_codes, lookup
from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.tables import read_items, read_labeled_answers


@dataclass(frozen=True)
class SolverTable:
    """One split's items (rows) x solvers (columns), everything an environment needs."""

    split: str
    solvers: tuple[str, ...]
    item_ids: np.ndarray  # str [N]
    difficulty: np.ndarray  # int [N]
    correct: np.ndarray  # bool [N, S]: the solver's one cached answer is right
    cost: np.ndarray  # float [N, S]: its solve cost in US dollars
    expected_cost: np.ndarray  # float [N, S]: expected solve cost of the item's bucket (delegation fees)
    map_rate: np.ndarray | None  # float [N, S]: ability-map success rate of the bucket (None: no map)
    map_cost: np.ndarray | None  # float [N, S]: ability-map mean cost of the bucket in dollars

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def select(self, solvers: list[str] | tuple[str, ...]) -> SolverTable:
        """The same items with the columns of `solvers`, in that order."""
        idx = [self.solvers.index(s) for s in solvers]
        return SolverTable(
            self.split, tuple(solvers), self.item_ids, self.difficulty, self.correct[:, idx], self.cost[:, idx],
            self.expected_cost[:, idx],
            None if self.map_rate is None else self.map_rate[:, idx],
            None if self.map_cost is None else self.map_cost[:, idx],
        )


@dataclass(frozen=True)
class CoordinatorData:
    train: SolverTable
    test: SolverTable
    has_map: bool
    dev: SolverTable | None = None  # the ability split: never trained on, selects checkpoints


def check_solver_names(names: list[str], known: list[str], key: str) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(
            f"params.yaml {key}: unknown solver(s) {unknown}; the solvers with labeled answers are {known} "
            "(names are keys of params.yaml `solvers`)"
        )


def _wide(labeled: pl.DataFrame, split: str, solvers: list[str], layout: Layout) -> tuple[np.ndarray, ...]:
    """(item_ids, difficulty, correct [N, S], cost [N, S]) of one split, or an InputError naming the gap."""
    items = read_items(layout, (split,)).select("item_id", "difficulty").sort("item_id")
    if items.is_empty():
        raise InputError(f"{layout.items(split)}: the {split} split has no items; check data.{split}_size")
    part = labeled.filter(pl.col("split") == split)
    correct = np.zeros((items.height, len(solvers)), dtype=bool)
    cost = np.zeros((items.height, len(solvers)), dtype=np.float64)
    ids = items["item_id"].to_numpy()
    for j, solver in enumerate(solvers):
        rows = items.join(part.filter(pl.col("solver") == solver).select("item_id", "correct", "cost_usd"),
                          on="item_id", how="left")
        missing = rows.filter(pl.col("correct").is_null())
        if missing.height:
            raise InputError(
                f"{layout.answers(solver)}: solver {solver!r} has no labeled answer for {missing.height} of "
                f"{items.height} {split} items (e.g. {missing['item_id'].head(3).to_list()}); "
                f"run `dvc repro solve label` (or `python stages/solve.py --solver {solver}`)"
            )
        correct[:, j] = rows["correct"].to_numpy()
        cost[:, j] = rows["cost_usd"].fill_null(0.0).to_numpy()
    return ids, items["difficulty"].to_numpy().astype(np.int64), correct, cost


def _bucket_table(ability_map: pl.DataFrame, solvers: list[str], difficulties: np.ndarray,
                  edges: list[int] | None, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per item x solver: the map's success rate and mean cost of the item's bucket (nearest if unseen)."""
    rate = np.zeros((len(difficulties), len(solvers)))
    cost = np.zeros((len(difficulties), len(solvers)))
    have = set(ability_map["solver"].unique().to_list())
    missing = [s for s in solvers if s not in have]
    if missing:
        raise InputError(f"{path}: the ability map has no rows for solver(s) {missing}; run `dvc repro ability_map`")
    for d in np.unique(difficulties):
        rows = difficulties == d
        for j, solver in enumerate(solvers):
            hit = lookup(ability_map, solver, int(d), edges)
            rate[rows, j] = hit["success_rate"]
            cost[rows, j] = hit["mean_cost_usd"]
    return rate, cost


def _train_cost_by_bucket(difficulty: np.ndarray, cost: np.ndarray, edges: list[int] | None,
                          other: np.ndarray) -> np.ndarray:
    """Expected cost without a map: the train split's mean cost per solver and bucket (overall mean if unseen)."""
    buckets = bucket_of(difficulty, edges)
    wanted = bucket_of(other, edges)
    out = np.tile(cost.mean(axis=0), (len(other), 1))
    for b in np.unique(wanted):
        seen = buckets == b
        if seen.any():
            out[wanted == b] = cost[seen].mean(axis=0)
    return out


def _domain_keys(layout: Layout, ids: np.ndarray) -> np.ndarray:
    """Each item's domain bucket, numbered as the ability map numbers them (ability.domain_codes over every item)."""
    items = read_items(layout).select("item_id", "domain")
    codes = domain_codes(items["domain"].unique().to_list())
    by_id = dict(zip(items["item_id"].to_list(), items["domain"].to_list(), strict=True))
    return np.asarray([codes[by_id[i]] for i in ids], dtype=np.int64)


def load_coordinator_data(layout: Layout, solvers: list[str], need_map: bool,
                          bucket_edges: list[int] | None, bucket_by: str = "difficulty") -> CoordinatorData:
    """Train and test tables for `solvers`; every check runs here, before any training. With
    `bucket_by: domain` the items' buckets are their domains (the map's keys) instead of difficulty."""
    labeled = read_labeled_answers(layout)
    known = labeled["solver"].unique().sort().to_list()
    check_solver_names(solvers, known, "coordinator (routes / agents)")
    map_path = layout.ability_map
    has_map = map_path.exists()
    if need_map and not has_map:
        raise InputError(
            f"{map_path}: not found, but coordinator.methods includes a map-observing coordinator (dqn_map); "
            "run `dvc repro ability_map` or use dqn_nomap only"
        )
    tables = {}
    for split in ("train", "test", "ability"):
        try:
            ids, diff, correct, cost = _wide(labeled, split, solvers, layout)
        except (InputError, OSError):
            if split == "ability":  # optional: without it no checkpoint is selected
                continue
            raise
        if bucket_by == "domain":
            diff = _domain_keys(layout, ids)
        tables[split] = (ids, diff, correct, cost)
    if bucket_by == "domain":
        bucket_edges = None
    ability_map = pl.read_parquet(map_path) if has_map else None
    out = {}
    for split, (ids, diff, correct, cost) in tables.items():
        if ability_map is not None:
            rate, mcost = _bucket_table(ability_map, solvers, diff, bucket_edges, map_path)
            expected = mcost
        else:
            rate = mcost = None
            t_ids, t_diff, _, t_cost = tables["train"]
            expected = _train_cost_by_bucket(t_diff, t_cost, bucket_edges, diff)
        out[split] = SolverTable(split, tuple(solvers), ids, diff, correct, cost, expected, rate, mcost)
    dev = out.get("ability")
    return CoordinatorData(out["train"], out["test"], has_map,
                           None if dev is None else SolverTable("dev", *[getattr(dev, f) for f in _FIELDS]))


_FIELDS = ("solvers", "item_ids", "difficulty", "correct", "cost", "expected_cost", "map_rate", "map_cost")
