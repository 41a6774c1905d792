"""docs/code_map.md names every package and top-level module of src/delegation_lab/, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "src" / "delegation_lab"


def test_the_code_map_lists_every_package_and_module():
    text = (REPO / "docs" / "code_map.md").read_text()
    named = set(re.findall(r"^\| `([a-z_]+)(?:/|\.py)`", text, flags=re.M))
    named |= {m for row in re.findall(r"^\| ((?:`[a-z_]+/` )+)\|", text, flags=re.M) for m in re.findall(r"`([a-z_]+)/`", row)}
    actual = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    actual |= {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
    assert named == actual, f"missing from docs/code_map.md: {sorted(actual - named)}; gone: {sorted(named - actual)}"
    assert len([p for p in PKG.glob("*.py")]) <= 8, "the top level holds packages and a handful of modules"
