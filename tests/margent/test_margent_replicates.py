"""MARGENT's Tables 1-3 rerun end to end over further simulator seeds (a Student-t interval per
figure) and under the sensitivity settings; the provenance block marks the rows the simulator
defaults decide."""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl

from delegation_lab.params.root import load_params
from delegation_lab.data.arith import generate
from delegation_lab.data.items import items_frame
from delegation_lab.data.params import ArithParams
from delegation_lab.margent import replicates, study
from delegation_lab.margent.params import rho_label
from delegation_lab.margent.sensitivity import LABELS, variants
from delegation_lab.margent.simulator import SimulatedTeam
from delegation_lab.reporting.paper import paper_vs_ours

from tests.conftest import REPO


def _small():
    params = load_params(REPO / "params.yaml")
    m = params.margent
    margent = m.model_copy(update={
        "collect": m.collect.model_copy(update={"n_items": 80, "dev_items": 40}),
        "manager": m.manager.model_copy(update={"epochs": 20, "seeds": 1}),
        "eval": m.eval.model_copy(update={"resamples": 50}),
    })
    params = params.model_copy(update={"margent": margent})
    frame = items_frame(generate(ArithParams(), 200, seed=3))
    train = frame.head(150).with_columns(pl.lit("train").alias("split"))
    test = frame.tail(50).with_columns(pl.lit("test").alias("split"))
    return params, study.sample_pools(train, test, margent.collect)


def test_seeds_give_intervals_and_settings_move_the_tables():
    params, pools = _small()
    own = replicates.run_once(params, params.margent, pools)
    assert set(own) == {"table1", "table2", "table3"} and set(own["table3"]) == {"rho", *replicates.TABLE3}
    seeds = replicates.over_seeds(params, pools, own, 2)
    assert seeds["seeds"] == [0, 1, 2]
    a0 = seeds["table1"]["A0"]
    assert a0["n"] == 3 and a0["low"] <= a0["mean"] <= a0["high"] and a0["per_seed"][0] == own["table1"]["A0"]
    assert len(set(a0["per_seed"])) > 1  # another simulator seed is another team
    assert len(seeds["table3"]["rho"]) == 3

    settings = replicates.under_settings(params, pools, own, variants(params.margent.simulator))
    assert list(settings) == list(LABELS) and settings["defaults"] is own
    assert settings["stronger_manager"]["table1"]["A0"] > own["table1"]["A0"]
    assert settings["independent_rescues"]["table1"]["A0"] == own["table1"]["A0"]  # rescues only: the root is the same


def test_the_provenance_block_names_real_rows():
    params, pools = _small()
    team = SimulatedTeam(params.margent.simulator, study.role_prices(params.margent, params))
    got = study.collect_all(team, pools, params.margent, "arith")
    with tempfile.TemporaryDirectory() as d:
        trained = study.train_managers(got.collection, got.views, params.margent, Path(d))
    grid = [(rho_label(r), s) for r, s in trained.grid]
    metrics = study.evaluate_all(got.collection, got.trees, trained.result.policy, grid, params.margent).metrics
    rows = {r["metric"]: r for r in paper_vs_ours(metrics, "metrics/margent.json")}
    assert rows["ablation.blank.correction"]["provenance"] == "setting"
    assert rows["table1.gain_at_1"]["provenance"] == "calibrated" and rows["eval.gain_pp"]["provenance"] == "computed"
