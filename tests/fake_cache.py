"""A small answer cache written straight to the data-contract files (items, answers, labels, ability
map), for coordinator tests that need data without running the data stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.ability.maps import build_ability_map
from delegation_lab.params.root import AbilityMapParams
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import ITEMS_SCHEMA
from delegation_lab.pipeline.tables import conform, write_parquet_atomic

# name: (accuracy at difficulty 1, accuracy drop per difficulty step, cost per item in $)
PROFILES = {"A": (0.99, 0.01, 0.002), "B": (0.92, 0.06, 0.0004), "C": (0.75, 0.15, 0.00003)}
SIZES = {"ability": 120, "train": 160, "test": 64}


def write_fake_cache(root: Path, sizes: dict[str, int] = SIZES, profiles: dict = PROFILES, seed: int = 0,
                     with_map: bool = True) -> Layout:
    rng = np.random.default_rng(seed)
    layout = Layout(root)
    rows, n = [], 0
    for split, size in sizes.items():
        for _ in range(size):
            rows.append({"item_id": f"i{n:05d}", "split": split, "question": f"q{n}", "gold": "1", "choices": None,
                         "difficulty": int(rng.integers(1, 5)), "domain": "fake", "source": "fake",
                         "source_id": str(n), "program": None})
            n += 1
    items = conform(pl.DataFrame(rows, schema=ITEMS_SCHEMA), ITEMS_SCHEMA, "items")
    for split in sizes:
        write_parquet_atomic(items.filter(pl.col("split") == split), layout.items(split))
    hardness = rng.random(items.height)
    diff = items["difficulty"].to_numpy()
    labels = []
    for solver, (acc, drop, cost) in profiles.items():
        p = np.clip(acc - drop * (diff - 1), 0.02, 0.999)
        correct = (0.6 * hardness + 0.4 * rng.random(items.height)) < p
        costs = cost * (0.6 + 0.2 * diff) * rng.uniform(0.8, 1.2, items.height)
        answers = pl.DataFrame({
            "solver": solver, "item_id": items["item_id"], "request_hash": f"h-{solver}",
            "parsed_answer": np.where(correct, "1", "2"), "tokens_in": 50, "tokens_out": 100,
            "cost_usd": costs, "latency_s": 0.1,
        })
        write_parquet_atomic(answers, layout.answers(solver))
        labels.append(pl.DataFrame({"solver": solver, "item_id": items["item_id"], "request_hash": f"h-{solver}",
                                    "correct": correct, "method": "programmatic"}))
    labels_df = pl.concat(labels)
    write_parquet_atomic(labels_df, layout.labels)
    if with_map:
        from delegation_lab.pipeline.tables import read_labeled_answers

        ability = read_labeled_answers(layout).filter(pl.col("split") == "ability")
        write_parquet_atomic(build_ability_map(ability, AbilityMapParams()), layout.ability_map)
    return layout
