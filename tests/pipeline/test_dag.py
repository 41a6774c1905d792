"""The DAG is written once: the root dvc.yaml. Every experiment is its params and data, its dvc.yaml a
link to the root's; a study that does not apply writes the outputs the DAG declares for it, as skipped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.params.root import load_params
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA, SUMMARY_SCHEMA
from delegation_lab.pipeline.skip import skip_reason, skip_stage

from tests.conftest import BIN, REPO, make_project, run, stage_here

EXPERIMENTS = sorted(p for p in (REPO / "experiments").iterdir() if (p / "params.yaml").exists())


def tracked_dvc_yamls() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*dvc.yaml"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / line for line in out.split() if line]


def test_no_stage_is_defined_twice():
    files = tracked_dvc_yamls()
    assert REPO / "dvc.yaml" in files and len(files) > 1
    for path in files:
        if path != REPO / "dvc.yaml":
            assert path.is_symlink() and path.resolve() == (REPO / "dvc.yaml").resolve(), f"{path} is a copy, not a link"


@pytest.mark.parametrize("folder", [REPO, *EXPERIMENTS], ids=lambda p: p.name)
def test_a_lock_file_holds_only_the_dag_s_stages(folder: Path):
    """`dvc repro` never drops the entry of a stage the DAG no longer has, and every `dvc` command
    parses the whole lock file (pure-Python YAML, seconds per stage on a 40-model experiment's): a
    renamed or merged stage's entries are deleted from dvc.lock, not left to slow every run."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    names = {name for name, stage in stages.items() if "foreach" not in stage}
    looped = {f"{name}@" for name, stage in stages.items() if "foreach" in stage}
    locked = yaml.safe_load((folder / "dvc.lock").read_text())["stages"]
    stale = sorted(s for s in locked if s not in names and not s.startswith(tuple(looped)))
    assert not stale, f"{folder.name}/dvc.lock: entries of stages the DAG no longer has: {', '.join(stale)}"


def dag_param_keys() -> set[str]:
    """Every params key a stage of the DAG names (templated ones, like `solvers.${key}`, left out)."""
    keys = set()
    for stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].values():
        for entry in stage.get("do", stage).get("params", []):
            if isinstance(entry, str) and "${" not in entry:
                keys.add(entry)
    return keys


def has_key(tree: dict, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


@pytest.mark.parametrize("folder", [REPO, *EXPERIMENTS], ids=lambda p: p.name)
def test_every_project_names_every_key_the_dag_tracks(folder: Path):
    """DVC refuses a stage whose tracked params key is missing from the params file (defaults do not
    count), and the DAG finds its scripts through `project.repo`."""
    raw = yaml.safe_load((folder / "params.yaml").read_text())
    missing = sorted(k for k in dag_param_keys() if not has_key(raw, k))
    assert not missing, f"{folder / 'params.yaml'} lacks {missing}"
    assert (folder / raw["project"]["repo"]).resolve() == REPO.resolve()
    load_params(folder / "params.yaml")  # and it is valid


def test_skip_stage_writes_what_the_dag_declares(tmp_path: Path):
    layout = Layout(tmp_path)
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"study": {
        "cmd": "python stages/study.py",
        "outs": ["results/trajectories/study=study", "results/summaries/study.parquet", "results/outcomes/study.parquet",
                 "results/study/extra.parquet", {"data/cache": {"persist": True}}, {"plots/study/fig.png": {"cache": False}},
                 "results/study/model.pt"],
        "metrics": [{"metrics/study.json": {"cache": False}}, {"metrics/timings/study.json": {"cache": False}}],
        "plots": [{"plots/study/curve.csv": {"x": "episode", "y": "return"}},
                  {"plots/study/curves": {"x": "round", "y": "success"}}],
    }}}))
    kept = tmp_path / "data" / "cache" / "keep.bin"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"persisted")
    old = layout.trajectories("study") / "method=m" / "seed=0" / "part-00000.parquet"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"old")

    skip_stage(layout, "study", "study.enabled is false", extra={"dataset": "x"})

    assert skip_reason(layout.metrics("study")) == "study.enabled is false"
    assert json.loads(layout.metrics("study").read_text())["dataset"] == "x"
    assert not layout.timings("study").exists()  # run_stage writes the stage's own timings
    assert pl.read_parquet(layout.summaries("study")).schema == pl.Schema(SUMMARY_SCHEMA)
    assert pl.read_parquet(layout.outcomes("study")).schema == pl.Schema(OUTCOME_SCHEMA)
    assert pl.read_parquet(tmp_path / "results/study/extra.parquet").height == 0
    assert not old.exists() and (layout.trajectories("study") / "SKIPPED.txt").exists()
    assert kept.read_bytes() == b"persisted"
    assert (tmp_path / "plots/study/fig.png").stat().st_size > 0
    assert (tmp_path / "plots/study/curve.csv").read_text().strip() == "episode,return"
    assert (tmp_path / "plots/study/curves/skipped.csv").read_text().strip() == "round,success"
    assert (tmp_path / "results/study/model.pt").exists()


def test_skip_stage_names_a_stage_the_dag_lacks(tmp_path: Path):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    from delegation_lab.errors import InputError

    with pytest.raises(InputError, match="stage 'nope'"):
        skip_stage(Layout(tmp_path), "nope", "why")


@pytest.mark.slow
def test_a_disabled_study_skips_without_running(tmp_path: Path):
    root = make_project(tmp_path / "p")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["credit"]["enabled"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = stage_here(root, "credit")
    assert proc.returncode == 0 and "credit: skipped: credit.enabled is false" in proc.stdout, proc.stderr
    layout = Layout(root)
    assert skip_reason(layout.metrics("credit"))
    assert pl.read_parquet(layout.summaries("credit")).height == 0
    assert json.loads(layout.timings("credit").read_text())["cpu_seconds"] < 30  # CPU: a busy machine stretches wall time


@pytest.mark.slow
@pytest.mark.parametrize(("stage", "section", "study"), [("credit", "credit", "delegation_lab.credit.contract"),
                                                     ("margent_train", "margent", "delegation_lab.margent.study")])
def test_a_disabled_study_s_process_never_loads_the_study(tmp_path: Path, stage: str, section: str, study: str):
    """Its script skips before its own imports (stage.skip_if_disabled): no torch, no study code (its
    params model is loaded with every params file)."""
    root = make_project(tmp_path / "p")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params[section]["enabled"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = run([str(BIN / "python"), "-X", "importtime", f"stages/{stage}.py"], root)
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert f"{stage}: skipped: {section}.enabled is false" in proc.stdout
    assert "torch" not in imported and study not in imported
    assert skip_reason(Layout(root).metrics(stage))
