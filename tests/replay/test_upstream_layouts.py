"""Every layout each supported upstream publishes imports as published: one test per layout, on a
few records of it (tests/replay/fixtures/upstream, with their repository, path and commit in its SOURCE.md),
and `data.split: as_published` keeps the split a cache publishes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
import yaml

from delegation_lab.data.params import DataParams, ReplayDatasetParams
from delegation_lab.data.replay import ReplayDataError, published_split_problems, replay_items
from delegation_lab.solvers.replay.cache import read_cache
from delegation_lab.solvers.replay.import_report import build_import
from delegation_lab.solvers.replay.records import PUBLISHED_SPLIT, ReplayError

from tests.conftest import BIN, REPO, run

UPSTREAM = Path(__file__).parent / "fixtures" / "upstream"


def by_model(df: pl.DataFrame, model: str) -> pl.DataFrame:
    return df.filter(pl.col("model") == model)


# --- RouterArena ---------------------------------------------------------------------------------

def test_routerarena_cached_results():
    df = read_cache(UPSTREAM / "routerarena" / "cached_results" / "claude-3-haiku-20240307.jsonl", "routerarena_jsonl")
    assert df.height == 4 and set(df["model"]) == {"claude-3-haiku-20240307"}
    first = df.row(0, named=True)
    assert first["source_index"] == "AIME_112" and first["domain"] == "AIME"
    assert first["correct"] is False and first["score"] == 0.0 and first["ground_truth"] == "610"
    assert (first["tokens_in"], first["tokens_out"]) == (349, 120) and first["cost_usd"] == pytest.approx(0.00023725)
    meteor = df.row(3, named=True)  # RouterArena's meteor_score: F x (1 - penalty), below 0 when the penalty passes 1
    assert meteor["source_index"] == "NarrativeQA_4102" and meteor["score"] == pytest.approx(-0.0330188679245283)
    assert meteor["correct"] is False


def test_routerarena_router_predictions():
    path = UPSTREAM / "routerarena" / "predictions" / "glm-4-air-router.json"
    df = read_cache(path, "routerarena_jsonl")
    assert df["model"].to_list() == ["glm-4-air", "glm-4-air"] and set(df["router"]) == {"glm-4-air-router"}
    assert df["source_index"].to_list() == ["ArcMMLU_655", "ArcMMLU_420"] and set(df["domain"]) == {"ArcMMLU"}
    assert df["response"][0].startswith("\\boxed{A}") and df["correct"].to_list() == [None, None]  # `full`: no gold
    assert (df["tokens_in"][0], df["tokens_out"][0]) == (98, 55) and df["cost_usd"][0] == pytest.approx(2.0961e-05)


def test_routerarena_folder_reads_both_layouts_and_skips_configs(tmp_path):
    root = tmp_path / "RouterArena"
    shutil.copytree(UPSTREAM / "routerarena", root)
    (root / "router_inference" / "config").mkdir(parents=True)
    (root / "router_inference" / "config" / "your-router.json").write_text(
        json.dumps({"pipeline_params": {"router_name": "your-router", "models": ["gpt-4o-mini"]}}))
    (root / "model_cost").mkdir()
    (root / "model_cost" / "cost.json").write_text(json.dumps({"gpt-4o-mini": {"input_token_price_per_million": 0.15}}))
    df = read_cache(root, "routerarena_jsonl")
    assert set(df["model"]) == {"claude-3-haiku-20240307", "glm-4-air"} and df.height == 6


def test_routerarena_prediction_without_model_names_the_field(tmp_path):
    entries = json.loads((UPSTREAM / "routerarena" / "predictions" / "glm-4-air-router.json").read_text())
    del entries[1]["prediction"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(entries))
    with pytest.raises(ReplayError, match=r"r\.json: record 1: missing field 'prediction'.*--format long_table --field"):
        read_cache(path, "routerarena_jsonl")


def test_llmrouterbench_record_it_cannot_map_names_the_field_and_the_option(tmp_path):
    result = json.loads(next((UPSTREAM / "llmrouterbench").rglob("*.json")).read_text())
    result["records"][0]["question"] = result["records"][0].pop("origin_query")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result))
    with pytest.raises(ReplayError, match=r"record 0: missing field 'origin_query'.*data\.replay\.fields"):
        read_cache(path, "llmrouterbench_json")


# --- RouteLLM ------------------------------------------------------------------------------------

def test_routellm_gsm8k_responses_csv():
    df = read_cache(UPSTREAM / "routellm" / "gsm8k" / "gsm8k_responses.csv", "routellm_csv")
    assert set(df["model"]) == {"mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"} and df.height == 4
    assert df["prompt"][0].startswith("Janet\u2019s ducks lay 16 eggs") and df["response"].is_not_null().all()
    assert df["correct"].is_not_null().all()


def test_routellm_mmlu_correctness_only_csv():
    df = read_cache(UPSTREAM / "routellm" / "mmlu" / "mmlu_anatomy.csv", "routellm_csv")
    assert df.height == 6 and (df["response"] == "").all() and df["correct"].is_not_null().all()
    assert df["prompt"][0].startswith("A lesion causing compression of the facial nerve")


def test_routellm_mt_bench_judgements():
    path = UPSTREAM / "routellm" / "mt_bench" / "judgements.jsonl"
    df = read_cache(path, "routellm_mt_bench")
    assert df.height == 2 and set(df["source_index"]) == {"141"}
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for model in ("gpt-4-1106-preview", "mistralai/Mixtral-8x7B-Instruct-v0.1"):
        row = by_model(df, model).row(0, named=True)
        ratings = [r["score"] for r in lines if r["model"] == model]
        assert row["mt_bench_score"] == pytest.approx(sum(ratings) / 2) and row["score"] == pytest.approx(sum(ratings) / 20)
        assert row["turns_rated"] == 2 and row["correct"] == (row["score"] >= 0.5)
        assert row["prompt"].startswith("In the field of quantum physics, what is superposition")
        assert "### User" not in row["response"] and row["response"]


def test_routellm_mt_bench_reference_answer_judgements():
    """gpt-4_single.jsonl grades RouteLLM's commercial-router answers with FastChat's math prompts,
    which quote a reference answer before the assistant's."""
    df = read_cache(UPSTREAM / "routellm" / "mt_bench" / "gpt-4_single.jsonl", "routellm_mt_bench")
    assert set(df["model"]) == {"martian", "unify"} and set(df["source_index"]) == {"102"}
    assert not any("Reference" in p or "Reference" in r for p, r in df.select("prompt", "response").iter_rows())


