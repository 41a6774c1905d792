"""Loaders for real datasets: GSM8K, AQuA-RAT, and generic JSONL / Parquet tables.

Each loader returns (pool, test_pool): the items ability + train are carved from, and the official
test items (or None when the source has no test split). Bad input names the file and line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.data.items import Item, make_item_id, require_every_split, take_splits
from delegation_lab.data.params import AquaRatParams, DataParams, Gsm8kParams, TableParams
from delegation_lab.errors import InputError, decode_utf8
from delegation_lab.json_input import loads, regular_file
from delegation_lab.parsing import normalise_number, parse_gsm8k_gold


class DataError(InputError):
    """Bad input data; the message names the file (and line or field)."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """JSON lines (blank lines skipped). A file holding one JSON array is accepted too."""
    regular_file(path, DataError)  # a FIFO would block the open, /dev/zero never end
    text = decode_utf8(path.read_bytes(), path, DataError)
    if text.lstrip().startswith("["):
        try:
            rows = loads(text, str(path), DataError)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}: line {e.lineno}: malformed JSON ({e.msg})") from None
        return rows
    return parse_json_lines(text, path)


def numbered_json_lines(text: str, path: Path, error: type[InputError] | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line; a bad line fails naming file and line number."""
    error = error or DataError
    rows = []
    # "\n" alone ends a line: str.splitlines would also split inside strings at U+2028, U+0085, ...
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = loads(line, f"{path}: line {lineno}", error)
        except json.JSONDecodeError as e:
            raise error(f"{path}: line {lineno}: malformed JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise error(f"{path}: line {lineno}: expected a JSON object, got {type(row).__name__}")
        rows.append((lineno, row))
    return rows


def parse_json_lines(text: str, path: Path) -> list[dict[str, Any]]:
    """One JSON object per non-blank line; a bad line is named by file and line number."""
    return [row for _, row in numbered_json_lines(text, path)]


def _field(row: dict[str, Any], name: str, path: Path, lineno: int) -> Any:
    if name not in row or row[name] is None:
        raise DataError(f"{path}: line {lineno}: missing field {name!r} (has {sorted(row)})")
    return row[name]


# ------------------------------------------------------------------------------------------ gsm8k

CALC = re.compile(r"<<([^=<>]*)=([^<>]*)>>")


def gsm8k_item(row: dict[str, Any], split_name: str, index: int, path: Path, lineno: int) -> Item:
    question = _field(row, "question", path, lineno)
    answer = _field(row, "answer", path, lineno)
    gold = parse_gsm8k_gold(answer)
    if gold is None:
        raise DataError(f"{path}: line {lineno}: field 'answer' does not end in '#### <number>'")
    steps = [{"op": "calc", "expr": expr, "result": res} for expr, res in CALC.findall(answer)]
    source_id = f"{split_name}-{index}"
    return Item(
        item_id=make_item_id("gsm8k", source_id),
        split="",
        question=question,
        gold=gold,
        difficulty=max(len(steps), 1),
        domain="math",
        source="gsm8k",
        source_id=source_id,
        program=json.dumps(steps),
    )


def load_gsm8k(params: Gsm8kParams) -> tuple[list[Item], list[Item]]:
    if params.path is None:
        rows = _gsm8k_from_hub(params.hub_id)
    else:
        root = Path(params.path)
        rows = {name: read_jsonl(root / f"{name}.jsonl") for name in ("train", "test")}
    out = {}
    for name, split_rows in rows.items():
        path = Path(params.path or params.hub_id) / f"{name}.jsonl"
        out[name] = [gsm8k_item(row, name, i, path, i + 1) for i, row in enumerate(split_rows)]
    return out["train"], out["test"]


def gsm8k_items(params: DataParams) -> list[Item]:
    """`data.dataset: gsm8k`: ability + train from the official train split, test from its test split."""
    pool, test = load_gsm8k(params.gsm8k)
    source = f"gsm8k ({params.gsm8k.path or params.gsm8k.hub_id})"
    return take_splits(pool, test, source=source, **params.split_sizes())


def _gsm8k_from_hub(hub_id: str) -> dict[str, list[dict[str, Any]]]:
    try:
        import datasets  # type: ignore[import-not-found]
    except ImportError:
        raise DataError(
            "data.gsm8k.path is null, so GSM8K comes from the Hugging Face hub, which needs "
            "`pip install datasets` and a network; or set data.gsm8k.path to a folder with train.jsonl and test.jsonl"
        ) from None
    ds = datasets.load_dataset(hub_id, "main")
    return {name: [dict(r) for r in ds[name]] for name in ("train", "test")}


# ---------------------------------------------------------------------------------------- aqua_rat

OPTION = re.compile(r"^\s*([A-E])\s*\)\s*(.*)$", re.S)


def aqua_item(row: dict[str, Any], split_name: str, index: int, path: Path, lineno: int) -> Item:
    question = _field(row, "question", path, lineno)
    options = _field(row, "options", path, lineno)
    correct = str(_field(row, "correct", path, lineno)).strip().upper()
    choices = []
    for option in options:
        m = OPTION.match(str(option))
        if not m:
            raise DataError(f"{path}: line {lineno}: option {option!r} is not of the form 'A)...'")
        choices.append(m.group(2).strip())
    letters = "ABCDE"[: len(choices)]
    if correct not in letters:
        raise DataError(f"{path}: line {lineno}: field 'correct' is {correct!r}, not one of {list(letters)}")
    rationale = str(row.get("rationale") or "")
    source_id = f"{split_name}-{index}"
    return Item(
        item_id=make_item_id("aqua_rat", source_id),
        split="",
        question=question,
        gold=correct,
        choices=choices,
        difficulty=max(1, min(8, rationale.count("\n") // 2 + 1)),
        domain="math",
        source="aqua_rat",
        source_id=source_id,
    )


def load_aqua_rat(params: AquaRatParams) -> tuple[list[Item], list[Item]]:
    root = Path(params.path)
    out = {}
    for name in ("dev", "test"):
        path = root / f"{name}.json"
        out[name] = [aqua_item(row, name, i, path, i + 1) for i, row in enumerate(read_jsonl(path))]
    return out["dev"], out["test"]


def aqua_rat_items(params: DataParams) -> list[Item]:
    """`data.dataset: aqua_rat`: ability + train from the dev split, test from its test split."""
    pool, test = load_aqua_rat(params.aqua_rat)
    return take_splits(pool, test, source=f"aqua_rat ({params.aqua_rat.path})", **params.split_sizes())


# ------------------------------------------------------------------------------------------- table


def read_parquet_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a Parquet file; a missing, empty or corrupt file is named, not a polars traceback."""
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        return pl.read_parquet(path).to_dicts()
    # a malformed footer can make polars panic (a BaseException), not raise
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"{path}: not a readable Parquet file ({detail})") from None


def as_text(value: Any) -> str:
    """A cell as text: lists and objects as JSON (never Python's repr), other values with str()."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def load_table(
    params: TableParams, fmt: str, allow_missing_gold: bool = False
) -> tuple[list[Item], list[Item] | None, dict[str, str] | None]:
    """Generic table: returns (items, None, fixed splits by item_id or None).

    A row without gold (field missing or null) fails naming the file and line, unless
    `allow_missing_gold` (params `data.allow_missing_gold`) or the table has no gold field at all."""
    path = Path(params.path)
    if not params.path:
        raise DataError(f"data.table.path is empty; set it to the {fmt} file to load")
    rows = read_parquet_rows(path) if fmt == "parquet" else read_jsonl(path)
    f = params.fields
    items, splits = [], {} if f.split else None
    for i, row in enumerate(rows):
        lineno = i + 1
        question = _field(row, f.question, path, lineno)
        gold = row.get(f.gold) if f.gold else None
        if f.gold and gold is None and not allow_missing_gold:
            raise DataError(
                f"{path}: line {lineno}: no gold in field {f.gold!r} (has {sorted(row)}); "
                "set data.allow_missing_gold: true to keep such rows"
            )
        choices = _field(row, f.choices, path, lineno) if f.choices else None
        if choices is not None and not isinstance(choices, (list, tuple)):
            raise DataError(f"{path}: line {lineno}: field {f.choices!r} is {type(choices).__name__}, expected a list")
        if gold is not None and choices is None:
            gold = normalise_number(as_text(gold)) or as_text(gold).strip()
        difficulty = int(_field(row, f.difficulty, path, lineno)) if f.difficulty else 1
        source_id = as_text(_field(row, f.id, path, lineno)) if f.id else str(i)
        item = Item(
            item_id=make_item_id(f"{fmt}:{path.name}", source_id),
            split="",
            question=as_text(question),
            gold=None if gold is None else as_text(gold),
            choices=[as_text(c) for c in choices] if choices is not None else None,
            difficulty=difficulty,
            domain=params.domain,
            source=path.name,
            source_id=source_id,
        )
        items.append(item)
        if splits is not None:
            split = as_text(_field(row, f.split, path, lineno))
            if split not in ("ability", "train", "test"):
                raise DataError(f"{path}: line {lineno}: split {split!r} is not ability, train or test")
            splits[item.item_id] = split
    if not items:
        raise DataError(f"{path}: no rows")
    return items, None, splits


def table_items(params: DataParams) -> list[Item]:
    """`data.dataset: jsonl | parquet`: the table's rows, in the splits its split column names or
    else in seeded splits of the configured sizes."""
    items, _, fixed = load_table(params.table, params.dataset, params.allow_missing_gold)
    if fixed is not None:
        fixed_items = [item.model_copy(update={"split": fixed[item.item_id]}) for item in items]
        return require_every_split(fixed_items, f"{params.table.path} (column {params.table.fields.split!r})")
    return take_splits(items, None, source=params.table.path, **params.split_sizes())
