"""Which project code a stage's script can run, read statically, so dvc.yaml's `deps` can be checked.

A DVC stage reruns when a declared dependency changes; a module its script imports but the stage
does not declare can change without `dvc status` noticing, and the stage's outputs go stale while
DVC calls them up to date. `stage_code` walks a script's import closure with `ast` (nothing is
imported), `undeclared` compares it with each stage's `deps`.

What counts as an import of a module of the package (`delegation_lab`):
- every `import` / `from ... import` statement anywhere in a file: at the top, inside a function,
  under `if TYPE_CHECKING:` (`edges(..., type_checking=False)` leaves those out, for the import graph);
- relative imports, resolved from the importing file's place;
- `from pkg import name` is `pkg` and, when `name` is a module of `pkg`, `pkg.name`;
- a package's `__init__.py` counts whenever any module under it is imported (Python runs it first);
- lazy loads by name: a string constant `"delegation_lab.a.b"` / `"delegation_lab.a.b:attr"` that
  names a module (a registry's target), and in a package's `__init__.py` that calls
  `import_module`, a string constant naming one of its submodules (lazy re-exports).
  These are in the closure (`strings=True`) but not in the import graph: they load on first use.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "delegation_lab"
_TARGET = re.compile(rf"^({PACKAGE}(?:\.\w+)*)(?::\w+)?$")


class SourceTree:
    """The modules under `src` (dotted name -> file) and the imports each makes."""

    def __init__(self, src: Path, package: str = PACKAGE) -> None:
        self.src = Path(src)
        self.package = package
        self.files: dict[str, Path] = {}
        for path in sorted((self.src / package).rglob("*.py")):
            parts = path.relative_to(self.src).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            self.files[".".join(parts)] = path
        self._cache: dict[tuple[Path, bool, bool], set[str]] = {}

    def module_of(self, path: Path) -> str | None:
        path = Path(path)
        if not path.is_relative_to(self.src / self.package):
            return None
        parts = path.relative_to(self.src).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def _existing(self, name: str) -> str | None:
        """`name` if it is a module, else its longest prefix that is (an attribute's module)."""
        while name:
            if name in self.files:
                return name
            name = name.rpartition(".")[0]
        return None

    def imports(self, path: Path, *, type_checking: bool = True, strings: bool = False) -> set[str]:
        """The package's modules `path` names in its import statements (see the module docstring)."""
        key = (Path(path), type_checking, strings)
        if key not in self._cache:
            self._cache[key] = self._imports(Path(path), type_checking, strings)
        return self._cache[key]

    def _imports(self, path: Path, type_checking: bool, strings: bool) -> set[str]:
        try:
            tree = ast.parse(path.read_text(), filename=str(path))
        except (SyntaxError, UnicodeDecodeError):
            return set()
        here = self.module_of(path)
        is_init = path.name == "__init__.py"
        skipped = _type_checking_nodes(tree) if not type_checking else set()
        names: list[str] = []
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    if here is None:
                        continue
                    parts = here.split(".") if is_init else here.split(".")[:-1]
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names.append(base)
                names += [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in self.files]
            elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = _TARGET.match(node.value)
                if m and m.group(1) in self.files:
                    names.append(m.group(1))
        if strings and is_init and here and "import_module" in path.read_text():
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and f"{here}.{node.value}" in self.files:
                    names.append(f"{here}.{node.value}")
        out = set()
        for name in names:
            if name == self.package or name.startswith(self.package + "."):
                found = self._existing(name)
                if found and found != here:
                    out.add(found)
        return out

    def edges(self, *, type_checking: bool = False) -> dict[str, set[str]]:
        """module -> the modules its import statements name (no implicit parent packages, no lazy
        loads by name): the graph whose cycles `cycles` finds."""
        return {m: self.imports(f, type_checking=type_checking) for m, f in self.files.items()}

    def closure(self, start: Path) -> set[Path]:
        """Every file of the package that running `start` can import: imports anywhere in a file,
        lazy loads by name, and the `__init__.py` of every package above an imported module."""
        seen: set[str] = set()
        todo = list(self._with_parents(self.imports(start, strings=True)))
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            todo += [n for n in self._with_parents(self.imports(self.files[m], strings=True)) if n not in seen]
        return {self.files[m] for m in seen}

    def _with_parents(self, modules: Iterable[str]) -> set[str]:
        out = set()
        for m in modules:
            parts = m.split(".")
            out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in self.files}
        return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) blocks."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for child in node.body:
                    out |= {id(n) for n in ast.walk(child)}
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each sorted), i.e. the import
    cycles, plus one example cycle path through each (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One cycle through the component's first module, as a path a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                return paths[v] + [start]
            if w in members and w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    return component


def stage_scripts(dag: dict) -> dict[str, tuple[str, list[str]]]:
    """stage name -> (its script's path, its declared deps), `${project.repo}/` stripped, from a
    parsed dvc.yaml (a `foreach` stage's `do` body)."""
    out = {}
    for name, stage in dag.get("stages", {}).items():
        body = stage.get("do", stage)
        m = re.search(r"(stages/\w+\.py)", str(body.get("cmd", "")))
        if not m:
            continue
        deps = [d if isinstance(d, str) else next(iter(d)) for d in body.get("deps", [])]
        out[name] = (m.group(1), [d.replace("${project.repo}/", "") for d in deps])
    return out


def undeclared(repo: Path, dag: dict) -> dict[str, list[str]]:
    """stage -> the package files (relative to `repo`) its script can import that no dep declares
    (a declared folder covers everything under it)."""
    repo = Path(repo).resolve()
    tree = SourceTree(repo / "src")
    out = {}
    for name, (script, deps) in stage_scripts(dag).items():
        declared = [(repo / d).resolve() for d in deps]
        needed = tree.closure(repo / script) | {f for f in [repo / script] if f.exists()}
        missing = sorted(str(f.relative_to(repo)) for f in needed
                         if not any(f.resolve() == d or f.resolve().is_relative_to(d) for d in declared))
        if missing:
            out[name] = missing
    return out
