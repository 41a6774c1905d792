"""`data.dataset: replay`: a solver-answer cache standing as its own dataset.

One item per distinct (normalised) question of the cache, gold unknown: the replayed answers bring
their own correctness labels (label method `imported`). With this a user who has only a cache runs
the whole pipeline: prepare (dataset replay) -> solve@X (backend replay) -> label (imported).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.config import ReplayDatasetParams
from delegation_lab.data.items import Item, make_item_id
from delegation_lab.errors import InputError
from delegation_lab.solvers.replay import load_cache


class ReplayDataError(InputError):
    """A cache that cannot be turned into items; the message names the file and the key."""


def _difficulty(value: Any, path: Path, column: str, source_id: str) -> int:
    where = f"{path}: column {column!r}, source index {source_id!r}"
    if value is None or isinstance(value, bool):
        raise ReplayDataError(f"{where}: difficulty {value!r} is not an integer")
    if isinstance(value, float):
        if math.isnan(value) or not value.is_integer():
            raise ReplayDataError(f"{where}: difficulty {value!r} is not an integer")
        return int(value)
    if isinstance(value, int):
        return value
    try:
        f = float(str(value).strip())
    except ValueError:
        raise ReplayDataError(f"{where}: difficulty {value!r} is not an integer") from None
    if not f.is_integer():
        raise ReplayDataError(f"{where}: difficulty {value!r} is not an integer")
    return int(f)


def load_replay_items(params: ReplayDatasetParams) -> list[Item]:
    """One item per distinct normalised prompt of the cache, in file order (first row wins)."""
    if not params.path:
        raise ReplayDataError("data.replay.path is empty; set it to the cache file (and data.replay.format)")
    path = Path(params.path)
    frame = load_cache(path, params.format, params.trust_pickle).frame
    if params.eval_name is not None:
        if "eval_name" not in frame.columns:
            raise ReplayDataError(
                f"{path}: data.replay.eval_name is {params.eval_name!r} but the {params.format} cache has no "
                f"'eval_name' column (columns: {frame.columns}); set data.replay.eval_name: null"
            )
        names = frame["eval_name"].cast(pl.String).unique(maintain_order=True).to_list()
        frame = frame.filter(pl.col("eval_name").cast(pl.String) == params.eval_name)
        if frame.height == 0:
            raise ReplayDataError(f"{path}: no rows with eval_name {params.eval_name!r}; eval names: {names}")
    column = params.difficulty_column
    if column is not None and column not in frame.columns:
        raise ReplayDataError(
            f"{path}: data.replay.difficulty_column {column!r} is not a column of the cache "
            f"(columns: {[c for c in frame.columns if c != 'key']})"
        )
    first = frame.unique(subset="key", keep="first", maintain_order=True)
    wanted = ["source_index", "prompt"] + ([column] if column else [])
    seen: dict[str, int] = {}
    items = []
    for row in first.select(wanted).iter_rows(named=True):
        source_id = str(row["source_index"])
        # Distinct questions sharing a source index (e.g. a file joining several benchmarks) get a
        # deterministic suffix so item ids stay unique.
        n = seen.get(source_id, 0) + 1
        seen[source_id] = n
        if n > 1:
            source_id = f"{source_id}~{n}"
        difficulty = _difficulty(row[column], path, column, source_id) if column else 1
        items.append(Item(
            item_id=make_item_id(f"replay:{path.name}", source_id),
            split="",
            question=row["prompt"],
            gold=None,
            difficulty=difficulty,
            domain="replay",
            source=path.name,
            source_id=source_id,
        ))
    return items