def test_routellm_mt_bench_answer_file_points_at_the_judgements(tmp_path):
    path = tmp_path / "unify.jsonl"
    path.write_text(json.dumps({"question_id": 81, "answer_id": "a", "model_id": "m", "choices": [{"index": 0, "turns": ["x"]}]}) + "\n")
    with pytest.raises(ReplayError, match=r"line 1: missing field 'model'.*carries no score.*gpt-4_single"):
        read_cache(path, "routellm_mt_bench")


# --- LLMRouter -----------------------------------------------------------------------------------

def test_llmrouter_scores_joined_to_query_files():
    df = read_cache(UPSTREAM / "llmrouter" / "data", "llmrouter")
    assert df["key"].n_unique() == 4 and df.height == 4 * 9
    assert set(df["domain"]) == {"agentverse-logicgrid"} and set(df[PUBLISHED_SPLIT]) == {"train", "test"}
    assert (df["response"] == "").all() and df["metric"].is_not_null().all()


def test_llmrouter_routing_data():
    df = read_cache(UPSTREAM / "llmrouter_routing", "llmrouter")
    assert df.height == 4 and set(df["model"]) == {"qwen2.5-7b-instruct", "llama-3.1-8b-instruct"}
    test = df.filter(pl.col(PUBLISHED_SPLIT) == "test")
    assert set(test["domain"]) == {"natural_qa"} and test["score"].to_list() == [0.4, 1.0]
    assert test["correct"].to_list() == [False, True]  # an F1 of 0.4 is below the 0.5 threshold
    train = df.filter(pl.col(PUBLISHED_SPLIT) == "train")
    assert train["tokens_in"].to_list() == [112, 112] and train["tokens_out"].to_list() == [31, 18]
    assert train["response"][0].endswith("The answer is 72.") and set(train["ground_truth"]) == {"72"}


