"""The package's modules import each other without a cycle (issue 40).

The graph is read statically (`delegation_lab.pipeline.code_deps`): every import statement, at the top
or inside a function. Imports under `if TYPE_CHECKING:` are left out: they never run (the modules use
`from __future__ import annotations`), so they cannot make an import order matter; they only name a
type for an annotation. Lazy loads by name (a registry's "module:attr" targets) are left out too: a
registry is how a family's implementation is found on first use, not an import of its package.
"""

from __future__ import annotations

from pathlib import Path

from delegation_lab.pipeline.code_deps import SourceTree, cycle_path, cycles

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_package_has_no_import_cycle():
    graph = SourceTree(SRC).edges(type_checking=False)
    found = [" -> ".join(cycle_path(graph, c)) for c in cycles(graph)]
    assert not found, "import cycles (move the shared piece to where it belongs):\n" + "\n".join(found)


def test_a_planted_cycle_is_found(tmp_path):
    pkg = tmp_path / "delegation_lab"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "one.py").write_text("def f():\n    from delegation_lab.b import two\n")
    (pkg / "b.py").write_text("from .a.one import f\n")
    (pkg / "two.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from delegation_lab import b\n")
    graph = SourceTree(tmp_path).edges()
    assert cycles(graph) == [["delegation_lab.a.one", "delegation_lab.b"]]
