"""experiments/routellm_gsm8k: the committed real-answers pipeline runs from what the repository
ships (no ../shared), its items are GSM8K's with GSM8K's difficulty, its prices name their source,
the reference numbers hold over all 1319 cached items, and its committed frontier shows the
baselines and every study that ran."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.params.root import load_params
from delegation_lab.data import build_items
from delegation_lab.data.sources import parse_gsm8k_gold
from delegation_lab.solvers import build_solver

from tests.conftest import REPO

EXPERIMENT = REPO / "experiments" / "routellm_gsm8k"


@pytest.fixture(scope="module")
def params(monkeypatch_module):
    monkeypatch_module.chdir(EXPERIMENT)  # every path in its params.yaml is relative to its folder
    return load_params("params.yaml")


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_the_shipped_data_carries_licences_and_sources():
    src = EXPERIMENT / "data_src"
    for folder in ("routellm_gsm8k", "gsm8k"):
        assert (src / folder / "LICENSE").read_text().strip()
        source = (src / folder / "SOURCE.md").read_text()
        assert "https://github.com/" in source and "sha256" in source
    assert "Apache License" in (src / "routellm_gsm8k" / "LICENSE").read_text()
    assert "MIT License" in (src / "gsm8k" / "LICENSE").read_text()


def test_the_pipeline_is_the_repository_dag():
    """The experiment is its params and data: its dvc.yaml is a link to the root's, whose stage scripts
    it finds through `project.repo`."""
    link = EXPERIMENT / "dvc.yaml"
    assert link.is_symlink() and link.resolve() == (REPO / "dvc.yaml").resolve()
    raw = yaml.safe_load((EXPERIMENT / "params.yaml").read_text())
    assert raw["project"]["repo"] == "../.." and (EXPERIMENT / raw["project"]["repo"] / "stages").is_dir()
    # the studies that do not apply to replayed answers are switched off, not cut out of the DAG
    off = {k for k, v in raw.items() if isinstance(v, dict) and v.get("enabled") is False and k != "tracking"}
    assert off == {"history_game", "credit", "margent"}


def test_items_are_gsm8k_test_questions_with_gsm8k_difficulty(params):
    items = build_items(params.data)
    assert len(items) == 1319 and all(i.gold is not None for i in items)  # every question matched GSM8K
    assert [sum(i.split == s for i in items) for s in ("ability", "train", "test")] == [300, 400, 619]
    rows = [json.loads(line) for line in (EXPERIMENT / "data_src/gsm8k/test.jsonl").read_text().splitlines()]
    golds = {r["question"].strip(): parse_gsm8k_gold(r["answer"]) for r in rows}
    assert sum(golds.get(i.question.strip()) == i.gold for i in items) >= 1300
    assert {i.difficulty for i in items} == set(range(1, 9))


def test_prices_name_their_public_source(params):
    for name, solver in params.solvers.items():
        assert solver.price.source and "pricing" in solver.price.source and not solver.price.is_zero, name


def test_reference_numbers_over_all_1319_items(params):
    items = [i.model_copy(update={"split": "all"}) for i in build_items(params.data)]
    correct = {}
    for name, solver_params in params.solvers.items():
        answers = build_solver(name, solver_params).solve(items)
        assert not [a for a in answers if a.error]
        correct[name] = [json.loads(a.extra)["imported_correct"] for a in answers]
        assert json.loads(answers[0].extra)["price_source"] == solver_params.price.source
    n = len(items)
    assert round(sum(correct["gpt4"]) / n, 3) == 0.857
    assert round(sum(correct["mixtral"]) / n, 3) == 0.638
    assert round(sum(g or m for g, m in zip(correct["gpt4"], correct["mixtral"], strict=True)) / n, 3) == 0.929


def test_the_committed_frontier_shows_baselines_and_studies():
    frontier = json.loads((EXPERIMENT / "metrics" / "frontier.json").read_text())
    assert frontier["dataset"] == "replay" and frontier["split"] == "test" and frontier["n_items"] == 619
    methods = frontier["methods"]
    assert {"always-gpt4", "always-mixtral", "oracle"} <= set(methods)
    assert methods["always-mixtral"]["best_accuracy"] < methods["always-gpt4"]["best_accuracy"] < frontier["oracle"]["accuracy"]
    ran = {s for s, v in frontier["studies"].items() if v.get("ran")}
    assert ran == {"coordinator", "market", "redref", "routers"}
    assert all("enabled is false" in v["skipped"] for s, v in frontier["studies"].items() if s not in ran)
    for study in ran:
        assert any(k.startswith(f"{study}/") for k in methods), study
    verifier = frontier["verifier"]["name"]
    assert frontier["verifier"]["deployable"] and verifier == "agreement(gpt4,mixtral)"
    compared = {name for name, v in frontier["verifiers"].items() if v.get("compare_name")}
    assert {frontier["verifiers"][n]["compare_name"] for n in compared} == {"simulated-judge", "learned"}
    for key, method in methods.items():  # the studies under the main verifier, the baselines also under each compared one
        assert method["verifier"] in ({verifier, "oracle"} | (compared if "/" not in key else set())), key
        assert method["accuracy_ci"][0] <= method["best_accuracy"] <= method["accuracy_ci"][1], key
    points = pl.read_csv(EXPERIMENT / "plots" / "frontier" / "frontier.csv")
    assert {"always-gpt4", "always-mixtral", "oracle"} <= set(points["method"])
    assert (EXPERIMENT / "dvc.lock").exists()
