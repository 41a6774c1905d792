"""One accuracy everywhere (`labeling.accuracy`): `dlab import --json`, metrics/replay_accuracy.json and the
label stage's metrics/solve.json count the same answers the same way; an empty or missing reply is a
wrong answer, in the denominator and in `no_reply`; an item the cache lacks is left out of
replay_accuracy's `accuracy` only."""

from __future__ import annotations

import json

import polars as pl
import yaml
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.labeling.labels import replay_accuracy

from tests.conftest import REPO
from tests.replay.test_replay_zeroeval import QUESTIONS, reply, zeroeval_record
from tests.solvers.test_solve_stage import stage_in


def held(index: int) -> str:
    return json.dumps({"replay_source_index": str(index)})


def test_accuracy_counts_every_item_the_cache_holds_and_lists_only_replayed_solvers():
    joined = pl.DataFrame({
        "solver": ["r"] * 5 + ["s"] * 2,
        "model": ["m"] * 5 + ["sim"] * 2,
        "correct": [True, False, False, True, False, True, False],
        "imported": [None] * 7,
        "answer_text": ["4", "  ", None, "5", None, "1", "2"],
        "error": [None, None, "replay cache c has no response", None, "no answer in replay cache c", None, None],
        "extra": [held(0), held(1), held(2), held(3), None, None, None],
    }, schema_overrides={"imported": pl.Boolean})
    out = replay_accuracy(joined, {"r": "replay", "s": "simulated"})
    assert list(out["solvers"]) == ["r"]
    r = out["solvers"]["r"]
    # the blank reply and the row with no reply are wrong and counted; the question the cache lacks is not
    assert (r["n_items"], r["no_reply"], r["no_answer_in_cache"], r["model"]) == (4, 2, 1, "m")
    assert r["accuracy"] == 0.5 and r["accuracy_every_item"] == 0.4
    assert r["accuracy_ci"][0] < 0.5 < r["accuracy_ci"][1]
    assert replay_accuracy(joined, {"s": "simulated"})["note"] == "no replayed solvers"


O1_REPLIES = [reply("r", "18"), "", None, reply("r", "541")]  # right, empty, missing (`output: [null]`), wrong


def write_cache(root) -> None:
    folder = root / "result_dirs" / "gsm"
    folder.mkdir(parents=True)
    replies = {"gpt": [reply("r", g.strip("# ")) for _, g in QUESTIONS], "terse": O1_REPLIES}
    for model, texts in replies.items():
        records = [zeroeval_record(i, model, text) for i, text in enumerate(texts)]
        (folder / f"{model}.json").write_text(json.dumps(records), encoding="utf-8")


def test_import_report_and_label_stage_count_empty_replies_alike(tmp_path, capsys, monkeypatch):
    root = tmp_path / "p"
    root.mkdir()
    write_cache(root)
    monkeypatch.chdir(root)  # the cache's path as a project's params name it, relative to its folder
    result = CliRunner().invoke(app, ["import", "result_dirs/gsm", "--format", "zeroeval", "--items-dir", "none",
                                      "--json", "import.json"])
    assert result.exit_code == 0, result.output
    imported = json.loads((root / "import.json").read_text())["models"]["terse"]
    assert (imported["n_items"], imported["accuracy"], imported["no_reply"], imported["unlabelled"]) == (4, 0.25, 2, 0)
    assert "accuracy 25.0% over 4 labelled question(s), as the label stage counts it" in result.output
    assert "2 repl(y/ies) missing or empty, with no label of the cache's: wrong, and counted" in result.output

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    # train_size null: the rest of the 4 items (1), which the fold counts' preflight does not size
    raw["data"].update(dataset="replay", ability_size=1, train_size=None, test_size=2,
                       replay={"path": "result_dirs/gsm", "format": "zeroeval"})
    raw["solvers"] = {m: {"backend": "replay", "model": m, "price": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0,
                                                                     "source": "test"},
                          "replay": {"path": f"result_dirs/gsm/{m}.json", "format": "zeroeval", "source_model": m}}
                      for m in ("gpt", "terse")}
    raw["label"]["judge"]["sample_size"] = 0
    raw["portfolio"]["router"] = None
    raw["tracking"]["enabled"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    for stage, argv in (("prepare", []), ("solve", ["--solver", "gpt"]), ("solve", ["--solver", "terse"]), ("label", [])):
        assert stage_in(root, stage, argv) == 0, capsys.readouterr()
    replayed = json.loads((root / "metrics" / "replay_accuracy.json").read_text())["solvers"]["terse"]
    solve = json.loads((root / "metrics" / "solve.json").read_text())["terse"]
    assert (replayed["n_items"], replayed["no_reply"], replayed["no_answer_in_cache"]) == (4, 2, 0)
    assert replayed["accuracy"] == solve["accuracy"] == imported["accuracy"]