def test_llmrouter_folder_holding_both_layouts_skips_query_files(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(UPSTREAM / "llmrouter" / "data", root)
    shutil.copytree(UPSTREAM / "llmrouter_routing", root / "example_data" / "routing_data")
    df = read_cache(root, "llmrouter")
    assert set(df["source_file"].map_elements(lambda f: Path(f).name, return_dtype=pl.String)) == {
        "test.json", "train.json", "default_routing_test_data.jsonl", "default_routing_train_data.jsonl"}


# --- LLMRouterBench ------------------------------------------------------------------------------

def test_llmrouterbench_result_file_in_its_tree():
    df = read_cache(UPSTREAM / "llmrouterbench" / "results" / "bench", "llmrouterbench_json")
    assert df["model"].to_list() == ["gpt-4o-mini", "gpt-4o-mini"] and set(df["domain"]) == {"math500"}
    assert set(df[PUBLISHED_SPLIT]) == {"test"} and df["correct"].to_list() == [True, None]  # score null: unscored
    assert df["tokens_in"].to_list() == [92, 88] and df["cost_usd"][0] == pytest.approx(0.0000504)


def test_llmrouterbench_result_file_alone_takes_its_own_fields(tmp_path):
    """Out of its tree a result object still names its model, dataset and split."""
    source = next((UPSTREAM / "llmrouterbench").rglob("*.json"))
    path = tmp_path / "run.json"
    shutil.copy(source, path)
    df = read_cache(path, "llmrouterbench_json")
    assert set(df["model"]) == {"gpt-4o-mini"} and set(df["domain"]) == {"math500"} and set(df[PUBLISHED_SPLIT]) == {"test"}


def test_llmrouterbench_demo_run_is_reported(tmp_path):
    result = json.loads(next((UPSTREAM / "llmrouterbench").rglob("*.json")).read_text())
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**result, "demo": True}))
    text = build_import(path, "llmrouterbench_json", tmp_path / "no-items").text
    assert "2 row(s) come from demo runs" in text


# --- RouterBench ---------------------------------------------------------------------------------

def routerbench_files(tmp_path: Path, name: str) -> dict[str, Path]:
    csv = UPSTREAM / "routerbench" / f"{name}.csv"
    pkl = tmp_path / f"{name}.pkl"
    frame = pd.read_csv(csv, index_col=0 if name == "routerbench_wide" else None)
    frame.to_pickle(pkl)
    return {"routerbench_csv": csv, "routerbench_pickle": pkl}


@pytest.mark.parametrize("fmt", ["routerbench_csv", "routerbench_pickle"])
def test_routerbench_wide_frame(tmp_path, fmt):
    path = routerbench_files(tmp_path, "routerbench_wide")[fmt]
    df = read_cache(path, fmt, trust_pickle=True)
    assert df.height == 6 and set(df["domain"]) == {"grade-school-math", "mmlu-anatomy"}
    gpt4 = by_model(df, "gpt-4-1106-preview")
    assert gpt4["correct"].to_list() == [True, True, None]  # no score for the anatomy question
    assert gpt4["prompt"][0] == "Janet has 3 apples and buys 2 more. How many apples does she have?"
    assert gpt4["response"][:2].to_list() == ["5", "40"] and gpt4["cost_usd"][1] == pytest.approx(0.00027)


@pytest.mark.parametrize("fmt", ["routerbench_csv", "routerbench_pickle"])
def test_routerbench_raw_long_frame(tmp_path, fmt):
    path = routerbench_files(tmp_path, "routerbench_raw")[fmt]
    df = read_cache(path, fmt, trust_pickle=True)
    assert df.height == 3 and df["correct"].to_list() == [True, True, True]
    assert df["source_index"].to_list() == ["grade-school-math.dev.1", "grade-school-math.dev.1", "mmlu-anatomy.val.3"]
    assert df["domain"].to_list() == ["grade-school-math", "grade-school-math", "mmlu-anatomy"]
    assert df["response"][2] == "A" and df["cost_usd"].is_null().all()


