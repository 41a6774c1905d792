"""The replay backend: cache readers for four formats, matching by normalised question, token and
cost handling, the import report, `dataset: replay`, and the whole pipeline on a replayed cache."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
import yaml

from delegation_lab.data import build_items
from delegation_lab.data.items import Item, items_frame, make_item_id
from delegation_lab.data.params import DataParams, ReplayDatasetParams
from delegation_lab.data.replay import ReplayDataError, load_replay_items
from delegation_lab.errors import InputError
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.cache import AnswerCache
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.solvers.pricing import cost_usd, estimate_tokens, messages_tokens
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.solvers.replay.cache import file_sha256, load_cache, normalise_question, read_cache
from delegation_lab.solvers.replay.import_report import import_report
from delegation_lab.solvers.replay.records import CACHE_COLUMNS, ReplayError

from tests.conftest import BIN, make_project, run

PRICE = Price(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0, source="test prices")
MIX = "mistralai/Mixtral-8x7B-Instruct-v0.1"
GPT = "gpt-4-1106-preview"


# --------------------------------------------------------------------------------- fixtures


def write_routellm_csv(path: Path, rows: list[dict]) -> Path:
    """rows: prompt, then per model (correct, response)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["prompt", MIX, GPT, f"{MIX}_response", f"{GPT}_response"])
        for r in rows:
            w.writerow([r["prompt"], r["mix_ok"], r["gpt_ok"], r["mix"], r["gpt"]])
    return path


ROUTELLM_ROWS = [
    {"prompt": "Janet\u2019s ducks lay 16 eggs.  How many\nare left?", "mix_ok": True, "gpt_ok": True,
     "mix": " She has 16 - 3 = 13.\n#### 13", "gpt": "So, 13 eggs, \"quoted\", remain.\nAnswer: 13"},
    {"prompt": "A robe takes 2 bolts, and half that much. How many?", "mix_ok": False, "gpt_ok": True,
     "mix": "It takes 2.5 bolts.\n#### 2.5", "gpt": "2 + 1 = 3 bolts."},
    {"prompt": "Tom has 5 apples, eats 2. How many left?", "mix_ok": True, "gpt_ok": False,
     "mix": "5 - 2 = 3\n#### 3", "gpt": "He has 4 left."},
    # the same question again, with other spacing and case: a duplicate (first row kept)
    {"prompt": "tom has 5 apples,   eats 2. how many left? ", "mix_ok": False, "gpt_ok": False,
     "mix": "#### 99", "gpt": "99"},
]


@pytest.fixture
def routellm_csv(tmp_path: Path) -> Path:
    return write_routellm_csv(tmp_path / "routellm.csv", ROUTELLM_ROWS)


def item(question: str, source_id: str = "0", gold: str | None = None) -> Item:
    return Item(item_id=make_item_id("t", source_id + question), split="test", question=question, gold=gold,
                domain="math", source="t", source_id=source_id)


def replay_solver(path: Path, fmt: str, model: str, price: Price = PRICE, name: str = "R") -> Solver:
    params = SolverParams(
        backend="replay", model=model, price=price,
        replay=ReplayParams(path=str(path), format=fmt, source_model=model, trust_pickle=fmt == "routerbench_pickle"),
    )
    return Solver(name, params, ReplayBackend(params.replay, params.price))


def extra(answer) -> dict:
    return json.loads(answer.extra) if answer.extra else {}


# ------------------------------------------------------------------------------ normalisation


def test_normalise_question_curly_quotes_whitespace_case_nfkc():
    assert normalise_question("Janet\u2019s \u201cducks\u201d\n lay\t16  eggs ") == "janet's \"ducks\" lay 16 eggs"
    assert normalise_question("\u2018A\u2019") == normalise_question("'a'") == "'a'"
    assert normalise_question("\uff11\uff12 apples \ufb01ve") == "12 apples five"  # full-width digits, ligature
    assert normalise_question("a\u00a0b") == "a b"  # no-break space
    assert normalise_question("Two words") != normalise_question("Two  other words")


# -------------------------------------------------------------------------------- the readers


