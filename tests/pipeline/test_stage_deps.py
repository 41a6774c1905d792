"""Every DVC stage declares every project file its script can import (issue 40), so editing code
reruns the stages that run it: `dvc status` never calls stale outputs up to date.

The closure is read statically (`delegation_lab.pipeline.code_deps`: imports anywhere in a file,
relative ones resolved, a package's `__init__.py` with any of its modules, registries' lazy targets);
a declared folder covers the files under it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from delegation_lab.pipeline.code_deps import undeclared

from tests.conftest import BIN, copy_project, run

REPO = Path(__file__).resolve().parents[2]


def _dag(root: Path) -> dict:
    return yaml.safe_load((root / "dvc.yaml").read_text())


def test_every_stage_declares_the_code_it_imports():
    missing = undeclared(REPO, _dag(REPO))
    assert not missing, "undeclared code deps (add them to the stage's deps in dvc.yaml):\n" + "\n".join(
        f"{stage}: {', '.join(files)}" for stage, files in sorted(missing.items()))


def test_a_planted_undeclared_import_is_named(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(REPO / "stages", copy / "stages")
    shutil.copy2(REPO / "dvc.yaml", copy / "dvc.yaml")
    assert undeclared(copy, _dag(copy)) == {}
    planted = copy / "src" / "delegation_lab" / "reporting" / "repro_check.py"
    assert "reporting" not in (copy / "dvc.yaml").read_text().split("stages/embed.py")[1].split("outs:")[0]
    embed = copy / "stages" / "embed.py"
    embed.write_text(embed.read_text() + "\n\ndef _late():\n"
                     "    from delegation_lab.reporting.repro_check import check  # noqa: F401\n")
    missing = undeclared(copy, _dag(copy))
    assert set(missing) == {"embed"}
    assert str(planted.relative_to(copy)) in missing["embed"]
    assert "src/delegation_lab/reporting/__init__.py" in missing["embed"]


@pytest.mark.slow
def test_changed_parsing_code_makes_label_and_its_downstream_stale(smoke_dag, tmp_path):
    project, _ = smoke_dag
    copy = copy_project(project, tmp_path / "copy")
    parsing = copy / "src" / "delegation_lab" / "parsing.py"
    parsing.write_text(parsing.read_text() + "\n# changed\n")
    status = run([str(BIN / "dvc"), "status"], copy).stdout
    stale = {line.split(":")[0].strip() for line in status.splitlines() if line and not line.startswith((" ", "\t"))}
    for stage in ("label", "ability_map", "frontier", "portfolio"):
        assert stage in stale, f"{stage} not stale after parsing.py changed:\n{status}"
