"""The "how to add one" recipes of docs/registries.md run as written, on toy implementations, so the
page cannot drift from the code: a toy router (its module, its params section, its register line)
through the routers study on a small matrix, and a toy replay format (its module and register
line) importing a small file with `dlab import`."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.solvers.replay import FORMATS
from delegation_lab.solvers.replay.cache import load_cache
from delegation_lab.solvers.replay.records import ReplayError

from tests.conftest import REPO
from tests.pipeline.test_pipeline_study import recipe

DOC = "registries.md"

# The router recipe runs in a fresh interpreter: a register line in routers/__init__.py runs before
# routers/params.py builds `RouterName` from the registry, and only a fresh process can register
# the toy at that point (this one imported the params long ago).
ROUTER_RUN = """
import json, sys, tempfile, types
from pathlib import Path

from pydantic import Field, create_model

from delegation_lab.routers import ROUTERS

recipes = json.loads(sys.argv[1])
module = types.ModuleType("delegation_lab.routers.toy")  # step 1: src/delegation_lab/routers/toy.py
sys.modules[module.__name__] = module
exec(compile(recipes["toy-router"], "docs/registries.md (toy-router)", "exec"), module.__dict__)
exec(compile(recipes["toy-router-register"], "docs/registries.md (toy-router-register)", "exec"), {"ROUTERS": ROUTERS})  # step 3

import delegation_lab.routers.artifact as artifact
import delegation_lab.routers.params as router_params
from delegation_lab.params.model import ParamsModel

knobs = {"ParamsModel": ParamsModel, "Field": Field}  # step 2: the section model, and its field on RoutersParams
exec(compile(recipes["toy-router-params"], "docs/registries.md (toy-router-params)", "exec"), knobs)
RoutersParams = create_model("RoutersParams", __base__=router_params.RoutersParams, toy=(knobs["ToyParams"], knobs["ToyParams"]()))
artifact.RoutersParams = RoutersParams  # the class as step 2 leaves it

from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.routers import LEARNED
from delegation_lab.routers.report import study_metrics
from delegation_lab.routers.study import outcome_frame, run_study, summary_rows, trajectory_frame
from tests.routers.test_routers import JUDGE, synthetic