def test_routellm_csv_reader_keeps_newlines_and_labels(routellm_csv):
    df = read_cache(routellm_csv, "routellm_csv")
    assert set(CACHE_COLUMNS) <= set(df.columns)
    assert df.height == 8 and set(df["model"]) == {MIX, GPT}
    mix = df.filter(pl.col("model") == MIX)
    assert mix["source_index"].to_list() == ["0", "1", "2", "3"]
    assert mix["response"][0] == " She has 16 - 3 = 13.\n#### 13"  # quoted newline kept by a real CSV parser
    assert mix["prompt"][0] == ROUTELLM_ROWS[0]["prompt"]
    assert mix["correct"].to_list() == [True, False, True, False]
    assert df.filter(pl.col("model") == GPT)["response"][0] == "So, 13 eggs, \"quoted\", remain.\nAnswer: 13"
    assert df["tokens_in"].is_null().all() and df["cost_usd"].is_null().all()


def write_routerbench_pickle(path: Path) -> Path:
    df = pd.DataFrame({
        "sample_id": ["gsm8k.0", "gsm8k.1", "mmlu.0"],
        "prompt": ["['What is 2 + 2?']", "What is 3 \u00d7 3?", "Capital of France?"],
        "eval_name": ["gsm8k", "gsm8k", "mmlu"],
        "oracle_model_to_route_to": ["a/small", "b", "b"],
        "a/small": [1.0, 0.0, 0.7],
        "a/small|model_response": ["4", "6", "Paris"],
        "a/small|total_cost": [0.0001, 0.0002, 0.0003],
        "b": [1, 1, 0],
        "b|model_response": ["four", "9", None],
        "b|total_cost": [0.01, 0.02, 0.03],
    })
    df.to_pickle(path)
    return path


def test_routerbench_pickle_reader(tmp_path):
    path = write_routerbench_pickle(tmp_path / "rb.pkl")
    df = read_cache(path, "routerbench_pickle", trust_pickle=True)
    assert df.height == 6 and set(df["model"]) == {"a/small", "b"}
    small = df.filter(pl.col("model") == "a/small")
    assert small["source_index"].to_list() == ["gsm8k.0", "gsm8k.1", "mmlu.0"]
    assert small["prompt"][0] == "What is 2 + 2?"  # "['...']" string form unwrapped
    assert small["correct"].to_list() == [True, False, True]  # float score >= 0.5
    assert small["score"].to_list() == [1.0, 0.0, 0.7]
    assert small["cost_usd"].to_list() == [0.0001, 0.0002, 0.0003]
    assert small["eval_name"].to_list() == ["gsm8k", "gsm8k", "mmlu"]
    assert df.filter(pl.col("model") == "b")["response"].to_list() == ["four", "9", None]


LLMRB_RECORDS = [
    {"index": 7, "origin_query": "What is 6 x 7?", "prediction": "42", "ground_truth": "42", "score": 1,
     "prompt_tokens": 11, "completion_tokens": 3, "cost": 0.005, "model": "qwen"},
    {"index": 8, "origin_query": "What is 5 + 5?", "prediction": "11", "ground_truth": "10", "score": 0.0,
     "prompt_tokens": None, "completion_tokens": None, "cost": None, "model": "qwen"},
]


def test_llmrouterbench_json_lines_and_list(tmp_path):
    lines = tmp_path / "lines.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in LLMRB_RECORDS) + "\n\n")
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps([{**{k: v for k, v in r.items() if k != "model"}, "model_name": "llama"}
                                  for r in LLMRB_RECORDS], indent=1))
    a = read_cache(lines, "llmrouterbench_json")
    b = read_cache(listed, "llmrouterbench_json")
    assert a["model"].to_list() == ["qwen", "qwen"] and b["model"].to_list() == ["llama", "llama"]
    for df in (a, b):
        assert df["source_index"].to_list() == ["7", "8"]
        assert df["response"].to_list() == ["42", "11"]
        assert df["correct"].to_list() == [True, False]
        assert df["tokens_in"].to_list() == [11, None] and df["tokens_out"].to_list() == [3, None]
        assert df["cost_usd"].to_list() == [0.005, None]
        assert df["ground_truth"].to_list() == ["42", "10"]
    stem = tmp_path / "deepseek-v3.json"
    stem.write_text(json.dumps([{k: v for k, v in r.items() if k != "model"} for r in LLMRB_RECORDS]))
    assert read_cache(stem, "llmrouterbench_json")["model"].unique().to_list() == ["deepseek-v3"]