def test_routerbench_import_counts_unscored_rows_and_says_what_happens(tmp_path):
    """The issue: the report said "3162 labelled questions" and the label stage later refused "154
    answers get no label"; now the report counts them and says the label stage stops on them."""
    path = UPSTREAM / "routerbench" / "routerbench_wide.csv"
    result = build_import(path, "routerbench_csv", tmp_path / "no-items")
    assert "imported accuracy 100.0% (2 labelled questions)" in result.text
    assert "1 question(s) with no label (no gold, no correctness or score): the label stage cannot label them" in result.text
    gpt4 = result.summary["models"]["gpt-4-1106-preview"]
    assert (gpt4["unscored"], gpt4["unlabelled"]) == (1, 1)
    assert result.summary["models"]["gpt-3.5-turbo-1106"]["unscored"] == 0


# --- the published split -------------------------------------------------------------------------

def replay_data(path: Path, fmt: str, split: str, **sizes) -> DataParams:
    return DataParams(dataset="replay", split=split, replay=ReplayDatasetParams(path=str(path), format=fmt), **sizes)


def test_as_published_keeps_the_caches_train_and_test():
    params = replay_data(UPSTREAM / "llmrouter" / "data", "llmrouter", "as_published",
                         ability_size=1, train_size=1, test_size=None)
    items = replay_items(params)
    cache = read_cache(UPSTREAM / "llmrouter" / "data", "llmrouter").unique(subset="key", keep="first")
    published = dict(zip(cache["prompt"], cache[PUBLISHED_SPLIT], strict=True))
    assert sorted(i.split for i in items) == ["ability", "test", "test", "train"]
    for item in items:
        assert (published[item.question] == "test") == (item.split == "test")


def test_seeded_split_is_still_the_default():
    assert DataParams().split == "seeded"
    params = replay_data(UPSTREAM / "llmrouter" / "data", "llmrouter", "seeded", ability_size=1, train_size=1, test_size=2)
    assert sorted(i.split for i in replay_items(params)) == ["ability", "test", "test", "train"]


def test_as_published_refuses_a_cache_without_a_split_naming_the_file():
    path = UPSTREAM / "routerarena" / "cached_results" / "claude-3-haiku-20240307.jsonl"
    params = replay_data(path, "routerarena_jsonl", "as_published", ability_size=1, train_size=1, test_size=1)
    problems = published_split_problems(params)
    assert len(problems) == 1 and "claude-3-haiku-20240307.jsonl" in problems[0]
    assert "publishes no split" in problems[0] and "data.split: seeded" in problems[0]
    with pytest.raises(ReplayDataError, match="publishes no split"):
        replay_items(params)


def test_as_published_refuses_a_cache_with_a_test_split_only(tmp_path):
    params = replay_data(UPSTREAM / "llmrouterbench" / "results" / "bench", "llmrouterbench_json", "as_published",
                         ability_size=1, train_size=1, test_size=1)
    with pytest.raises(ReplayDataError, match=r"publishes no 'train' question \(0 train, 2 test\)"):
        replay_items(params)


def test_as_published_is_for_replayed_caches_only():
    with pytest.raises(ValueError, match="data.split: as_published keeps a replayed cache's own split"):
        DataParams(dataset="gsm8k", split="as_published")


def test_params_check_refuses_as_published_for_a_cache_without_a_split(tmp_path):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    cache = tmp_path / "claude.jsonl"
    shutil.copy(UPSTREAM / "routerarena" / "cached_results" / "claude-3-haiku-20240307.jsonl", cache)
    raw["data"].update({"dataset": "replay", "split": "as_published", "ability_size": 1, "train_size": 10, "test_size": 1,
                        "replay": {"path": str(cache), "format": "routerarena_jsonl"}})
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    proc = run([str(BIN / "dlab"), "params", "check", "--path", str(path)], cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "claude.jsonl" in proc.stderr and "publishes no split" in proc.stderr


def test_import_names_the_published_split(tmp_path):
    text = build_import(UPSTREAM / "llmrouter_routing", "llmrouter", tmp_path / "no-items").text
    assert "published split (each question's first row): test 1, train 1; `data.split: as_published` keeps it" in text
