"""`data.dataset: replay`: a solver-answer cache standing as its own dataset.

One item per distinct (normalised) question of the cache. Its gold is the GSM8K question's it matches
(`gsm8k_path`), else the gold the cache brings (`records.ITEM_COLUMNS`, with the choices of a
multiple-choice question and the matcher that grades it: zeroeval; our labeler grades the replies
against it), else unknown: the replayed answers bring their own correctness labels (label method
`imported`). With this a user who has only a cache runs the whole pipeline: prepare (dataset
replay) -> solve (solvers with backend replay) -> label.

Each item's difficulty comes from, in this order: the GSM8K question it matches (`gsm8k_path`: its
number of solution steps, and its gold), the cache's `difficulty_column`, or the item's domain
(bucket 1, 2, ... by domain name, so one-domain caches put every item in bucket 1).

Splits: seeded by `data.seed` and the sizes, or (`data.split: as_published`) the split the cache
publishes in its `source_split` column: `test` questions form the test split, `train` questions the
pool ability and train are drawn from.
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
from delegation_lab.solvers.replay.records import ITEM_COLUMNS, PUBLISHED_SPLIT

PUBLISHED_TRAIN, PUBLISHED_TEST = "train", "test"
"""The published split names `data.split: as_published` knows: the pool (ability + train) and the test split."""


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
    return _replay_items(params, keep_split=False)[0]


def _replay_items(params: ReplayDatasetParams, keep_split: bool) -> tuple[list[Item], list[tuple[str | None, str]]]:
    """The items and, with `keep_split`, each one's published split and the file its first row came
    from; a cache that publishes no split fails naming its files."""
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
    wanted = ["source_index", "prompt", "key", "domain", "source_file"] + ([column] if column else [])
    wanted += [c for c in ITEM_COLUMNS if c in first.columns]
    if keep_split:
        require_published_split(frame, path, params.format)
        wanted.append(PUBLISHED_SPLIT)
    seen: dict[str, int] = {}
    items, splits = [], []
    for row in first.select(wanted).iter_rows(named=True):
        source_id = str(row["source_index"])
        # Distinct questions sharing a source index (e.g. a file joining several benchmarks) get a
        # deterministic suffix so item ids stay unique.
        n = seen.get(source_id, 0) + 1
        seen[source_id] = n
        if n > 1:
            source_id = f"{source_id}~{n}"
        known = gsm8k.get(row["key"])
        brought = {c: row.get(c) for c in ITEM_COLUMNS}
        if known is not None:
            difficulty, brought["gold"] = known.difficulty, known.gold
        else:
            difficulty = _difficulty(row[column], path, column, source_id) if column else codes[row["domain"]]
        items.append(Item(
            item_id=make_item_id(f"replay:{path.name}", source_id),
            split="",
            question=row["prompt"],
            **brought,
            difficulty=difficulty,
            domain=row["domain"],
            source=path.name,
            source_id=source_id,
        ))
        if keep_split:
            splits.append((row[PUBLISHED_SPLIT], row["source_file"]))
    return items, splits


def require_published_split(frame: pl.DataFrame, path: Path, format: str) -> None:
    """`data.split: as_published` needs a cache that publishes a split: else fail naming its files."""
    if PUBLISHED_SPLIT in frame.columns and frame[PUBLISHED_SPLIT].is_not_null().any():
        return
    files = frame["source_file"].unique(maintain_order=True).to_list()
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    raise ReplayDataError(
        f"{path}: data.split is as_published but this {format} cache publishes no split ({shown}: no split "
        "file, folder or column; docs/real_data.md lists which layouts publish one); set data.split: seeded"
    )


def published_split_problems(params: DataParams) -> list[str]:
    """What `dlab params check` finds wrong with `data.split: as_published` before any stage runs."""
    if params.dataset != "replay" or params.split != "as_published":
        return []
    try:
        replay_items(params)
    except InputError as e:
        return [str(e)]
    return []


def replay_items(params: DataParams) -> list[Item]:
    """`data.dataset: replay`: the cache's questions in seeded splits of the configured sizes, or in the
    split the cache publishes (`data.split: as_published`)."""
    if params.split != "as_published":
        items = load_replay_items(params.replay)
        return take_splits(items, None, source=params.replay.path, **params.split_sizes())
    items, splits = _replay_items(params.replay, keep_split=True)
    pool, test = [], []
    for item, (split, file) in zip(items, splits, strict=True):
        if split == PUBLISHED_TRAIN:
            pool.append(item)
        elif split == PUBLISHED_TEST:
            test.append(item)
        else:
            raise ReplayDataError(
                f"{file}: source index {item.source_id!r}: published split {split!r} is neither "
                f"{PUBLISHED_TRAIN!r} nor {PUBLISHED_TEST!r} (data.split: as_published); set data.split: seeded"
            )
    source = f"{params.replay.path} (data.split: as_published)"
    if not test or not pool:
        missing = PUBLISHED_TEST if not test else PUBLISHED_TRAIN
        raise ReplayDataError(f"{source}: the cache publishes no {missing!r} question ({len(pool)} train, "
                              f"{len(test)} test); set data.split: seeded")
    return take_splits(pool, test, source=source, **params.split_sizes())
