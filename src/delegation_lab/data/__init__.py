"""Datasets and splits: every source becomes `Item`s in ability / train / test."""

from __future__ import annotations

from delegation_lab.config import DataParams
from delegation_lab.data import arith
from delegation_lab.data.items import Item, SplitError, require_every_split, take_splits
from delegation_lab.data.sources import DataError, load_aqua_rat, load_gsm8k, load_table

__all__ = ["DataError", "Item", "SplitError", "build_items"]


def build_items(params: DataParams) -> list[Item]:
    """All items of the configured dataset, each assigned to its split."""
    kind = params.dataset
    sizes = dict(
        ability_size=params.ability_size, train_size=params.train_size, test_size=params.test_size, seed=params.seed
    )
    if kind == "arith":
        n_pool = params.ability_size + (params.train_size or 0)
        if params.train_size is None or params.test_size is None:
            raise SplitError("arith generates items, so data.train_size and data.test_size must be numbers")
        pool = arith.generate(params.arith, n_pool, params.seed)
        test = arith.generate(params.arith, params.test_size, params.seed, offset=10_000_000)
        return take_splits(pool, test, source="arith", **sizes)
    if kind == "gsm8k":
        pool, test = load_gsm8k(params.gsm8k)
        return take_splits(pool, test, source=f"gsm8k ({params.gsm8k.path or params.gsm8k.hub_id})", **sizes)
    if kind == "aqua_rat":
        pool, test = load_aqua_rat(params.aqua_rat)
        return take_splits(pool, test, source=f"aqua_rat ({params.aqua_rat.path})", **sizes)
    if kind in ("jsonl", "parquet"):
        items, _, fixed = load_table(params.table, kind, params.allow_missing_gold)
        if fixed is not None:
            fixed_items = [item.model_copy(update={"split": fixed[item.item_id]}) for item in items]
            return require_every_split(fixed_items, f"{params.table.path} (column {params.table.fields.split!r})")
        return take_splits(items, None, source=params.table.path, **sizes)
    if kind == "replay":
        from delegation_lab.data.replay import load_replay_items

        items = load_replay_items(params.replay)
        return take_splits(items, None, source=params.replay.path, **sizes)
    raise DataError(f"data.dataset: unknown dataset {kind!r}")