params = RoutersParams.model_validate({"routers": ["toy", "best_single"], "seeds": 2})
data = synthetic()
run = run_study(data, params, JUDGE)
toy = run.fitted["toy"]
point = next(p for p in run.points if p.router == "toy" and p.split == "test")
saved = artifact.save_router(toy, Path(tempfile.mkdtemp()) / "toy.npz", "synthetic", params)
loaded, header = artifact.load_router(saved)
test = data.rows("test")
chosen = loaded.route(data.inputs.take(test), loaded.knobs[point.operating_point])[0]
metrics = study_metrics(run, IntervalParams(resamples=100), {"kind": "judge"}, {"name": "synthetic"})
print(json.dumps({
    "names": list(ROUTERS.names()), "learned": list(LEARNED), "name": toy.name, "knobs": toy.knobs,
    "summaries": summary_rows(run, "synthetic", JUDGE.name), "outcomes": outcome_frame(run, "synthetic", JUDGE.name).height,
    "extra": json.loads(trajectory_frame(run, point)["extra"][0]), "n_test": int(test.size),
    "reloaded": [loaded.name, loaded.fingerprint() == toy.fingerprint(), header["params"]],
    "route_matches_evaluate": bool((chosen == point.outcome.chosen).all()), "metrics": sorted(metrics["routers"]),
}))
"""


def test_the_add_a_router_recipe_runs_through_the_routers_study() -> None:
    recipes = {name: recipe(DOC, name) for name in ("toy-router", "toy-router-params", "toy-router-register")}
    proc = subprocess.run([sys.executable, "-c", ROUTER_RUN, json.dumps(recipes)], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["names"][-1] == "toy" and "toy" in out["learned"] and out["name"] == "toy"
    assert list(out["knobs"]) == ["lambda=0", "lambda=0.5", "lambda=2"]
    rows = pl.DataFrame(out["summaries"])
    assert set(rows["method"]) == {"toy", "best_single"}
    toy = rows.filter(pl.col("method") == "toy")
    assert toy.height == 3 * 2 and (toy["n_items"] == out["n_test"]).all()
    assert out["outcomes"] == rows.height * out["n_test"]
    by_op = {r["operating_point"]: r for r in toy.filter(pl.col("seed") == 0).iter_rows(named=True)}
    best = rows.filter((pl.col("method") == "best_single") & (pl.col("seed") == 0)).row(0, named=True)
    # lambda = 0: the most accurate solver on train, as best_single; a large lambda pays less
    assert by_op["lambda=0"]["accuracy"] == best["accuracy"] and by_op["lambda=0"]["cost_per_item_usd"] == best["cost_per_item_usd"]
    assert by_op["lambda=2"]["cost_per_item_usd"] < by_op["lambda=0"]["cost_per_item_usd"]
    assert out["extra"]["features"] == "none" and out["extra"]["operating_point"] == "lambda=0"
    assert out["reloaded"] == ["toy", True, {"sweep": [0.0, 0.5, 2.0]}]
    assert out["route_matches_evaluate"] and out["metrics"] == ["best_single", "toy"]


@pytest.fixture
def toy_format(monkeypatch: pytest.MonkeyPatch) -> str:
    """The format recipe followed: its module as `delegation_lab.solvers.replay.toy_jsonl`, its
    register line run on `FORMATS` (both undone after the test)."""
    monkeypatch.setattr(FORMATS, "_targets", dict(FORMATS._targets))
    monkeypatch.setattr(FORMATS, "_loaded", dict(FORMATS._loaded))
    module = types.ModuleType("delegation_lab.solvers.replay.toy_jsonl")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(recipe(DOC, "toy-format"), "docs/registries.md (toy-format)", "exec"), module.__dict__)
    exec(compile(recipe(DOC, "toy-format-register"), "docs/registries.md (toy-format-register)", "exec"), {"FORMATS": FORMATS})
    return "toy_jsonl"


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


RECORDS = [
    {"qid": "q1", "question": "What is 2 + 2?", "model": "big", "reply": "4", "score": 1.0},
    {"qid": "q1", "question": "What is 2 + 2?", "model": "small", "reply": "5", "score": 0.0},
    {"qid": "q2", "question": "What is 3 times 3?", "model": "big", "reply": "9", "score": 0.9},
    {"qid": "q2", "question": "What is 3 times 3?", "model": "small", "reply": None, "score": None},
]


def test_the_add_a_replay_format_recipe_imports_a_file(toy_format: str, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cache.jsonl", RECORDS)
    assert toy_format in FORMATS.names()
    cache = load_cache(path, toy_format)
    frame = cache.frame.sort("model", "source_index")
    assert frame["model"].to_list() == ["big", "big", "small", "small"]
    assert frame["correct"].to_list() == [True, True, False, None]
    assert frame["response"].to_list() == ["4", "9", "5", None] and frame["score"].to_list() == [1.0, 0.9, 0.0, None]
    assert set(frame["source_file"]) == {str(path)}

    report = tmp_path / "report.json"
    out = CliRunner().invoke(app, ["import", str(path), "--format", toy_format, "--items-dir", str(tmp_path / "none"),
                                   "--json", str(report)])
    assert out.exit_code == 0, out.output
    summary = json.loads(report.read_text())
    assert "big" in out.output and "small" in out.output and summary

    bad = write_jsonl(tmp_path / "bad.jsonl", [RECORDS[0], {"qid": "q3", "question": "?", "model": "big", "reply": "1", "score": 3}])
    out = CliRunner().invoke(app, ["import", str(bad), "--format", toy_format, "--items-dir", str(tmp_path / "none")])
    assert out.exit_code == 1 and f"{bad}: line 2, field 'score': score 3 is outside [0, 1]" in out.output
    missing = write_jsonl(tmp_path / "missing.jsonl", [{"qid": "q1", "question": "?", "model": "big"}])
    with pytest.raises(ReplayError, match=r"missing.jsonl: line 1: missing field 'reply' \(fields: \['model', 'qid', 'question'\]\)"):
        load_cache(missing, toy_format)
