"""docs/code_map.md names every package and top-level module of src/delegation_lab/, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "src" / "delegation_lab"


def test_the_code_map_lists_every_package_and_module():
    text = (REPO / "docs" / "code_map.md").read_text()
    named = set(re.findall(r"^\| `([a-z_]+)(?:/|\.py)`", text, flags=re.M))
    named |= {m for row in re.findall(r"^\| ((?:`[a-z_]+/` )+)\|", text, flags=re.M) for m in re.findall(r"`([a-z_]+)/`", row)}
    actual = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    actual |= {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
    assert named == actual, f"missing from docs/code_map.md: {sorted(actual - named)}; gone: {sorted(named - actual)}"
    assert len([p for p in PKG.glob("*.py")]) <= 8, "the top level holds packages and a handful of modules"


# Test folders that are not a package's name, and what each tests.
TEST_FOLDERS_BEYOND_PACKAGES = {
    "replay": "solvers/replay/ (the published answer formats) and `dlab import`",
    "dashboard": "dashboards/ (the Streamlit app)",
    "experiments": "experiments/<name>/ (real-answers experiments)",
    "cli": "cli.py (the `dlab` command)",
    "registry": "registry.py, the registries' recipes, and the small top-level modules (flatten, embeddings)",
    "fixtures": "no code: real upstream records kept verbatim as test data (tests/fixtures/<upstream>/SOURCE.md)",
}


def test_tests_mirror_the_packages():
    """tests/<package>/test_*.py tests src/delegation_lab/<package>/: a module's tests are found from
    its package's name; shared fixtures and fakes stay at tests/ root."""
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    tests = REPO / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= packages | set(TEST_FOLDERS_BEYOND_PACKAGES), sorted(folders - packages - set(TEST_FOLDERS_BEYOND_PACKAGES))
    assert not list(tests.glob("test_*.py")), "a test module belongs in its package's folder"
    assert all((tests / f / "__init__.py").exists() for f in folders)
