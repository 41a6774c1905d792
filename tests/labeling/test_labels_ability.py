"""Labels (programmatic, judge, imported) and ability maps on small hand-made tables."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from scipy.stats import binomtest

from delegation_lab.ability.maps import bucket_label, bucket_of, build_ability_map, lookup, wilson_interval
from delegation_lab.params.root import AbilityMapParams, LabelParams, load_params
from delegation_lab.data.items import Item, items_frame
from delegation_lab.labeling.labels import build_labels
from delegation_lab.solvers.base import Answer
from delegation_lab.solvers.cache import AnswerCache, answers_frame

from tests.conftest import REPO

PARAMS = load_params(REPO / "params.yaml")


def test_wilson_matches_scipy():
    for k, n in [(0, 10), (3, 10), (10, 10), (97, 100)]:
        lo, hi = wilson_interval(k, n, 0.95)
        ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert lo == pytest.approx(ref.low, abs=1e-9) and hi == pytest.approx(ref.high, abs=1e-9)
        assert lo <= k / n <= hi


def test_buckets():
    assert bucket_of([1, 2, 3, 4, 9], [1, 3, 5]).tolist() == [1, 1, 3, 3, 5]
    assert [bucket_label(b, [1, 3, 5]) for b in (1, 3, 5)] == ["1-2", "3-4", "5+"]
    assert bucket_of([4], None).tolist() == [4]


def test_ability_map_and_lookup():
    rows = pl.DataFrame({
        "solver": ["A"] * 4 + ["B"] * 4,
        "difficulty": [1, 1, 6, 7] * 2,
        "correct": [True, True, True, False, True, False, False, False],
        "cost_usd": [0.002, 0.002, 0.004, 0.004, 0.001, 0.001, 0.001, 0.001],
    })
    amap = build_ability_map(rows, AbilityMapParams(bucket_edges=[1, 5]))
    a_hard = amap.filter((pl.col("solver") == "A") & (pl.col("bucket") == 5)).row(0, named=True)
    assert (a_hard["n"], a_hard["successes"], a_hard["bucket_label"]) == (2, 1, "5+")
    assert a_hard["mean_cost_usd"] == pytest.approx(0.004)
    assert lookup(amap, "B", 2, [1, 5])["success_rate"] == 0.5
    assert lookup(amap, "A", 9, [1, 5])["mean_cost_usd"] == pytest.approx(0.004)
    with pytest.raises(ValueError, match="no labeled answers"):
        build_ability_map(rows.head(0), AbilityMapParams())


def make_answer(solver: str, item: Item, text: str, parsed: str | None, extra: dict | None = None) -> Answer:
    from datetime import UTC, datetime

    return Answer(solver=solver, item_id=item.item_id, request_hash="h", role="answer", backend="x", model="m",
                  answer_text=text, parsed_answer=parsed, tokens_in=1, tokens_out=1, cost_usd=0.0, latency_s=0.0,
                  error=None, created_at=datetime.now(UTC), extra=json.dumps(extra) if extra else None)


def test_labels_programmatic_judge_and_imported(tmp_path: Path):
    items = [Item(item_id=f"i{k}", split="test", question=f"q{k}", gold=str(k)) for k in range(40)]
    items.append(Item(item_id="nogold", split="test", question="q?", gold=None))
    answers = [make_answer("S", i, f"#### {k if k % 4 else k + 1}", str(k if k % 4 else k + 1)) for k, i in enumerate(items[:40])]
    answers.append(make_answer("S", items[40], "whatever", None, {"imported_correct": True}))
    frame, items_df = answers_frame(answers), items_frame(items)
    by_id = {i.item_id: i for i in items}

    raw = PARAMS.label.model_dump()
    raw["judge"]["sample_size"] = 40
    labels, report, run = build_labels(frame, items_df, by_id, LabelParams.model_validate(raw),
                                       AnswerCache(tmp_path / "j.parquet", tmp_path / "jj"), progress=False)
    assert labels.height == 41 and run.backend_calls == 40
    prog = labels.filter(pl.col("method") == "programmatic")
    assert prog["correct"].sum() == 30  # every 4th answer is off by one
    assert labels.filter(pl.col("item_id") == "nogold").row(0, named=True)["method"] == "imported"
    assert report["all"]["n"] == 40 and labels["judge_tokens"].drop_nulls().min() > 0

    raw["method"] = "judge"
    judged, _, second = build_labels(frame, items_df, by_id, LabelParams.model_validate(raw),
                                     AnswerCache(tmp_path / "j.parquet", tmp_path / "jj"), progress=False)
    assert second.backend_calls == 0  # judge answers come from its cache
    assert (judged.filter(pl.col("method") == "judge")["correct"] == judged.filter(pl.col("method") == "judge")["judge_verdict"]).all()
