"""A replayed solver's missing answers get advice that fits: the cache, the model, the items and what
can be done (re-import, leave the questions out, drop the solver), never `--retry-errors` or
`data.dataset replay`, which read the same cache again; a live backend's errors still get
`--retry-errors`."""

from __future__ import annotations

import importlib.util

import polars as pl
import yaml

from delegation_lab.solvers.params import ReplayParams, SolverParams

from tests.conftest import REPO
from tests.replay.test_replay import MIX, ROUTELLM_ROWS, write_routellm_csv
from tests.solvers.test_solve_stage import stage_in

RETRY = ("--retry-errors", "data.dataset replay")


def label_stage():
    spec = importlib.util.spec_from_file_location("stage_label_advice", REPO / "stages" / "label.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_replay_solve_with_no_answer_in_its_cache_says_so(tmp_path, capsys):
    """The arithmetic items are in no RouteLLM cache: every row is an error, and the stage says why."""
    root = tmp_path / "p"
    root.mkdir()
    write_routellm_csv(root / "cache.csv", ROUTELLM_ROWS)
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["data"].update(ability_size=2, train_size=2, test_size=2)
    raw["portfolio"].update(router_folds=2, cv_folds=2)
    raw["tracking"]["enabled"] = False
    raw["solvers"]["R"] = {"backend": "replay", "model": MIX,
                           "price": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0, "source": "test"},
                           "replay": {"path": "cache.csv", "format": "routellm_csv", "source_model": MIX}}
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    assert stage_in(root, "prepare", []) == 0
    assert stage_in(root, "solve", ["--solver", "R"]) == 1
    err = capsys.readouterr().err
    assert f"replay cache cache.csv has no answer of '{MIX}' for 6 item(s); they count as wrong" in err
    assert "re-import a cache that answers them" in err and "drop solver R" in err
    assert not any(r in err for r in RETRY)


def test_the_label_stage_names_the_cache_and_the_items_a_replayed_solver_lacks():
    joined = pl.DataFrame({"solver": ["R", "R", "R", "S"], "item_id": ["i1", "i2", "i3", "i4"],
                           "error": [None, "no answer", "no answer", "HTTP 500"]})
    replayed = SolverParams.model_validate({
        "backend": "replay", "model": "m", "price": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0},
        "replay": ReplayParams(path="c.csv", source_model="m").model_dump()})
    advice = label_stage().error_advice("R", replayed, joined)
    assert advice == ("R: replay cache c.csv has no answer of 'm' for 2 item(s) (e.g. item i2, i3); they count as "
                      "wrong (rerunning reads the same cache): re-import a cache that answers them, leave those "
                      "questions out of the dataset, or drop solver R")
    live = SolverParams.model_validate({"backend": "simulated", "model": "s", "simulated": {},
                                        "price": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0}})
    assert label_stage().error_advice("S", live, joined) == (
        "1 answers of S are backend errors and count as wrong; rerun `python stages/solve.py --solver S --retry-errors`")