def write_answers_parquet(path: Path) -> Path:
    pl.DataFrame({
        "solver": ["A", "A", "A", "B"],
        "item_id": ["i1", "i2", "i3", "i1"],
        "role": ["answer"] * 4,
        "model": ["sim-strong", "sim-strong", "sim-strong", "sim-weak"],
        "question": ["Q one?", "Q two?", "Q three?", "Q one?"],
        "answer_text": ["#### 1", "#### 2", None, "#### 5"],
        "tokens_in": [10, 20, 0, 30],
        "tokens_out": [5, 6, 0, 7],
        "cost_usd": [0.1, 0.2, 0.0, 0.3],
        "error": [None, None, "timeout", None],
        "extra": [json.dumps({"imported_correct": True}), None, None, json.dumps({"correct": False})],
        "imported_correct": [None, False, None, None],
    }).write_parquet(path)
    return path


def test_answers_parquet_reader(tmp_path):
    path = write_answers_parquet(tmp_path / "answers.parquet")
    df = read_cache(path, "parquet")
    strong = df.filter(pl.col("model") == "sim-strong")
    assert strong["correct"].to_list() == [True, False, None]  # extra JSON, then the column, error row none
    assert strong["response"].to_list() == ["#### 1", "#### 2", None]
    assert strong["tokens_in"].to_list() == [10, 20, None]
    assert df.filter(pl.col("model") == "sim-weak")["correct"].to_list() == [False]
    # a solver name selects rows too
    backend = ReplayBackend(ReplayParams(path=str(path), format="parquet", source_model="B"), PRICE)
    assert len(backend.cache().index("B").rows) == 1
    with pytest.raises(ReplayError, match="question"):
        pl.DataFrame({"model": ["x"], "answer_text": ["1"]}).write_parquet(tmp_path / "bare.parquet")
        read_cache(tmp_path / "bare.parquet", "parquet")


# -------------------------------------------------------------------------------- the backend


def test_replay_solver_matches_by_normalised_question_and_estimates_tokens(routellm_csv):
    solver = replay_solver(routellm_csv, "routellm_csv", MIX)
    questions = [
        "Janet's ducks lay 16 eggs. How many are left?",  # straight quote, single spaces
        "TOM HAS 5 APPLES, EATS 2. HOW MANY LEFT?",  # matches the first of the two duplicates
    ]
    answers = solver.solve([item(q, str(i)) for i, q in enumerate(questions)])
    a, b = answers
    assert a.error is None and a.answer_text == ROUTELLM_ROWS[0]["mix"] and a.parsed_answer == "13"
    assert extra(a) == {
        "imported_correct": True, "tokens_estimated": True, "replay_source_index": "0",
        # provenance of every imported answer
        "replay_source_file": str(routellm_csv), "replay_source_sha256": file_sha256(routellm_csv),
        "replay_source_model": MIX, "price_source": "test prices",
    }
    request = solver.request(item(questions[0], "0"))
    assert a.tokens_in == messages_tokens(request.messages) > 0
    assert a.tokens_out == estimate_tokens(ROUTELLM_ROWS[0]["mix"]) > 0
    assert a.cost_usd == pytest.approx(cost_usd(a.tokens_in, a.tokens_out, PRICE))  # no cost in the cache
    assert b.answer_text == "5 - 2 = 3\n#### 3" and extra(b)["imported_correct"] is True
    assert load_cache(routellm_csv, "routellm_csv").index(MIX).duplicates == 1


def test_cost_and_tokens_come_from_the_cache_when_present(tmp_path):
    path = tmp_path / "rb.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in LLMRB_RECORDS))
    solver = replay_solver(path, "llmrouterbench_json", "qwen", price=Price(input_usd_per_mtok=100.0,
                                                                             output_usd_per_mtok=100.0))
    known, unknown = solver.solve([item("What is 6 x 7?", "1"), item("what is 5 + 5?", "2")])
    assert (known.tokens_in, known.tokens_out, known.cost_usd) == (11, 3, 0.005)
    assert "tokens_estimated" not in extra(known) and extra(known)["imported_correct"] is True
    assert extra(unknown)["tokens_estimated"] is True and extra(unknown)["imported_correct"] is False
    assert unknown.cost_usd == pytest.approx(cost_usd(unknown.tokens_in, unknown.tokens_out, solver.params.price))

    rb = write_routerbench_pickle(tmp_path / "rb.pkl")
    ans = replay_solver(rb, "routerbench_pickle", "b").solve([item("what is 3 \u00d7 3?"), item("Capital of France?")])
    assert ans[0].cost_usd == 0.02 and ans[0].answer_text == "9" and extra(ans[0])["imported_correct"] is True
    assert ans[1].error is not None and "no response" in ans[1].error and ans[1].cost_usd == 0.0


