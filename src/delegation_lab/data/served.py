"""`data.dataset: served`: the requests `dlab serve` answered, as items, so `dvc repro` labels and
evaluates the deployed policies on live traffic (docs/serving.md).

One item per distinct conversation the server answered (HTTP 200), its question the last user turn,
its gold the client's `metadata.gold` or the `gold_path` file's (matched by question text), in
seeded splits of the configured sizes. The solve stage then finds the server's answers in
`data/served/answers/<solver>.parquet` under the same request hash and adopts them instead of paying
again (`serve.journal.adopt_served_answers`).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from delegation_lab.data.items import Item, take_splits
from delegation_lab.data.params import DataParams
from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.solvers.prompts import SERVED_SOURCE


def served_items(params: DataParams) -> list[Item]:
    section = params.served
    layout = Layout(Path(section.project))
    from delegation_lab.serve.journal import read_decisions  # noqa: PLC0415 - polars only, no server

    decisions = read_decisions(layout)
    if decisions.is_empty():
        raise InputError(f"{layout.served_decisions}: no served requests yet (run `dlab serve --root {section.project}`)")
    answered = decisions.filter(pl.col("status") == 200).sort("created_at")
    gold_file = _gold_file(Path(section.gold_path)) if section.gold_path else {}
    items: dict[str, Item] = {}
    missing = 0
    for row in answered.iter_rows(named=True):
        gold = gold_file.get(row["question"], row["gold"])
        if gold is None and not params.allow_missing_gold:
            missing += 1
            continue
        items[row["item_id"]] = Item(item_id=row["item_id"], split="pool", question=row["question"], gold=gold,
                                     source=SERVED_SOURCE, source_id=row["item_id"], domain="served")
    if not items:
        raise InputError(f"{layout.served_decisions}: none of {answered.height} answered requests has a gold answer "
                         "(metadata.gold, data.served.gold_path) and data.allow_missing_gold is false")
    return take_splits(list(items.values()), None, source=str(layout.served_decisions), **params.split_sizes())


def _gold_file(path: Path) -> dict[str, str]:
    """question -> gold from a JSONL file of {"question": ..., "gold": ...} rows."""
    gold: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise InputError(f"data.served.gold_path {path}: {e.strerror or e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            gold[str(row["question"])] = str(row["gold"])
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise InputError(f"{path}:{n}: expected {{\"question\": ..., \"gold\": ...}} ({e})") from None
    return gold
