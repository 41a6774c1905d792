"""Numbers the docs quote from metrics files, kept current by one check and one rewrite.

A doc (docs/**/*.md, README.md) writes a number it takes from metrics/STUDY.json as

    <!-- m:STUDY:KEY[:FMT] -->VALUE<!-- /m -->

KEY is the dotted key path (list items by index), FMT an optional Python format spec (default
`.4g`; text values print as they are unless FMT is given), VALUE = format(value, FMT). `check`
lists every span whose VALUE differs from the metrics (and every span whose file or key is
missing), each by file:line; `refresh` rewrites the stale VALUEs. Spans inside code (fenced blocks,
`inline`) are examples, not quotes, and are skipped.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delegation_lab.pipeline.layout import Layout

SPAN = re.compile(r"<!--\s*m:(?P<study>[^:\s>]+):(?P<key>[^:\s>]+)(?::(?P<fmt>[^\s>]*))?\s*-->(?P<value>.*?)<!--\s*/m\s*-->")
DEFAULT_FMT = ".4g"
_INLINE_CODE = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class Span:
    file: Path
    line: int  # 1-based
    study: str
    key: str
    fmt: str | None
    shown: str  # VALUE as the doc has it
    expected: str | None  # VALUE from the metrics; None when it cannot be read
    problem: str | None = None  # why `expected` is None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def stale(self) -> bool:
        return self.expected is not None and self.expected != self.shown


def doc_files(root: Path) -> list[Path]:
    """README.md and every docs/**/*.md under `root`."""
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    return files + sorted((root / "docs").rglob("*.md"))


def lookup(obj: Any, key: str) -> Any:
    """The value at a dotted key path; a segment may itself hold dots (the longest match wins).
    Raises KeyError naming the first segment that is not there."""
    parts = key.split(".")

    def walk(node: Any, i: int) -> Any:
        if i == len(parts):
            return node
        if isinstance(node, list):
            index = int(parts[i]) if parts[i].lstrip("-").isdigit() else None
            if index is None or not -len(node) <= index < len(node):
                raise KeyError(".".join(parts[: i + 1]))
            return walk(node[index], i + 1)
        if isinstance(node, dict):
            for j in range(len(parts), i, -1):
                name = ".".join(parts[i:j])
                if name in node:
                    try:
                        return walk(node[name], j)
                    except KeyError:
                        continue
        raise KeyError(".".join(parts[: i + 1]))

    return walk(obj, 0)


def render(value: Any, fmt: str | None) -> str:
    if isinstance(value, dict | list) or value is None:
        raise ValueError(f"is {'null' if value is None else type(value).__name__}, not a number or text")
    if fmt is None and (isinstance(value, str | bool)):
        return str(value)
    return format(value, fmt or DEFAULT_FMT)


def _code_masked(lines: list[str]) -> list[str]:
    """Lines with fenced code blocks and `inline code` blanked (same lengths, so offsets hold)."""
    out, fenced = [], False
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            out.append(" " * len(line))
        elif fenced:
            out.append(" " * len(line))
        else:
            out.append(_INLINE_CODE.sub(lambda m: " " * len(m.group()), line))
    return out


def scan(root: Path, files: list[Path] | None = None) -> list[Span]:
    """Every span in the docs with the value the metrics under root/metrics give it."""
    cache: dict[str, Any] = {}

    def metrics(study: str) -> Any:
        if study not in cache:
            path = Layout(root).metrics(study)
            try:
                cache[study] = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as e:
                cache[study] = e
        return cache[study]

    spans = []
    for file in files if files is not None else doc_files(root):
        lines = file.read_text().splitlines()
        for number, (line, masked) in enumerate(zip(lines, _code_masked(lines), strict=True), start=1):
            for m in SPAN.finditer(masked):
                study, key, fmt = m["study"], m["key"], m["fmt"] or None
                shown = line[m.start("value"):m.end("value")]
                data, expected, problem = metrics(study), None, None
                if isinstance(data, Exception):
                    problem = f"{Layout().metrics(study)} cannot be read ({type(data).__name__})"
                else:
                    try:
                        expected = render(lookup(data, key), fmt)
                    except KeyError as e:
                        problem = f"{Layout().metrics(study)} has no key {key!r} (missing: {e.args[0]!r})"
                    except ValueError as e:
                        problem = f"{Layout().metrics(study)} {key!r} {e} (format {fmt or DEFAULT_FMT!r})"
                shown_rel = file.relative_to(root) if file.is_relative_to(root) else file
                spans.append(Span(shown_rel, number, study, key, fmt, shown, expected, problem))
    return spans


def problems(spans: list[Span]) -> list[str]:
    """One line per span that is stale or cannot be read, by file:line."""
    out = []
    for s in spans:
        if s.problem:
            out.append(f"{s.where}: m:{s.study}:{s.key}: {s.problem}")
        elif s.stale:
            out.append(f"{s.where}: m:{s.study}:{s.key}: the doc says {s.shown!r}, the metrics give {s.expected!r}")
    return out


def refresh(root: Path, spans: list[Span]) -> list[Path]:
    """Rewrite every stale VALUE (each file atomically); refuses, writing nothing, while any span
    cannot be read. Returns the files rewritten."""
    unreadable = [s for s in spans if s.problem]
    if unreadable:
        raise ValueError("\n".join(problems(unreadable)))
    by_file: dict[Path, dict[int, list[Span]]] = {}
    for s in spans:
        if s.stale:
            by_file.setdefault(s.file, {}).setdefault(s.line, []).append(s)
    written = []
    for rel, by_line in by_file.items():
        path = rel if rel.is_absolute() else root / rel
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        masked = _code_masked([ln.rstrip("\n") for ln in lines])
        for number, line_spans in by_line.items():
            line, fresh = lines[number - 1], {(s.study, s.key, s.fmt): s.expected for s in line_spans}
            pieces, last = [], 0
            for m in SPAN.finditer(masked[number - 1]):
                value = fresh.get((m["study"], m["key"], m["fmt"] or None))
                if value is not None:
                    pieces += [line[last:m.start("value")], value]
                    last = m.end("value")
            lines[number - 1] = "".join(pieces) + line[last:]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(lines))
        os.replace(tmp, path)
        written.append(path)
    return written
