"""`dlab transfer`: routers fitted on one project and scored on another's test split, beside routers
fitted in domain, on tiny projects written straight to the data-contract files: identical projects
give identical fits, only the shared solvers are used, a source that teaches the wrong solver costs
accuracy, and missing outputs or mismatched embeddings are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.errors import InputError
from delegation_lab.evaluation import build_verifier
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.tables import read_items, write_parquet_atomic
from delegation_lab.routers.report import study_metrics
from delegation_lab.routers.study import load_routing_data, run_study
from delegation_lab.routers.transfer import direction_key, open_project, run_transfer, write_transfer

from tests.conftest import REPO
from tests.fake_cache import PROFILES, write_fake_cache

FAST_ROUTERS = {
    "seeds": 2, "mlp": {"epochs": 5}, "mf": {"epochs": 5}, "threshold": {"epochs": 5}, "learned_cascade": {"epochs": 5}, "irt": {"epochs": 5},
    "knn": {"k": 5, "search_dim": 4, "cells": 0}, "cluster": {"clusters": 4, "iterations": 5},
}


def write_project(root: Path, profiles: dict = PROFILES, dim: int = 8, seed: int = 0) -> Path:
    """A project with labeled answers of `profiles`' solvers, an embeddings table of `dim` dims
    (direction set by difficulty, so questions of a difficulty sit together) and a params.yaml
    (the repository's, with these solvers, fast routers and a judge of fixed rates)."""
    layout = write_fake_cache(root, profiles=profiles, seed=seed, with_map=False)
    items = read_items(layout, ("train", "test"))
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(8, dim))
    vectors = centres[items["difficulty"].to_numpy()] + 0.2 * rng.normal(size=(items.height, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    write_parquet_atomic(pl.DataFrame({
        "item_id": items["item_id"], "vector": vectors.astype(np.float32).tolist(), "embedder": "all-MiniLM-L6-v2",
        "n_chars": 10.0, "n_words": 2.0, "n_digits": 1.0, "difficulty": items["difficulty"].cast(pl.Float64),
    }), layout.embeddings_dir / "all-MiniLM-L6-v2.parquet")
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    template = raw["solvers"]["C"]
    raw["solvers"] = {name: raw["solvers"].get(name, {**template, "model": f"sim-{name}"}) for name in profiles}
    raw["routers"] = FAST_ROUTERS
    raw["evaluation"]["verifier"].update(false_positive_rate=0.02, false_negative_rate=0.03)
    layout.params_file.write_text(yaml.safe_dump(raw, sort_keys=False))
    return root


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_project(tmp_path_factory.mktemp("target"))


def test_transfer_from_an_identical_project_equals_in_domain_and_the_routers_stage(target: Path, tmp_path: Path):
    twin = write_project(tmp_path / "twin")
    project = open_project(target)
    d = run_transfer(open_project(twin), project)
    assert d["solvers"] == ["A", "B", "C"] and d["source_only"] == d["target_only"] == []
    params = project.params.routers
    assert set(d["routers"]) == set(params.routers)
    # the in-domain fit is the routers stage's: the same best point, accuracy and interval
    data = load_routing_data(project.layout, d["solvers"], params)
    verifier = build_verifier(project.params.evaluation.verifier, target)
    stage = study_metrics(run_study(data, params, verifier), project.params.evaluation.intervals, {}, {})["routers"]
    for name, r in d["routers"].items():
        assert r["transfer"] == r["in_domain"], name
        for key in ("accuracy", "cost_per_item_usd"):
            assert r["best"][key]["difference"] == 0 and r["best"][key]["p_value"] == 1, (name, key)
            assert r["same_point"][key]["difference"] == 0, (name, key)
        assert r["in_domain"]["best"]["accuracy"] == stage[name]["best_accuracy"], name
        assert r["in_domain"]["best"]["accuracy_ci"] == stage[name]["best_accuracy_ci"], name
        assert r["in_domain"]["best"]["operating_point"] == stage[name]["best_operating_point"], name
    assert d["split_sizes"]["target_test"] == 64 and d["seeds"] == 2


def test_only_the_shared_solvers_are_fitted_and_scored(target: Path, tmp_path: Path):
    # the source's D is right on every item and free: a router that saw it would send everything there
    source = write_project(tmp_path / "source", {**PROFILES, "D": (1.0, 0.0, 1e-9)})
    d = run_transfer(open_project(source), open_project(target))
    assert d["solvers"] == ["A", "B", "C"] and d["source_only"] == ["D"] and d["target_only"] == []
    assert d["best_single"]["solver"] in d["solvers"]
    for name, r in d["routers"].items():
        assert all(len(p["operating_point"]) for p in r["transfer"]["operating_points"])
    assert d["routers"]["best_single"]["transfer"]["best"]["operating_point"] in {f"solver={s}" for s in "ABC"}
    # and the other way round: the target's own extra solver is left out too
    back = run_transfer(open_project(target), open_project(source))
    assert back["solvers"] == ["A", "B", "C"] and back["target_only"] == ["D"]


def test_a_source_that_favours_the_wrong_solver_loses_accuracy_on_the_target(target: Path, tmp_path: Path):
    # on the source the cheap C is right everywhere and A mostly wrong: fitted there, best_single picks C
    flipped = {"A": (0.3, 0.0, 0.002), "B": (0.5, 0.0, 0.0004), "C": (0.999, 0.0, 0.00003)}
    d = run_transfer(open_project(write_project(tmp_path / "flipped", flipped)), open_project(target))
    best = d["routers"]["best_single"]
    assert best["transfer"]["best"]["operating_point"] == "solver=C"
    assert best["in_domain"]["best"]["operating_point"] == "solver=A"
    acc = best["best"]["accuracy"]
    assert acc["difference"] < -0.1 and acc["ci_high"] < 0 and acc["p_value"] < 0.05
    assert best["best"]["cost_per_item_usd"]["difference"] < 0  # cheaper, and worse


def test_both_directions_share_one_file_and_a_foreign_file_is_refused(target: Path, tmp_path: Path):
    out = tmp_path / "transfer.json"
    write_transfer({"x": 1}, "a -> b", out)
    metrics = write_transfer({"x": 2}, "b -> a", out)
    assert set(metrics["directions"]) == {"a -> b", "b -> a"} == set(json.loads(out.read_text())["directions"])
    out.write_text('{"methods": {}}')
    with pytest.raises(InputError, match="not a transfer metrics file"):
        write_transfer({"x": 1}, "a -> b", out)
    assert direction_key(open_project(target), open_project(target)) == f"{target.name} -> {target.name}"


def invoke_fails(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    out = result.output.strip()
    assert out.splitlines() == [out] and "Traceback" not in out
    return out


@pytest.mark.parametrize("remove", ["labels", "embeddings", "answers", "items"])
def test_a_project_without_its_outputs_is_refused_naming_the_file_and_command(target: Path, tmp_path: Path, remove: str):
    broken = write_project(tmp_path / "broken")
    layout = Layout(broken)
    path = {"labels": layout.labels, "embeddings": layout.embeddings_dir / "all-MiniLM-L6-v2.parquet",
            "answers": layout.answers("B"), "items": layout.items("test")}[remove]
    path.unlink()
    out = invoke_fails("transfer", str(target), str(broken))
    shown = layout.embeddings_dir if remove == "embeddings" else path
    assert str(shown) in out and f"cd {broken} && dvc repro" in out, out


def test_a_folder_without_params_is_refused(target: Path, tmp_path: Path):
    out = invoke_fails("transfer", str(tmp_path), str(target))
    assert str(tmp_path / "params.yaml") in out and "not a project folder" in out


def test_embeddings_of_other_dimensions_are_refused(target: Path, tmp_path: Path):
    other = write_project(tmp_path / "wide", dim=16)
    out = invoke_fails("transfer", str(other), str(target))
    assert "embeddings differ" in out and "16 dims" in out and "8 dims" in out and "embed.embedder" in out


def test_projects_sharing_fewer_than_two_solvers_are_refused(target: Path, tmp_path: Path):
    other = write_project(tmp_path / "other", {"A": PROFILES["A"], "Z": PROFILES["C"]})
    out = invoke_fails("transfer", str(other), str(target))
    assert "share 1 solver(s) (A)" in out


def test_the_command_writes_the_target_file_and_the_table_reads_it(target: Path, tmp_path: Path):
    out = tmp_path / "t.json"
    result = CliRunner().invoke(app, ["transfer", str(target), str(target), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"### {target.name} -> {target.name}" in result.output and "| knn |" in result.output
    table = CliRunner().invoke(app, ["transfer-table", str(out)])
    assert table.exit_code == 0 and "Δ accuracy, in-domain point" in table.output and "+0.000 [0.000, 0.000], p=1" in table.output
    out.write_text('{"directions": {"a -> b": {}}}')
    assert "not a transfer metrics file" in invoke_fails("transfer-table", str(out))


def test_a_shared_solver_without_labels_is_refused_naming_the_project(target: Path, tmp_path: Path):
    other = write_project(tmp_path / "unlabeled")
    layout = Layout(other)
    labels = pl.read_parquet(layout.labels)
    write_parquet_atomic(labels.filter(pl.col("solver") != "C"), layout.labels)
    out = invoke_fails("transfer", str(other), str(target))
    assert out.startswith(f"error: {other}: ") and "no labels for solver(s) ['C']" in out
