"""params.yaml validation: dotted paths, valid keys, exit codes, profiles, generated docs."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from delegation_lab.params.root import Params, load_params, parse_params, read_yaml
from delegation_lab.errors import ConfigError
from delegation_lab.params.docs import render_params_docs, undocumented

from tests.conftest import BIN, REPO, run

RAW = yaml.safe_load((REPO / "params.yaml").read_text())


def problems_for(raw: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_params(raw)
    return err.value.problems


def test_committed_params_and_profiles_are_valid():
    params = load_params(REPO / "params.yaml")
    assert set(params.solvers) == {"A", "B", "C"}
    assert params.data.dataset == "arith"
    for profile in (REPO / "profiles").glob("*.yaml"):
        from delegation_lab.params.root import deep_merge

        parse_params(deep_merge(RAW, yaml.safe_load(profile.read_text())), str(profile))


def test_unknown_key_names_dotted_path_and_valid_keys():
    raw = copy.deepcopy(RAW)
    raw["data"]["arith"]["max_step"] = 5
    (problem,) = problems_for(raw)
    assert problem.startswith("data.arith.max_step: unknown key")
    assert "min_steps" in problem and "max_steps" in problem and "step_weights" in problem


def test_unknown_key_inside_a_named_solver():
    raw = copy.deepcopy(RAW)
    raw["solvers"]["B"]["simulated"]["skil"] = 1.0
    (problem,) = problems_for(raw)
    assert problem.startswith("solvers.B.simulated.skil: unknown key")
    assert "skill" in problem and "difficulty_slope" in problem


def test_wrong_type_and_missing_backend_section():
    raw = copy.deepcopy(RAW)
    raw["data"]["ability_size"] = "many"
    raw["solvers"]["C"] = {"backend": "replay", "model": "x", "price": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1}}
    problems = problems_for(raw)
    assert any(p.startswith("data.ability_size:") for p in problems)
    assert any(p.startswith("solvers.C:") and "replay" in p for p in problems)


def test_frozen_models():
    params = Params.model_validate(RAW)
    with pytest.raises(Exception):
        params.data.seed = 3  # type: ignore[misc]


def test_bad_yaml_names_line(tmp_path: Path):
    bad = tmp_path / "params.yaml"
    bad.write_text("data:\n  seed: [1, 2\n")
    with pytest.raises(ConfigError) as err:
        load_params(bad)
    assert "line" in str(err.value) and str(bad) in str(err.value)


def test_duplicate_yaml_key_names_the_key_and_both_lines(tmp_path: Path):
    bad = tmp_path / "params.yaml"
    bad.write_text("data:\n  seed: 1\n  test_size: 50\n  seed: 2\nlabel: {}\n")
    with pytest.raises(ConfigError) as err:
        load_params(bad)
    assert "key 'seed' appears twice in one mapping: line 2 and line 4" in str(err.value) and str(bad) in str(err.value)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "twice.yaml").write_text("data: {test_size: 5, test_size: 6}\n")
    bad.write_text((REPO / "params.yaml").read_text())
    proc = run([str(BIN / "dlab"), "params", "profile", "twice"], tmp_path, check=False)
    assert proc.returncode == 2 and "key 'test_size' appears twice in one mapping: line 1 and line 1" in proc.stderr
    # the same key in different mappings, and merge keys overriding merged ones, are fine
    ok = tmp_path / "ok.yaml"
    ok.write_text("a: &base {x: 1, y: 2}\nb:\n  <<: *base\n  x: 3\nc: {x: 4}\n")
    assert read_yaml(ok) == {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 2}, "c": {"x": 4}}


def test_stage_exits_2_before_any_work(tmp_path: Path):
    raw = copy.deepcopy(RAW)
    raw["label"]["methd"] = "judge"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    proc = run([str(BIN / "python"), str(REPO / "stages" / "prepare.py")], tmp_path, check=False)
    assert proc.returncode == 2
    assert "label.methd: unknown key" in proc.stderr
    assert not (tmp_path / "data").exists()
    cli = run([str(BIN / "dlab"), "params", "check"], tmp_path, check=False)
    assert cli.returncode == 2 and "label.methd" in cli.stderr


def test_every_key_is_documented_and_docs_are_current():
    assert undocumented() == []
    assert (REPO / "docs" / "params.md").read_text() == render_params_docs(), "run `dlab params docs`"


def test_profile_overlay_is_validated(tmp_path: Path):
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "tiny.yaml").write_text("data: {test_size: 50}\n")
    (tmp_path / "profiles" / "broken.yaml").write_text("data: {tests_size: 50}\n")
    run([str(BIN / "dlab"), "params", "profile", "tiny"], tmp_path)
    assert load_params(tmp_path / "params.yaml").data.test_size == 50
    before = (tmp_path / "params.yaml").read_text()
    proc = run([str(BIN / "dlab"), "params", "profile", "broken"], tmp_path, check=False)
    assert proc.returncode == 2 and "data.tests_size" in proc.stderr
    assert (tmp_path / "params.yaml").read_text() == before


def test_dvc_yaml_is_valid_and_the_frontier_reads_every_study_summary():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    listed = run([str(BIN / "dvc"), "stage", "list", "--name-only"], REPO).stdout.split()
    assert {"prepare", "label", "ability_map", "frontier"} <= set(listed)

    def out_paths(stage: dict) -> list[str]:
        return [next(iter(o)) if isinstance(o, dict) else o for o in stage.get("outs", [])]

    summaries = {p for name, st in stages.items() if name != "frontier" for p in out_paths(st) if p.startswith("results/summaries/")}
    assert summaries, "no study writes summaries?"
    assert summaries <= set(stages["frontier"]["deps"]), "the frontier stage must depend on every study's summaries"
    for name, st in stages.items():
        for section in st.get("params", []):
            head = str(section).split(".")[0].replace("${key}", "")
            assert head in RAW or head == "solvers", f"stage {name} names params section {section!r} missing from params.yaml"
