"""The one study contract (`pipeline.study`): the recipe in docs/writing_a_study.md runs as written
(its toy study through `run_study_stage` on a temporary project, MLflow included), every registered
study has its stage in dvc.yaml declaring the outputs `write_study` writes, and the study stage
scripts stay short."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import polars as pl
import pytest
import yaml

from delegation_lab.params.root import load_params
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.studies import STUDIES
from delegation_lab.pipeline.study import Study, run_study_stage
from delegation_lab.pipeline.stage import StageContext
from delegation_lab.tracking.tracker import Tracker

REPO = Path(__file__).resolve().parents[2]


def recipe(doc: str, name: str) -> str:
    """The ```python block right after `<!-- recipe: NAME -->` in docs/DOC."""
    text = (REPO / "docs" / doc).read_text()
    found = re.search(rf"<!-- recipe: {re.escape(name)} -->\s*```python\n(.*?)```", text, re.S)
    assert found, f"docs/{doc} has no recipe {name!r}"
    return found.group(1)


def test_writing_a_study_recipe_runs(tmp_path: Path) -> None:
    namespace: dict = {}
    exec(compile(recipe("writing_a_study.md", "toy-study"), "docs/writing_a_study.md", "exec"), namespace)
    study = namespace["ToyStudy"]()
    assert isinstance(study, Study)
    params = load_params(REPO / "params.yaml")
    tracking = params.tracking.model_copy(update={"enabled": True, "uri": f"sqlite:///{tmp_path}/mlflow.db"})
    ctx = StageContext("toy", params, Layout(tmp_path), Tracker(tracking, tmp_path),
                       argparse.Namespace(params="params.yaml", no_progress=True))
    metrics = run_study_stage(ctx, study)

    layout = Layout(tmp_path)
    assert metrics == {"always_a": {"accuracy": 0.55}, "trajectory_rows": 4}
    assert yaml.safe_load(layout.metrics("toy").read_text()) == metrics
    steps = pl.read_parquet(layout.trajectories_dir / "study=toy", hive_partitioning=True)
    assert steps.height == 4 and sorted(steps["seed"].unique().to_list()) == [0, 1]
    assert pl.read_parquet(layout.summaries("toy"))["accuracy"].to_list() == [0.5, 0.6]
    assert pl.read_parquet(layout.outcomes("toy")).height == 2
    assert (layout.plots("toy") / "accuracy.csv").exists()
    runs = pl.read_parquet(layout.runs("toy"))  # the child runs' ids, keyed as the recipe says
    assert runs.height == 2 and runs["run_id"].null_count() == 0

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking.uri)
    found = client.search_runs([client.get_experiment_by_name("toy").experiment_id])
    names = sorted(r.data.tags["mlflow.runName"] for r in found)
    assert names == ["always_a/seed=0", "always_a/seed=1", "toy"]
    child = next(r for r in found if r.data.tags["mlflow.runName"] == "always_a/seed=1")
    assert child.data.metrics == {"eval/accuracy": 0.6}
    assert child.info.run_id in runs["run_id"].to_list()


@pytest.mark.parametrize("name", STUDIES.names())
def test_dvc_has_a_stage_per_study(name: str) -> None:
    study = STUDIES.get(name)()
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][study.stage]
    outs = [next(iter(o)) if isinstance(o, dict) else o for o in stage["outs"]]
    metrics = [next(iter(m)) if isinstance(m, dict) else m for m in stage["metrics"]]
    for out in (f"results/trajectories/study={name}", f"results/summaries/{name}.parquet",
                f"results/runs/{name}.parquet", f"results/outcomes/{name}.parquet"):
        assert out in outs, f"dvc.yaml stage {study.stage}: {out} is not declared"
    assert f"metrics/{name}.json" in metrics
    assert "${project.repo}/src/delegation_lab/pipeline" in stage["deps"]  # the contract (pipeline/study.py)
    script = REPO / "stages" / f"{study.stage}.py"
    assert f"${{project.repo}}/stages/{study.stage}.py" in stage["deps"]
    assert len(script.read_text().splitlines()) <= 60, f"{script.name} is over 60 lines"
