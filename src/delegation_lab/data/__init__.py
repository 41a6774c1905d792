"""Datasets and splits: every source becomes `Item`s in ability / train / test.

Modules: `params` (the `data` section), `items` (the item record and the seeded split), `arith`
(the generated default), `sources` (GSM8K, AQuA-RAT, JSONL / Parquet tables), `replay` (an answer
cache standing as its own dataset), `served` (the traffic `dlab serve` journalled). `DATASETS` names each dataset's loader: a function of the
`data` params returning every item with its split (docs/registries.md: adding one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from delegation_lab.registry import Registry

if TYPE_CHECKING:
    from delegation_lab.data.items import Item
    from delegation_lab.data.params import DataParams

DATASETS: Registry[Callable[[DataParams], list[Item]]] = Registry("dataset", "data.dataset")
DATASETS.register("arith", "delegation_lab.data.arith:arith_items")
DATASETS.register("gsm8k", "delegation_lab.data.sources:gsm8k_items")
DATASETS.register("aqua_rat", "delegation_lab.data.sources:aqua_rat_items")
DATASETS.register("jsonl", "delegation_lab.data.sources:table_items")
DATASETS.register("parquet", "delegation_lab.data.sources:table_items")
DATASETS.register("replay", "delegation_lab.data.replay:replay_items")
DATASETS.register("served", "delegation_lab.data.served:served_items")


def build_items(params: DataParams) -> list[Item]:
    """All items of the configured dataset, each assigned to its split."""
    return DATASETS.get(params.dataset)(params)


__all__ = ["DATASETS", "build_items"]
