"""Datasets and splits: the arith generator, GSM8K / AQuA-RAT / table loaders, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delegation_lab.data import arith, build_items
from delegation_lab.data.arith import TEMPLATES, apply_step
from delegation_lab.data.items import SplitError
from delegation_lab.data.params import ArithParams, DataParams
from delegation_lab.data.sources import DataError

SMALL = dict(ability_size=30, train_size=60, test_size=40)


def test_arith_has_varied_templates_and_exact_programs():
    assert len(TEMPLATES) >= 20 and len({t.setting for t in TEMPLATES}) == len(TEMPLATES)
    items = arith.generate(ArithParams(), 400, seed=3)
    for item in items:
        steps = item.steps()
        assert steps[0]["op"] == "start" and len(steps) - 1 == item.difficulty
        value = steps[0]["value"]
        for step in steps[1:]:
            value = apply_step(step["op"], value, step["arg"])
            assert value == step["result"] and value >= 0 and float(value).is_integer()
        assert item.gold == str(int(value))
    assert {i.difficulty for i in items} == set(range(1, 9))
    assert len({i.domain for i in items}) >= 20
    assert len({i.question for i in items}) == len(items)


def test_arith_is_deterministic_and_prefix_stable():
    a = arith.generate(ArithParams(), 50, seed=7)
    b = arith.generate(ArithParams(), 80, seed=7)
    assert [i.model_dump() for i in a] == [i.model_dump() for i in b[:50]]
    assert arith.generate(ArithParams(), 5, seed=8)[0].question != a[0].question


def test_arith_balanced_difficulty_and_weights():
    items = arith.generate(ArithParams(min_steps=2, max_steps=5), 400, seed=0)
    counts = {d: sum(i.difficulty == d for i in items) for d in range(2, 6)}
    assert counts == {2: 100, 3: 100, 4: 100, 5: 100}
    heavy = arith.generate(ArithParams(min_steps=1, max_steps=2, step_weights=[0.0, 1.0]), 50, seed=0)
    assert {i.difficulty for i in heavy} == {2}
    with pytest.raises(ValueError, match="step_weights"):
        ArithParams(min_steps=1, max_steps=3, step_weights=[1.0])


def test_build_items_default_sizes_and_disjoint_splits():
    items = build_items(DataParams())
    by_split = {s: [i for i in items if i.split == s] for s in ("ability", "train", "test")}
    assert {s: len(v) for s, v in by_split.items()} == {"ability": 1000, "train": 6473, "test": 1319}
    ids = [i.item_id for i in items]
    assert len(set(ids)) == len(ids)


def write_jsonl(path: Path, rows: list, broken_line: int | None = None) -> Path:
    lines = [json.dumps(r) for r in rows]
    if broken_line is not None:
        lines[broken_line - 1] = lines[broken_line - 1][:-3]
    path.write_text("\n".join(lines) + "\n")
    return path


def gsm_rows(n: int) -> list[dict]:
    return [
        {"question": f"Tom has {k} apples and buys 2 more. How many?", "answer": f"{k}+2=<<{k}+2={k + 2}>>{k + 2}\n#### {k + 2}"}
        for k in range(n)
    ]


def test_gsm8k_loader_on_local_files(tmp_path: Path):
    write_jsonl(tmp_path / "train.jsonl", gsm_rows(100))
    write_jsonl(tmp_path / "test.jsonl", gsm_rows(20))
    params = DataParams(dataset="gsm8k", gsm8k={"path": str(tmp_path)}, **SMALL | {"test_size": None})
    items = build_items(params)
    test = [i for i in items if i.split == "test"]
    assert len(test) == 20 and all(i.difficulty == 1 and i.gold == str(int(i.question.split()[2]) + 2) for i in test)


def test_malformed_json_line_names_file_and_line(tmp_path: Path):
    write_jsonl(tmp_path / "train.jsonl", gsm_rows(10), broken_line=4)
    write_jsonl(tmp_path / "test.jsonl", gsm_rows(5))
    with pytest.raises(DataError, match=r"train\.jsonl: line 4: malformed JSON"):
        build_items(DataParams(dataset="gsm8k", gsm8k={"path": str(tmp_path)}, **SMALL))


def test_missing_field_and_bad_gold_are_named(tmp_path: Path):
    rows = gsm_rows(10)
    del rows[6]["answer"]
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "test.jsonl", gsm_rows(5))
    with pytest.raises(DataError, match=r"line 7: missing field 'answer'"):
        build_items(DataParams(dataset="gsm8k", gsm8k={"path": str(tmp_path)}, **SMALL))
    rows = gsm_rows(10)
    rows[2]["answer"] = "no final answer here"
    write_jsonl(tmp_path / "train.jsonl", rows)
    with pytest.raises(DataError, match=r"line 3: .*####"):
        build_items(DataParams(dataset="gsm8k", gsm8k={"path": str(tmp_path)}, **SMALL))


def test_impossible_split_sizes_fail_with_sizes(tmp_path: Path):
    write_jsonl(tmp_path / "train.jsonl", gsm_rows(50))
    write_jsonl(tmp_path / "test.jsonl", gsm_rows(5))
    with pytest.raises(SplitError, match=r"ability_size=30 \+ train_size=60 = 90 exceeds the 50"):
        build_items(DataParams(dataset="gsm8k", gsm8k={"path": str(tmp_path)}, **SMALL | {"test_size": None}))
    with pytest.raises(SplitError, match=r"test_size=40 but the source has 5"):
        build_items(DataParams(dataset="gsm8k", gsm8k={"path": str(tmp_path)}, ability_size=10, train_size=10, test_size=40))


def test_generic_jsonl_table_with_fixed_splits(tmp_path: Path):
    rows = [{"q": f"What is {k} + {k}?", "a": 2 * k, "level": k % 3 + 1, "part": ["ability", "train", "test"][k % 3]} for k in range(30)]
    path = write_jsonl(tmp_path / "custom.jsonl", rows)
    params = DataParams(
        dataset="jsonl",
        table={"path": str(path), "fields": {"question": "q", "gold": "a", "difficulty": "level", "split": "part"}},
    )
    items = build_items(params)
    assert len(items) == 30 and {i.split for i in items} == {"ability", "train", "test"}
    assert items[5].gold == "10" and items[5].difficulty == 3
    rows[3]["part"] = "validation"
    write_jsonl(path, rows)
    with pytest.raises(DataError, match="line 4: split 'validation'"):
        build_items(params)
    rows = [row | {"part": "train" if row["part"] == "test" else row["part"]} for row in rows if row["part"] != "validation"]
    write_jsonl(path, rows)
    with pytest.raises(SplitError, match=r"custom\.jsonl \(column 'part'\): split 'test' would be empty \(sizes: ability 9, train 20, test 0\)"):
        build_items(params)


def test_table_row_without_gold_fails_unless_allowed_and_lists_are_json(tmp_path: Path):
    rows = [{"q": f"Q{k}?", "a": k, "opts": None} for k in range(30)]
    del rows[4]["a"]
    rows[7]["a"] = None
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    table = {"path": str(path), "fields": {"question": "q", "gold": "a"}}
    with pytest.raises(DataError, match=r"t\.jsonl: line 5: no gold in field 'a'.*data\.allow_missing_gold"):
        build_items(DataParams(dataset="jsonl", table=table, ability_size=10, train_size=10, test_size=10))
    items = build_items(DataParams(dataset="jsonl", table=table, allow_missing_gold=True, ability_size=10, train_size=10, test_size=10))
    assert sum(i.gold is None for i in items) == 2
    assert DataParams.model_fields["allow_missing_gold"].description  # documented (docs/params.md)
    # list values become JSON text, not Python's repr; choices must be a list
    rows = [{"q": ["part one", "part two"], "a": ["x", 1], "c": [["A"], {"k": "v"}]} for _ in range(30)]
    path = write_jsonl(tmp_path / "lists.jsonl", rows)
    fields = {"question": "q", "gold": "a", "choices": "c"}
    items = build_items(DataParams(dataset="jsonl", table={"path": str(path), "fields": fields},
                                   ability_size=10, train_size=10, test_size=10))
    assert items[0].question == '["part one", "part two"]' and items[0].gold == '["x", 1]'
    assert items[0].choices == ['["A"]', '{"k": "v"}']
    write_jsonl(path, [{"q": "Q?", "a": "A", "c": "ABCD"}] * 30)
    with pytest.raises(DataError, match=r"lists\.jsonl: line 1: field 'c' is str, expected a list"):
        build_items(DataParams(dataset="jsonl", table={"path": str(path), "fields": fields}, **SMALL))


def test_corrupt_or_empty_parquet_table_names_the_file(tmp_path: Path):
    import polars as pl

    table = {"path": str(tmp_path / "t.parquet"), "fields": {"question": "q", "gold": "a"}}
    params = DataParams(dataset="parquet", table=table, ability_size=1, train_size=1, test_size=1)
    for content in [b"", b"PAR1 this is not parquet", b"PAR1" + bytes(100) + b"PAR1"]:
        (tmp_path / "t.parquet").write_bytes(content)
        with pytest.raises(DataError, match=r"t\.parquet: not a readable Parquet file"):
            build_items(params)
    pl.DataFrame({"q": [], "a": []}, schema={"q": pl.String, "a": pl.String}).write_parquet(tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"t\.parquet: no rows"):
        build_items(params)
    (tmp_path / "t.parquet").unlink()
    (tmp_path / "t.parquet").mkdir()
    with pytest.raises(DataError, match=r"t\.parquet: file not found"):
        build_items(params)


def test_dataset_sizes_beyond_the_source_fail_naming_the_key(tmp_path: Path):
    from delegation_lab.params.root import ConfigError, parse_params

    with pytest.raises(ValueError, match=r"data\.test_size=1000000000: arith generates at most 1,000,000 items"):
        DataParams(test_size=1_000_000_000)
    with pytest.raises(ConfigError, match=r"data\.ability_size=900000"):
        parse_params({"data": {"ability_size": 900_000, "train_size": 200_000}})
    DataParams(dataset="jsonl", test_size=1_000_000_000)  # a file's rows are counted when it is read:
    path = write_jsonl(tmp_path / "t.jsonl", [{"q": f"Q{k}?", "a": k} for k in range(30)])
    table = {"path": str(path), "fields": {"question": "q", "gold": "a"}}
    with pytest.raises(SplitError, match=r"30 items cannot give data\.test_size=1000000000"):
        build_items(DataParams(dataset="jsonl", table=table, ability_size=1, train_size=1, test_size=1_000_000_000))


def test_empty_split_is_an_error():
    with pytest.raises(SplitError, match="train_size"):
        build_items(DataParams(train_size=None))


def test_gsm8k_official_files(shared_data: Path):
    params = DataParams(dataset="gsm8k", gsm8k={"path": str(shared_data / "gsm8k")})
    items = build_items(params)
    counts = {s: sum(i.split == s for i in items) for s in ("ability", "train", "test")}
    assert counts == {"ability": 1000, "train": 6473, "test": 1319}
    first = next(i for i in items if i.source_id == "test-0")
    assert first.gold == "18" and first.difficulty == 2  # Janet's ducks: two calculator annotations


def test_aqua_rat_official_files(shared_data: Path):
    params = DataParams(dataset="aqua_rat", aqua_rat={"path": str(shared_data / "aqua_rat")}, ability_size=100, train_size=None, test_size=None)
    items = build_items(params)
    test = [i for i in items if i.split == "test"]
    assert len(test) == 254 and all(i.choices and len(i.choices) == 5 and i.gold in "ABCDE" for i in test)
