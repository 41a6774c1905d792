"""`data.dataset: replay`: a solver-answer cache standing as its own dataset.

One item per distinct (normalised) question of the cache. Its gold is the GSM8K question's it matches
(`gsm8k_path`), else the gold the cache brings (a `gold` column: zeroeval; our labeler grades the
replies against it), else unknown: the replayed answers bring their own correctness labels (label
method `imported`). With this a user who has only a cache runs the whole pipeline: prepare (dataset
replay) -> solve (solvers with backend replay) -> label.

Each item's difficulty comes from, in this order: the GSM8K question it matches (`gsm8k_path`: its
number of solution steps, and its gold), the cache's `difficulty_column`, or the item's domain
(bucket 1, 2, ... by domain name, so one-domain caches put every item in bucket 1).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.ability.maps import domain_codes
from delegation_lab.data.items import Item, make_item_id, take_splits
from delegation_lab.data.params import DataParams, ReplayDatasetParams
from delegation_lab.errors import InputError
from delegation_lab.solvers.replay.cache import load_cache, normalise_question


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


def gsm8k_by_question(path: str | Path) -> dict[str, Item]:
    """Every GSM8K item of the folder's train.jsonl and test.jsonl (either may be absent) by normalised question."""
    from delegation_lab.data.sources import gsm8k_item, read_jsonl

    root = Path(path)
    files = [(name, root / f"{name}.jsonl") for name in ("train", "test") if (root / f"{name}.jsonl").exists()]
    if not files:
        raise ReplayDataError(f"data.replay.gsm8k_path: {root} holds neither train.jsonl nor test.jsonl")
    out: dict[str, Item] = {}
    for name, file in files:
        for i, row in enumerate(read_jsonl(file)):
            item = gsm8k_item(row, name, i, file, i + 1)
            out.setdefault(normalise_question(item.question), item)
    return out


def load_replay_items(params: ReplayDatasetParams) -> list[Item]:
    """One item per distinct normalised prompt of the cache, in file order (first row wins)."""
    if not params.path:
        raise ReplayDataError("data.replay.path is empty; set it to the cache file, folder or glob (and data.replay.format)")
    path = Path(params.path)
    frame = load_cache(params.path, params.format, params.fields, params.trust_pickle, params.score_threshold).frame
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
    gsm8k = gsm8k_by_question(params.gsm8k_path) if params.gsm8k_path else {}
    first = frame.unique(subset="key", keep="first", maintain_order=True)
    codes = domain_codes(first["domain"].to_list())
    wanted = ["source_index", "prompt", "key", "domain"] + ([column] if column else [])
    if "gold" in first.columns:
        wanted.append("gold")
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
        known = gsm8k.get(row["key"])
        if known is not None:
            difficulty, gold = known.difficulty, known.gold
        else:
            difficulty = _difficulty(row[column], path, column, source_id) if column else codes[row["domain"]]
            gold = None if row.get("gold") is None else str(row["gold"])
        items.append(Item(
            item_id=make_item_id(f"replay:{path.name}", source_id),
            split="",
            question=row["prompt"],
            gold=gold,
            difficulty=difficulty,
            domain=row["domain"],
            source=path.name,
            source_id=source_id,
        ))
    return items


def replay_items(params: DataParams) -> list[Item]:
    """`data.dataset: replay`: the cache's questions in seeded splits of the configured sizes."""
    items = load_replay_items(params.replay)
    return take_splits(items, None, source=params.replay.path, **params.split_sizes())
