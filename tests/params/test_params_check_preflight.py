"""`dlab params check` refuses what a stage would refuse minutes into `dvc repro`: a params key a stage
of the dvc.yaml beside the file names and the file lacks (DVC's `Parameters ... are missing`), and
replayed answers the label stage could not label (`N answers get no label`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.labeling.preflight import unlabelled_problems
from delegation_lab.params.dag_keys import missing_key_problems, named_keys
from delegation_lab.params.root import parse_params

from tests.replay.test_replay_routerbench_csv import write_csv_folder

REPO = Path(__file__).resolve().parents[2]
PROJECTS = [REPO] + sorted(p.parent for p in (REPO / "experiments").glob("*/params.yaml"))


def check(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["params", "check", "--path", str(path)])
    return result.exit_code, result.output


def test_every_committed_project_names_only_keys_its_params_file_has():
    assert len(PROJECTS) >= 4
    for project in PROJECTS:
        assert missing_key_problems(project / "params.yaml") == [], project


def template_experiment(tmp_path: Path) -> Path:
    """experiments/zeroeval_gsm8k as a newcomer copies it, switched to domain buckets with
    `bucket_edges` dropped (the docs say bucket_by: domain ignores it)."""
    folder = tmp_path / "experiments" / "mine"
    folder.mkdir(parents=True)
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (folder / "dvc.yaml").symlink_to("../../dvc.yaml")
    raw = yaml.safe_load((REPO / "experiments" / "zeroeval_gsm8k" / "params.yaml").read_text())
    raw["ability_map"] = {"bucket_by": "domain", "confidence": 0.95}
    (folder / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return folder / "params.yaml"


def test_a_key_a_stage_names_and_the_file_lacks_is_refused_with_the_stage_and_the_line_to_add(tmp_path):
    params = template_experiment(tmp_path)
    code, output = check(params)
    assert code == 2
    lines = output.splitlines()
    assert lines[0] == f"{params}: invalid configuration" and len(lines) == 2  # one problem, one line
    assert f"ability_map.bucket_edges: missing from {params}, and stage(s) coordinator of " in lines[1]
    assert "add `bucket_edges: null` under `ability_map:`" in lines[1]
    # the line it asks for is what DVC needs: nothing is missing once it is there
    raw = yaml.safe_load(params.read_text())
    raw["ability_map"]["bucket_edges"] = None
    params.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert missing_key_problems(params) == []


def test_a_missing_section_is_named_once_with_every_stage_and_its_empty_default(tmp_path):
    params = template_experiment(tmp_path)
    raw = yaml.safe_load(params.read_text())
    del raw["routers"], raw["evaluation"]
    params.write_text(yaml.safe_dump(raw, sort_keys=False))
    problems = missing_key_problems(params)
    routers = [p for p in problems if p.startswith("routers:")]
    assert len(routers) == 1 and "stage(s) portfolio, routers of" in routers[0] and "add `routers: {}`" in routers[0]
    evaluation = [p for p in problems if p.startswith("evaluation:")]
    assert len(evaluation) == 1 and "and 4 more" in evaluation[0]  # seven stages name it, three are listed


def test_foreach_stages_are_expanded_from_the_params_they_iterate():
    dag = {"stages": {
        "solve": {"foreach": "${solvers}", "do": {"cmd": "x", "params": ["solvers.${key}", "data.dataset"]}},
        "pick": {"foreach": ["a", "b"], "do": {"params": ["picks.${item}", {"other.yaml": ["k"]}]}},
        "plain": {"cmd": "y", "params": ["label"]},
    }}
    keys = named_keys(dag, {"solvers": {"s1": {}, "s2": {}}})
    assert ("solve@s1", None, "solvers.s1") in keys and ("solve@s2", None, "data.dataset") in keys
    assert ("pick@1", None, "picks.b") in keys and ("pick@0", "other.yaml", "k") in keys
    assert ("plain", None, "label") in keys


def routerbench_project(tmp_path: Path) -> Path:
    """RouterBench's wide CSV as its own dataset: model `b` has no score for `mmlu.0` (a null cell)."""
    write_csv_folder(tmp_path / "routerbench")
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    # train_size null: the rest of the file (1 item), which the fold counts' preflight does not size
    raw["data"].update(dataset="replay", ability_size=1, train_size=None, test_size=1,
                       replay={"path": "routerbench", "format": "routerbench_csv"})
    raw["portfolio"] = {"router": None}  # three items: too few for the router's folds
    raw["solvers"] = {
        name: {"backend": "replay", "model": model,
               "price": {"input_usd_per_mtok": 0.5, "output_usd_per_mtok": 1.5, "source": "test"},
               "replay": {"path": "routerbench", "format": "routerbench_csv", "source_model": model}}
        for name, model in (("small", "a/small"), ("b", "b"))
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp_path / "params.yaml"


def test_a_replayed_cache_with_unscored_rows_is_refused_naming_the_solver_the_cache_and_the_item(tmp_path):
    params = routerbench_project(tmp_path)
    code, output = check(params)  # run from elsewhere: the caches are read from the params file's folder
    assert code == 2
    problem = output.splitlines()[1].strip()
    assert problem.startswith("solvers.b.replay: cache routerbench, model 'b': 1 row(s) with no correctness or "
                              "score (e.g. source index mmlu#mmlu.0), among the 3 item(s) with no gold")
    assert "drop solver b" in problem and "label.method: judge" in problem and "small" not in problem
    # the judge labels every answer: nothing to refuse
    raw = yaml.safe_load(params.read_text())
    raw["label"]["method"] = "judge"
    assert unlabelled_problems(parse_params(raw)) == []


def test_an_unreadable_replay_cache_is_named_at_params_check(tmp_path):
    params = routerbench_project(tmp_path)
    raw = yaml.safe_load(params.read_text())
    raw["solvers"]["b"]["replay"]["source_model"] = "c"
    params.write_text(yaml.safe_dump(raw, sort_keys=False))
    code, output = check(params)
    assert code == 2 and "solvers.b.replay: routerbench: no model 'c' in this routerbench_csv cache" in output