def test_unmatched_requests_become_counted_error_rows(routellm_csv, tmp_path):
    solver = replay_solver(routellm_csv, "routellm_csv", GPT)
    items = [item("A robe takes 2 bolts, and half that much. How many?", "1"),
             item("A question the cache never saw", "2"), item("Nor this one", "3")]
    cache = AnswerCache(tmp_path / "answers" / "R.parquet", tmp_path / "journal")
    run = cache.fill(solver, [solver.request(i) for i in items], progress=False)
    assert run.backend_calls == 3 and run.errors == 2
    assert all("no answer in replay cache" in e and "routellm.csv" in e for e in run.error_examples)
    df = cache.read()
    assert df.height == 3 and df["error"].is_null().sum() == 1
    assert df.filter(pl.col("error").is_not_null())["answer_text"].is_null().all()
    assert df.filter(pl.col("error").is_not_null())["cost_usd"].to_list() == [0.0, 0.0]


def test_fingerprint_and_request_hash_change_with_file_content(routellm_csv):
    solver = replay_solver(routellm_csv, "routellm_csv", MIX)
    q = item(ROUTELLM_ROWS[1]["prompt"])
    before = solver.request(q).request_hash
    fp = solver.backend.fingerprint()
    assert set(fp) == {"format", "source_model", "sha256"} and fp["source_model"] == MIX
    assert solver.request(q).request_hash == before  # stable while the file is unchanged
    assert load_cache(routellm_csv, "routellm_csv") is load_cache(routellm_csv, "routellm_csv")  # read once
    first = load_cache(routellm_csv, "routellm_csv")

    changed = [dict(r) for r in ROUTELLM_ROWS]
    changed[1]["mix"] = "It takes 3 bolts.\n#### 3"
    write_routellm_csv(routellm_csv, changed)
    st = routellm_csv.stat()
    os.utime(routellm_csv, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert load_cache(routellm_csv, "routellm_csv") is not first
    assert solver.backend.fingerprint()["sha256"] != fp["sha256"]
    assert solver.request(q).request_hash != before
    assert solver.solve([q])[0].parsed_answer == "3"


# ------------------------------------------------------------------------------- bad input


def test_missing_columns_and_unknown_models_are_named(tmp_path, routellm_csv):
    no_prompt = tmp_path / "no_prompt.csv"
    no_prompt.write_text("question,m,m_response\nq,True,r\n")
    with pytest.raises(ReplayError) as e:
        read_cache(no_prompt, "routellm_csv")
    assert "no_prompt.csv" in str(e.value) and "'prompt'" in str(e.value) and "'question'" in str(e.value)

    no_model = tmp_path / "no_model.csv"
    no_model.write_text("prompt\nq\n")
    with pytest.raises(ReplayError, match=r"no_model\.csv.*no model.*_response"):
        read_cache(no_model, "routellm_csv")
    bad_label = tmp_path / "bad_label.csv"
    bad_label.write_text("prompt,m\nq,True\nr,maybe\n")  # correctness-only: a cell that is no label
    with pytest.raises(ReplayError, match=r"bad_label\.csv: row 3, column 'm'.*'maybe'"):
        read_cache(bad_label, "routellm_csv")

    pkl = tmp_path / "bad.pkl"
    pd.DataFrame({"sample_id": [1], "text": ["q"], "m": [1], "m|model_response": ["a"]}).to_pickle(pkl)
    with pytest.raises(ReplayError) as e:
        read_cache(pkl, "routerbench_pickle", trust_pickle=True)
    assert "bad.pkl" in str(e.value) and "'prompt'" in str(e.value) and "'text'" in str(e.value)

    js = tmp_path / "bad.json"
    js.write_text(json.dumps([{"origin_query": "q", "prediction": "p", "model": "m"}]))
    with pytest.raises(ReplayError) as e:
        read_cache(js, "llmrouterbench_json")
    assert "bad.json" in str(e.value) and "'score'" in str(e.value) and "'origin_query'" in str(e.value)

    solver = replay_solver(routellm_csv, "routellm_csv", "gpt-5")
    with pytest.raises(ReplayError) as e:
        solver.solve([item("q")])
    assert "routellm.csv" in str(e.value) and "'gpt-5'" in str(e.value) and MIX in str(e.value)

    with pytest.raises(InputError, match="not found"):
        read_cache(tmp_path / "absent.csv", "routellm_csv")


# ----------------------------------------------------------------------------- import report


def test_import_report_counts_matches_and_prints_a_valid_snippet(routellm_csv, tmp_path):
    items_dir = tmp_path / "items"
    items_dir.mkdir()
    ours = [item("Janet's ducks lay 16 eggs. How many are left?", "a"), item("Tom has 5 apples, eats 2. How many left?", "b"),
            item("A question only we have", "c")]
    frame = items_frame(ours)
    frame.head(2).with_columns(pl.lit("ability").alias("split")).write_parquet(items_dir / "ability.parquet")
    frame.tail(1).write_parquet(items_dir / "test.parquet")
    text = import_report(routellm_csv, "routellm_csv", items_dir)
    print(text)
    assert "matched: 2 of 3 distinct cache questions" in text
    assert "unmatched: 1 cache question(s)" in text
    assert 'e.g. "A robe takes 2 bolts' in text
    assert "1 duplicate(s)" in text
    assert "imported accuracy 66.7% (3 labelled questions)" in text  # Mixtral: True, False, True; duplicate skipped
    assert f"{MIX}: answers 2 of 3 items; 1 item(s) without an answer" in text
    assert "token counts missing" in text
    snippet = yaml.safe_load(text[text.index("\nsolvers:") + 1:])
    assert len(snippet["solvers"]) == 2
    for name, entry in snippet["solvers"].items():
        with pytest.raises(ValueError, match="TODO placeholder"):  # the price must be set before it validates
            SolverParams.model_validate(entry)
        params = SolverParams.model_validate({**entry, "price": {"input_usd_per_mtok": 0.6, "output_usd_per_mtok": 0.6,
                                                                 "source": "a price list"}})
        assert params.backend == "replay" and params.replay.path == str(routellm_csv)
        assert params.replay.source_model == params.model
    assert {e["model"] for e in snippet["solvers"].values()} == {MIX, GPT}
    assert "TODO" in text and "0.0" not in text  # no silent placeholder price

    no_items = import_report(routellm_csv, "routellm_csv", tmp_path / "nowhere")
    assert "matching skipped" in no_items and "solvers:" in no_items


def test_dlab_import_command(routellm_csv, tmp_path):
    from typer.testing import CliRunner

    from delegation_lab.cli import app

    ok = CliRunner().invoke(app, ["import", str(routellm_csv), "--format", "routellm_csv",
                                  "--items-dir", str(tmp_path / "none")])
    assert ok.exit_code == 0, ok.output
    assert "backend: replay" in ok.output
    bad = CliRunner().invoke(app, ["import", str(tmp_path / "absent.csv")])
    assert bad.exit_code == 1 and "absent.csv" in bad.output


# -------------------------------------------------------------------------- dataset: replay


def test_load_replay_items_one_per_distinct_prompt(routellm_csv):
    items = load_replay_items(ReplayDatasetParams(path=str(routellm_csv), format="routellm_csv"))
    assert len(items) == 3  # 4 rows, one duplicate
    assert [i.source_id for i in items] == ["0", "1", "2"]
    assert items[0].question == ROUTELLM_ROWS[0]["prompt"]
    assert all(i.gold is None and i.domain == "replay" and i.source == "routellm.csv" and i.difficulty == 1
               for i in items)
    assert items[1].item_id == make_item_id("replay:routellm.csv", "1")


def test_replay_dataset_difficulty_and_eval_name(tmp_path):
    rows = [{"prompt": f"Question {i}?", "mix_ok": i % 2 == 0, "gpt_ok": True, "mix": f"#### {i}", "gpt": str(i)}
            for i in range(6)]
    path = write_routellm_csv(tmp_path / "c.csv", rows)
    df = pl.read_csv(path).with_columns(pl.Series("level", ["1", "2", "3", "1", "2", "3"]))
    df.write_csv(path)
    items = load_replay_items(ReplayDatasetParams(path=str(path), format="routellm_csv", difficulty_column="level"))
    assert [i.difficulty for i in items] == [1, 2, 3, 1, 2, 3]
    with pytest.raises(ReplayDataError, match="'hardness'.*columns"):
        load_replay_items(ReplayDatasetParams(path=str(path), format="routellm_csv", difficulty_column="hardness"))
    df.with_columns(pl.Series("level", ["1", "2", "hard", "1", "2", "3"])).write_csv(path)
    with pytest.raises(ReplayDataError, match="'hard' is not an integer"):
        load_replay_items(ReplayDatasetParams(path=str(path), format="routellm_csv", difficulty_column="level"))

    rb = write_routerbench_pickle(tmp_path / "rb.pkl")
    gsm = load_replay_items(ReplayDatasetParams(path=str(rb), format="routerbench_pickle", eval_name="gsm8k", trust_pickle=True))
    assert [i.source_id for i in gsm] == ["gsm8k.0", "gsm8k.1"] and gsm[0].question == "What is 2 + 2?"
    with pytest.raises(ReplayDataError, match="eval names"):
        load_replay_items(ReplayDatasetParams(path=str(rb), format="routerbench_pickle", eval_name="hellaswag", trust_pickle=True))
    with pytest.raises(ReplayDataError, match="eval_name"):
        load_replay_items(ReplayDatasetParams(path=str(path), format="routellm_csv", eval_name="gsm8k"))


def test_build_items_replay_splits(tmp_path):
    rows = [{"prompt": f"Q{i}", "mix_ok": True, "gpt_ok": False, "mix": "1", "gpt": "2"} for i in range(20)]
    path = write_routellm_csv(tmp_path / "c.csv", rows)
    params = DataParams(dataset="replay", replay=ReplayDatasetParams(path=str(path)), ability_size=10,
                        train_size=4, test_size=6)
    items = build_items(params)
    assert [sum(i.split == s for i in items) for s in ("ability", "train", "test")] == [10, 4, 6]
    assert len({i.item_id for i in items}) == 20


# ------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_pipeline_on_a_replayed_cache_uses_imported_labels(tmp_path):
    project = make_project(tmp_path / "p")
    rows = [
        {"prompt": f"Sam has {i} marbles and finds {i % 7} more.  How many\u2019s that?",
         "mix_ok": (i * 7) % 10 < 6, "gpt_ok": (i * 3) % 10 < 9,
         "mix": f"{i} + {i % 7} = {i + i % 7}\n#### {i + i % 7}", "gpt": f"That makes {i + i % 7}."}
        for i in range(60)
    ]
    write_routellm_csv(project / "cache.csv", rows)
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["data"].update(dataset="replay", ability_size=30, train_size=10, test_size=20,
                       replay={"path": "cache.csv", "format": "routellm_csv"})
    raw["solvers"] = {
        name: {"backend": "replay", "model": model, "price": {"input_usd_per_mtok": 0.5, "output_usd_per_mtok": 1.5},
               "replay": {"path": "cache.csv", "format": "routellm_csv", "source_model": model}}
        for name, model in (("mix", MIX), ("gpt", GPT))
    }
    raw["tracking"] = {"enabled": False}
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    run([str(BIN / "dvc"), "repro", "ability_map"], project)

    labels = pl.read_parquet(project / "data" / "labels.parquet")
    assert labels.height == 120 and labels["method"].unique().to_list() == ["imported"]
    assert labels["judge_verdict"].is_null().all()  # no gold: nothing is judged
    items = pl.concat([pl.read_parquet(project / "data" / "items" / f"{s}.parquet") for s in ("ability", "train", "test")])
    assert items.height == 60 and items["gold"].is_null().all()
    expected_by_q = {normalise_question(r["prompt"]): r for r in rows}
    q_of = dict(zip(items["item_id"], items["question"], strict=True))
    for solver, flag in (("mix", "mix_ok"), ("gpt", "gpt_ok")):
        mine = labels.filter(pl.col("solver") == solver)
        for item_id, correct in zip(mine["item_id"], mine["correct"], strict=True):
            assert correct == expected_by_q[normalise_question(q_of[item_id])][flag]
        expected = sum(r[flag] for r in rows) / len(rows)
        solve = json.loads((project / "metrics" / "solve.json").read_text())
        assert solve[solver]["accuracy"] == pytest.approx(expected)
        assert solve[solver]["errors"] == 0 and solve[solver]["cost_usd"] > 0
    ability = json.loads((project / "metrics" / "ability_map.json").read_text())
    ability_items = set(pl.read_parquet(project / "data" / "items" / "ability.parquet")["question"])
    for solver, flag in (("mix", "mix_ok"), ("gpt", "gpt_ok")):
        expected = [r[flag] for r in rows if r["prompt"] in ability_items]
        assert len(expected) == 30
        assert ability[solver]["success_rate"] == pytest.approx(sum(expected) / 30, abs=1e-6)
