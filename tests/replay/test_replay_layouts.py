"""Cache layouts as the field publishes them, each on fixtures written in that exact layout:
RouteLLM's correctness-only per-subject CSVs (a folder), LLMRouterBench's per-record JSON tree,
RouterArena's cached_results/<model>.jsonl, a generic long table; folders and globs, domains,
provenance, GSM8K difficulty, domain-keyed ability maps, and explicit replay prices."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from delegation_lab.ability.maps import build_ability_map
from delegation_lab.cli import app
from delegation_lab.params.root import AbilityMapParams, parse_params
from delegation_lab.data.items import Item, make_item_id
from delegation_lab.data.params import ReplayDatasetParams
from delegation_lab.data.replay import load_replay_items
from delegation_lab.params.model import ConfigError
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.params import LongTableFields, Price, ReplayParams, SolverParams
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.solvers.replay.cache import file_sha256, load_cache, read_cache
from delegation_lab.solvers.replay.records import ReplayError

MIX = "mistralai/Mixtral-8x7B-Instruct-v0.1"
GPT = "gpt-4-1106-preview"
PRICE = Price(input_usd_per_mtok=0.6, output_usd_per_mtok=0.6, source="fixture price list")


def item(question: str, source_id: str = "0") -> Item:
    return Item(item_id=make_item_id("t", source_id + question), split="test", question=question, gold=None,
                domain="x", source="t", source_id=source_id)


def solver(path: Path | str, fmt: str, model: str, **replay) -> Solver:
    params = SolverParams(backend="replay", model=model, price=PRICE,
                          replay=ReplayParams(path=str(path), format=fmt, source_model=model, **replay))
    return Solver("R", params, ReplayBackend(params.replay, params.price))


# ------------------------------------------------------ RouteLLM: correctness-only, one CSV per subject


MMLU = {  # subject -> (prompt, Mixtral correct, GPT-4 correct); prompts as RouteLLM writes them
    "mmlu_anatomy": [
        ("A lesion of the facial nerve will cause\nA. paralysis.\nB. loss of taste.\nAnswer:", True, True),
        ('A "dished face" profile is often associated with\nA. a mandible.\nB. a maxilla.\nAnswer:', False, True),
        ("Which bone is the longest?\nA. femur\nB. tibia\nAnswer:", True, False),
    ],
    "mmlu_astronomy": [
        ("What is the closest star?\nA. the Sun\nB. Sirius\nAnswer:", True, True),
        ("Why is Mars red?\nA. iron oxide\nB. copper\nAnswer:", False, False),
        # the same question as in anatomy: counted as a duplicate (first file's row kept)
        ("Which bone is the longest?\nA. femur\nB. tibia\nAnswer:", False, False),
    ],
}


def write_mmlu_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for subject, rows in MMLU.items():
        with (folder / f"{subject}.csv").open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["prompt", MIX, GPT])
            for prompt, mix, gpt in rows:
                w.writerow([prompt, mix, gpt])
    (folder / "README.md").write_text("not a cache file")  # other files in the folder are not read
    return folder


def test_routellm_correctness_only_folder(tmp_path):
    folder = write_mmlu_folder(tmp_path / "responses")
    df = read_cache(folder, "routellm_csv")
    assert df.height == 12 and set(df["model"]) == {MIX, GPT}
    assert set(df["domain"]) == {"mmlu_anatomy", "mmlu_astronomy"}  # the file's stem
    assert (df["response"] == "").all()  # labels only: empty answers, never error rows
    mix = df.filter(pl.col("model") == MIX)
    assert mix["correct"].to_list() == [True, False, True, True, False, False]
    assert mix["prompt"][1] == MMLU["mmlu_anatomy"][1][0]  # quotes and newlines kept
    assert set(df["source_file"]) == {str(folder / "mmlu_anatomy.csv"), str(folder / "mmlu_astronomy.csv")}
    assert df.filter(pl.col("domain") == "mmlu_anatomy")["source_sha256"][0] == file_sha256(folder / "mmlu_anatomy.csv")
    assert mix["source_index"].n_unique() == 6  # indexes restart per file, kept unique across files
    cache = load_cache(folder, "routellm_csv")
    assert cache.index(MIX).duplicates == 1 and len(cache.index(MIX).rows) == 5

    answers = solver(folder, "routellm_csv", GPT).solve([item(MMLU["mmlu_astronomy"][0][0])])
    a = json.loads(answers[0].extra)
    assert answers[0].error is None and answers[0].answer_text == "" and a["imported_correct"] is True
    assert a["replay_source_file"] == str(folder / "mmlu_astronomy.csv") and a["replay_source_model"] == GPT
    assert a["replay_source_sha256"] == file_sha256(folder / "mmlu_astronomy.csv")
    assert a["price_source"] == "fixture price list"


def test_dlab_import_on_a_folder_lists_accuracy_over_distinct_questions(tmp_path):
    folder = write_mmlu_folder(tmp_path / "responses")
    out = CliRunner().invoke(app, ["import", str(folder), "--format", "routellm_csv", "--items-dir", str(tmp_path / "none")])
    assert out.exit_code == 0, out.output
    assert "2 file(s)" in out.output and "domains (2): mmlu_anatomy 3, mmlu_astronomy 3" in out.output
    # 5 distinct questions each; Mixtral right on 3 (the duplicate's first row: right), GPT-4 on 3
    assert f"{MIX}: 6 rows, 5 distinct questions, 1 duplicate(s) (first kept), imported accuracy 60.0% (5 labelled" in out.output
    assert f"{GPT}: 6 rows, 5 distinct questions, 1 duplicate(s) (first kept), imported accuracy 60.0%" in out.output
    assert "input_usd_per_mtok: TODO" in out.output


def test_glob_reads_only_the_matching_files(tmp_path):
    folder = write_mmlu_folder(tmp_path / "responses")
    df = read_cache(f"{folder}/mmlu_ast*.csv", "routellm_csv")
    assert set(df["domain"]) == {"mmlu_astronomy"} and df.height == 6
    with pytest.raises(ReplayError, match=r"no routellm_csv files"):
        read_cache(f"{folder}/nothing*.csv", "routellm_csv")
    with pytest.raises(ReplayError, match=r"empty.*holds no routellm_csv files|holds no routellm_csv files"):
        (tmp_path / "empty").mkdir()
        read_cache(tmp_path / "empty", "routellm_csv")


# -------------------------------------------- LLMRouterBench: results/bench/<dataset>/<split>/<model>/<ts>.json


def llmrb_file(records: list[dict]) -> str:
    return json.dumps({"performance": 0.5, "time_taken": 1.0, "prompt_tokens": 10, "completion_tokens": 5, "cost": 0.1,
                       "counts": len(records), "records": records}, indent=2)


def rec(i: int, q: str, pred: str, score: float) -> dict:
    return {"index": i, "origin_query": q, "prompt": f"Question: {q}\nAnswer:", "prediction": pred, "ground_truth": "4",
            "score": score, "prompt_tokens": 15, "completion_tokens": 5, "cost": 0.0001, "raw_output": f"so {pred}"}


def write_llmrb_tree(root: Path) -> Path:
    bench = root / "results" / "bench"
    files = {
        "gsm8k/test/qwen3-8b/20250101_120000.json": [rec(1, "What is 2+2?", "5", 0.0), rec(2, "What is 3+3?", "6", 1.0)],
        "gsm8k/test/qwen3-8b/20250301_090000.json": [rec(1, "What is 2+2?", "4", 1.0)],  # newer run: kept first
        "gsm8k/test/deepseek-v3/20250101_120000.json": [rec(1, "What is 2+2?", "4", 1.0), rec(2, "What is 3+3?", "7", 0.0)],
        "math500/test/qwen3-8b/20250101_120000.json": [rec(1, "Solve x+1=2.", "1", 1.0)],
    }
    for rel, records in files.items():
        (bench / rel).parent.mkdir(parents=True, exist_ok=True)
        (bench / rel).write_text(llmrb_file(records))
    return bench


def test_llmrouterbench_tree_takes_dataset_and_model_from_the_path(tmp_path):
    bench = write_llmrb_tree(tmp_path)
    cache = load_cache(bench, "llmrouterbench_json")
    df = cache.frame
    assert set(df["model"]) == {"qwen3-8b", "deepseek-v3"}  # the model folder, not the timestamp
    assert set(df["domain"]) == {"gsm8k", "math500"} and set(df["source_split"]) == {"test"}
    qwen = cache.index("qwen3-8b")
    assert qwen.duplicates == 1 and qwen.rows["what is 2+2?"]["response"] == "4"  # the newest run wins
    assert qwen.rows["what is 2+2?"]["source_file"].endswith("20250301_090000.json")
    assert (qwen.rows["what is 2+2?"]["tokens_in"], qwen.rows["what is 2+2?"]["cost_usd"]) == (15, 0.0001)
    # one dataset folder of the tree works too, and so does a single file inside the tree
    sub = read_cache(bench / "gsm8k", "llmrouterbench_json")
    assert set(sub["domain"]) == {"gsm8k"} and set(sub["model"]) == {"qwen3-8b", "deepseek-v3"}
    one = read_cache(bench / "math500/test/qwen3-8b/20250101_120000.json", "llmrouterbench_json")
    assert one["model"].to_list() == ["qwen3-8b"] and one["domain"].to_list() == ["math500"]


def test_llmrouterbench_malformed_record_names_file_and_record(tmp_path):
    bench = write_llmrb_tree(tmp_path)
    bad = bench / "gsm8k/test/qwen3-8b/20250401_000000.json"
    bad.write_text(llmrb_file([rec(1, "q", "p", 1.0), {"index": 2, "origin_query": "q2", "prediction": "p"}]))
    with pytest.raises(ReplayError, match=r"20250401_000000\.json: record 1: missing field 'score'"):
        read_cache(bench, "llmrouterbench_json")


# ------------------------------------------------------------------ RouterArena: cached_results/<model>.jsonl


def arena(gi: str, q: str, answer: str, score: float | None, cost: float = 0.0, success: bool = True) -> dict:
    return {
        "global_index": gi, "question": q, "llm_selected": "gpt-4o-mini", "generated_answer": answer,
        "token_usage": {"input_tokens": 20, "output_tokens": 8, "total_tokens": 28},
        "success": success, "provider": "openai", "error": None if success else "timeout",
        "batch_size": None, "batch_number": None, "batch_index": None, "processing_mode": "individual",
        "evaluation_result": None if score is None else {
            "extracted_answer": answer, "ground_truth": "B", "score": score, "metric": "mcq_accuracy",
            "inference_cost": cost},
    }


def write_arena(root: Path) -> Path:
    folder = root / "cached_results"
    folder.mkdir(parents=True)
    rows = [arena("MMLU_0", "Pick B. A) x B) y", "B", 1.0, cost=0.00002), arena("GSM8K_12", "What is 1+1?", "3", 0.0),
            arena("GSM8K_13", "What is 2+1?", "", None, success=False), arena("MMLU_1", "Unscored?", "A", None)]
    (folder / "gpt-4o-mini.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (folder / "claude-3-haiku-20240307.jsonl").write_text(json.dumps(arena("MMLU_0", "Pick B. A) x B) y", "A", 0.0)) + "\n")
    return folder


def test_routerarena_cached_results(tmp_path):
    folder = write_arena(tmp_path)
    df = read_cache(folder, "routerarena_jsonl")
    assert set(df["model"]) == {"gpt-4o-mini", "claude-3-haiku-20240307"}  # the file stem
    mini = df.filter(pl.col("model") == "gpt-4o-mini")
    assert mini["domain"].to_list() == ["MMLU", "GSM8K", "GSM8K", "MMLU"]  # the global index's dataset prefix
    assert mini["correct"].to_list() == [True, False, None, None]
    assert mini["response"].to_list() == ["B", "3", None, "A"]  # a failed call replays as an error row
    assert mini["tokens_in"].to_list() == [20] * 4
    assert mini["cost_usd"].to_list() == [0.00002, None, None, None]  # RouterArena's $0 default is not a cost
    ans = solver(folder, "routerarena_jsonl", "gpt-4o-mini").solve([item("What is 1+1?"), item("What is 2+1?")])
    assert ans[0].error is None and ans[0].cost_usd > 0 and json.loads(ans[0].extra)["imported_correct"] is False
    assert ans[1].error is not None


def test_routerarena_malformed_line_names_file_and_line(tmp_path):
    folder = write_arena(tmp_path)
    path = folder / "gpt-4o-mini.jsonl"
    path.write_text(path.read_text() + "\n{not json\n")
    with pytest.raises(ReplayError, match=r"gpt-4o-mini\.jsonl: line 6: malformed JSON"):
        read_cache(folder, "routerarena_jsonl")
    path.write_text(json.dumps({"global_index": "X_1", "question": "q"}) + "\n")
    with pytest.raises(ReplayError, match=r"gpt-4o-mini\.jsonl: line 1: missing field 'generated_answer'"):
        read_cache(path, "routerarena_jsonl")


# --------------------------------------------------------------------- a generic long table (any format)


LONG = [
    {"qid": "a", "prompt": "What is 1+1?", "llm": "small", "is_correct": "1", "out": "2", "subject": "arith", "usd": 0.001},
    {"qid": "a", "prompt": "What is 1+1?", "llm": "big", "is_correct": "1", "out": "2", "subject": "arith", "usd": 0.01},
    {"qid": "b", "prompt": "Capital of France?", "llm": "small", "is_correct": "0", "out": "Lyon", "subject": "geo", "usd": 0.001},
    {"qid": "b", "prompt": "Capital of France?", "llm": "big", "is_correct": "1", "out": "Paris", "subject": "geo", "usd": 0.01},
]
FIELDS = LongTableFields(question="prompt", model="llm", correct="is_correct", response="out", id="qid",
                         domain="subject", cost_usd="usd")


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_long_table_in_every_file_format(tmp_path, suffix):
    path = tmp_path / f"matrix{suffix}"
    frame = pl.DataFrame(LONG)
    if suffix == ".csv":
        frame.write_csv(path)
    elif suffix == ".parquet":
        frame.write_parquet(path)
    else:
        path.write_text("\n".join(json.dumps(r) for r in LONG) + "\n")
    df = read_cache(path, "long_table", FIELDS)
    assert df["model"].to_list() == ["small", "big", "small", "big"]
    assert df["correct"].to_list() == [True, True, False, True]
    assert df["domain"].to_list() == ["arith", "arith", "geo", "geo"]
    assert df["source_index"].to_list() == ["a", "a", "b", "b"]
    assert df["cost_usd"].to_list() == [0.001, 0.01, 0.001, 0.01] and df["tokens_in"].is_null().all()
    ans = solver(path, "long_table", "big", fields=FIELDS).solve([item("capital of france?")])
    assert ans[0].answer_text == "Paris" and ans[0].cost_usd == 0.01
    if suffix == ".csv":  # dlab import maps the columns and prints entries that carry the mapping
        out = CliRunner().invoke(app, ["import", str(path), "--format", "long_table", "--items-dir", str(tmp_path / "no"),
                                       "--field", "question=prompt", "--field", "model=llm", "--field", "correct=is_correct",
                                       "--field", "response=out", "--field", "id=qid", "--field", "domain=subject",
                                       "--field", "cost_usd=usd"])
        assert out.exit_code == 0, out.output
        assert "big: 2 rows, 2 distinct questions, 0 duplicate(s) (first kept), imported accuracy 100.0%" in out.output
        entries = yaml.safe_load(out.output[out.output.index("\nsolvers:") + 1:])["solvers"]
        assert entries["big"]["replay"]["fields"] == FIELDS.model_dump(include=FIELDS.model_fields_set)
        bad = CliRunner().invoke(app, ["import", str(path), "--format", "long_table", "--field", "prompt"])
        assert bad.exit_code == 2 and "KEY=COLUMN" in bad.output


def test_long_table_scores_defaults_and_errors(tmp_path):
    path = tmp_path / "sprout.csv"
    pl.DataFrame({"question": ["q1", "q2"], "model": ["m", "m"], "score": ["0.9", "0.2"]}).write_csv(path)
    df = read_cache(path, "long_table")  # default column names; no response: labels only
    assert df["correct"].to_list() == [True, False] and df["score"].to_list() == [0.9, 0.2]
    assert df["response"].to_list() == ["", ""] and df["domain"].to_list() == ["replay", "replay"]
    with pytest.raises(ReplayError, match=r"sprout\.csv: the long table \(fields\.correct\) has no column 'ok'"):
        read_cache(path, "long_table", LongTableFields(correct="ok"))
    pl.DataFrame({"question": ["q1", "q2"], "model": ["m", "m"], "correct": ["yes", "perhaps"]}).write_csv(path)
    with pytest.raises(ReplayError, match=r"sprout\.csv: row 3, column 'correct'.*'perhaps'"):
        read_cache(path, "long_table")
    pl.DataFrame({"question": ["q1"], "model": ["m"]}).write_csv(path)
    with pytest.raises(ReplayError, match="neither a correctness column"):
        read_cache(path, "long_table")


# ----------------------------------------------------------- items: domains and GSM8K difficulty


def test_replay_items_take_domains_from_files_and_bucket_by_domain(tmp_path):
    folder = write_mmlu_folder(tmp_path / "responses")
    items = load_replay_items(ReplayDatasetParams(path=str(folder), format="routellm_csv"))
    assert len(items) == 5  # 6 questions, one repeated across the two subjects
    assert [i.domain for i in items] == ["mmlu_anatomy"] * 3 + ["mmlu_astronomy"] * 2
    assert [i.difficulty for i in items] == [1, 1, 1, 2, 2]  # domain buckets, by domain name
    assert len({i.item_id for i in items}) == 5


def write_gsm8k(folder: Path) -> Path:
    folder.mkdir(parents=True)
    rows = [{"question": "Ann has 2 apples and buys 3.  How many?", "answer": "2+3=<<2+3=5>>5\n#### 5"},
            {"question": "Bob has 10, gives 4, then doubles. How many?", "answer": "<<10-4=6>>6 <<6*2=12>>12\n#### 12"}]
    (folder / "train.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (folder / "test.jsonl").write_text(json.dumps(rows[1]) + "\n")
    return folder


def test_replay_items_matching_gsm8k_take_its_difficulty_and_gold(tmp_path):
    gsm8k = write_gsm8k(tmp_path / "gsm8k")
    path = tmp_path / "c.csv"
    pl.DataFrame({"prompt": ["ann has 2 apples and buys 3. how many?", "Bob has 10, gives 4, then doubles. How many?",
                             "Not a GSM8K question"], "m": ["True", "False", "True"]}).write_csv(path)
    items = load_replay_items(ReplayDatasetParams(path=str(path), format="routellm_csv", gsm8k_path=str(gsm8k)))
    assert [(i.difficulty, i.gold) for i in items] == [(1, "5"), (2, "12"), (1, None)]


def test_ability_map_keyed_by_domain():
    labeled = pl.DataFrame({
        "solver": ["A"] * 4 + ["B"] * 4, "difficulty": [1, 5, 1, 5] * 2, "domain": ["law", "math", "math", "law"] * 2,
        "correct": [True, False, True, True, False, False, True, False], "cost_usd": [1.0] * 8,
    })
    table = build_ability_map(labeled, AbilityMapParams(bucket_by="domain"))
    a = table.filter(pl.col("solver") == "A")
    assert a["bucket_label"].to_list() == ["law", "math"] and a["bucket"].to_list() == [1, 2]
    assert a["success_rate"].to_list() == [1.0, 0.5]
    by_difficulty = build_ability_map(labeled, AbilityMapParams())
    assert by_difficulty.filter(pl.col("solver") == "A")["bucket_label"].to_list() == ["1", "5"]


# ------------------------------------------------------------------------------- explicit prices


def test_a_replay_solver_needs_an_explicit_price(tmp_path, project_params):
    raw = project_params
    base = {"backend": "replay", "model": "m", "replay": {"path": "c.csv", "format": "routellm_csv", "source_model": "m"}}
    raw["solvers"]["R"] = dict(base)  # no price at all
    with pytest.raises(ConfigError, match=r"solvers\.R\.price: required key is missing"):
        parse_params(raw)
    raw["solvers"]["R"] = {**base, "price": {"input_usd_per_mtok": 0, "output_usd_per_mtok": 0}}
    with pytest.raises(ConfigError, match=r"solvers\.R: .*price\.free: true"):
        parse_params(raw)
    raw["solvers"]["R"] = {**base, "price": {"input_usd_per_mtok": "TODO", "output_usd_per_mtok": "TODO", "source": "TODO"}}
    with pytest.raises(ConfigError, match=r"solvers\.R\.price: .*TODO placeholder"):
        parse_params(raw)
    raw["solvers"]["R"] = {**base, "price": {"input_usd_per_mtok": 0, "output_usd_per_mtok": 0, "free": True}}
    assert parse_params(raw).solvers["R"].price.free

    path = tmp_path / "params.yaml"
    raw["solvers"]["R"] = dict(base)
    path.write_text(yaml.safe_dump(raw))
    out = CliRunner().invoke(app, ["params", "check", "--path", str(path)])
    assert out.exit_code == 2 and "solvers.R.price" in out.output


@pytest.fixture
def project_params() -> dict:
    return yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())


def test_the_coordinator_reads_a_domain_keyed_ability_map(tmp_path):
    from delegation_lab.coordinator.data import load_coordinator_data
    from delegation_lab.pipeline.schemas import SPLITS
    from delegation_lab.pipeline.tables import read_items, read_labeled_answers, write_parquet_atomic

    from tests.fake_cache import write_fake_cache

    layout = write_fake_cache(tmp_path, with_map=False)
    for split in SPLITS:  # two subjects, whatever the difficulty: the map's buckets must follow them
        items = read_items(layout, (split,))
        subject = pl.when(pl.col("item_id").str.slice(-1).cast(pl.Int64) % 2 == 0).then(pl.lit("law")).otherwise(pl.lit("math"))
        write_parquet_atomic(items.with_columns(subject.alias("domain")), layout.items(split))
    params = AbilityMapParams(bucket_by="domain")
    ability = read_labeled_answers(layout).filter(pl.col("split") == "ability")
    table = build_ability_map(ability, params, ["law", "math"])
    write_parquet_atomic(table, layout.ability_map)
    data = load_coordinator_data(layout, ["A", "B", "C"], True, [1, 3], bucket_by="domain")
    domains = dict(read_items(layout).select("item_id", "domain").iter_rows())
    rate_of = {(r["solver"], r["bucket_label"]): r["success_rate"] for r in table.iter_rows(named=True)}
    for k, item_id in enumerate(data.test.item_ids[:50]):
        for j, solver in enumerate(["A", "B", "C"]):
            assert data.test.map_rate[k, j] == pytest.approx(rate_of[(solver, domains[item_id])])
