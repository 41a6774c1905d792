"""One place for every path: outside `delegation_lab.pipeline.layout`, no string in `src/` or `stages/` starts
with one of the project's folders (`data/`, `results/`, `metrics/`, `plots/`, `models/`): stages and
studies ask `Layout` for their paths."""

from __future__ import annotations

import tokenize
from pathlib import Path

from tests.conftest import REPO

FOLDERS = ("data/", "results/", "metrics/", "plots/", "models/")
ALLOWED = {REPO / "src" / "delegation_lab" / "pipeline" / "layout.py"}


def strings_starting_with_a_folder(path: Path) -> list[str]:
    """`file:line: text` of every string token (f-strings, docstrings too) whose text starts with a folder."""
    found = []
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type != tokenize.STRING:
                continue
            body = tok.string.lstrip("rbfuRBFU")
            text = body[3:] if body[:3] in ('"""', "'''") else body[1:]
            if text.startswith(FOLDERS):
                found.append(f"{path.name}:{tok.start[0]}: {tok.string[:80]}")
    return found


def test_no_path_literal_outside_the_layout_module():
    files = [p for d in ("src", "stages") for p in sorted((REPO / d).rglob("*.py")) if p not in ALLOWED]
    assert len(files) > 100
    found = [hit for p in files for hit in strings_starting_with_a_folder(p)]
    assert not found, "paths belong in delegation_lab.pipeline.layout.Layout:\n" + "\n".join(found)


def test_the_scan_finds_a_path_literal(tmp_path: Path):
    """The check itself: plain, f- and doc-strings that start with a folder are found, text that
    merely mentions one is not."""
    probe = tmp_path / "probe.py"
    probe.write_text('"""metrics/x.json: a docstring."""\nA = f"data/answers/{1}.parquet"\nB = "results/frontier.parquet"\n'
                     'C = "a results/ folder named mid-text"\n')
    assert [h.split(":")[1] for h in strings_starting_with_a_folder(probe)] == ["1", "2", "3"]
