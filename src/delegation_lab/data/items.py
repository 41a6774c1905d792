"""The item record, stable ids, and the seeded split into ability / train / test."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from delegation_lab.errors import InputError
from delegation_lab.pipeline.schemas import ITEMS_OPTIONAL_SCHEMA, ITEMS_SCHEMA
from delegation_lab.pipeline.tables import conform


class Item(BaseModel):
    """One benchmark question as every solver and study sees it."""

    model_config = ConfigDict(frozen=True)

    item_id: str
    split: str
    question: str
    gold: str | None
    choices: list[str] | None = None
    difficulty: int = 1
    domain: str = ""
    source: str = ""
    source_id: str = ""
    program: str | None = None  # JSON list of solution steps, when the source has them
    answer_format: str | None = None  # how its answers are labelled (label.matcher's values); None = the params'

    def steps(self) -> list[dict]:
        return json.loads(self.program) if self.program else []


def make_item_id(dataset: str, source_id: str) -> str:
    """Short stable hash of (dataset, source id)."""
    return hashlib.sha256(f"{dataset}\x1f{source_id}".encode()).hexdigest()[:16]


def items_frame(items: list[Item]) -> pl.DataFrame:
    """The items table; an optional column only when some item sets it (unchanged tables stay byte-equal)."""
    rows = [item.model_dump() for item in items]
    used = {c: t for c, t in ITEMS_OPTIONAL_SCHEMA.items() if any(r[c] is not None for r in rows)}
    schema = {**ITEMS_SCHEMA, **used}
    df = pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
    return conform(df, schema, "items")


def items_from_frame(df: pl.DataFrame) -> list[Item]:
    columns = list(ITEMS_SCHEMA) + [c for c in ITEMS_OPTIONAL_SCHEMA if c in df.columns]
    return [Item(**row) for row in df.select(columns).iter_rows(named=True)]


class SplitError(InputError):
    pass


def take_splits(
    pool: list[Item],
    test_pool: list[Item] | None,
    ability_size: int,
    train_size: int | None,
    test_size: int | None,
    seed: int,
    source: str,
) -> list[Item]:
    """Carve ability + train from `pool` and test from `test_pool` (or from `pool` when it is None).

    Seeded permutation: the same seed and sources give the same items in the same splits.
    """
    rng = np.random.default_rng(seed)
    order = [pool[i] for i in rng.permutation(len(pool))]
    if test_pool is None:
        if test_size is None:
            raise SplitError(f"{source}: has no official test split, so data.test_size must be a number")
        test, order = order[:test_size], order[test_size:]
        if len(test) < test_size:
            raise SplitError(f"{source}: {len(pool)} items cannot give data.test_size={test_size}")
    else:
        test = list(test_pool)
        if test_size is not None:
            if test_size > len(test):
                raise SplitError(f"{source}: data.test_size={test_size} but the source has {len(test)} test items")
            test = [test[i] for i in sorted(rng.permutation(len(test))[:test_size])]
    need_train = train_size if train_size is not None else max(len(order) - ability_size, 0)
    if ability_size + need_train > len(order):
        raise SplitError(
            f"{source}: ability_size={ability_size} + train_size={train_size} = {ability_size + need_train} "
            f"exceeds the {len(order)} non-test items available"
        )
    ability, train = order[:ability_size], order[ability_size : ability_size + need_train]
    out = [item.model_copy(update={"split": split})
           for split, chunk in (("ability", ability), ("train", train), ("test", test)) for item in chunk]
    return require_every_split(out, source)


def require_every_split(items: list[Item], source: str) -> list[Item]:
    """Every study needs ability, train and test items: an empty split is an error listing the sizes."""
    sizes = {split: sum(item.split == split for item in items) for split in ("ability", "train", "test")}
    empty = [split for split, n in sizes.items() if n == 0]
    if empty:
        listed = ", ".join(f"{split} {n}" for split, n in sizes.items())
        raise SplitError(f"{source}: split {', '.join(map(repr, empty))} would be empty (sizes: {listed})")
    return items
