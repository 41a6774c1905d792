"""The base class every params.yaml section model derives from, the error that names bad keys, and
the one YAML reader of params files and game specs.

Kept apart from `config.py` so study packages can define their own section models without
importing the root model (which imports them).

YAML aliases (`*name`) repeat an anchored value without copying it, so a file of a few lines can
stand for 10^30 values (an "alias bomb"); PyYAML builds it as shared references, but validating or
printing it expands every copy. `UniqueKeyLoader` counts the values the aliases add, with the
aliases expanded, before anything is built, and refuses more than `MAX_ALIAS_VALUES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pydantic import BaseModel, ConfigDict

from delegation_lab.errors import ConfigError, short_repr

__all__ = ["ConfigError", "DuplicateKeyError", "ParamsModel", "StudyParams", "UniqueKeyLoader", "YAMLRefused",
           "dotted", "load_yaml"]

MAX_ALIAS_VALUES = 100_000
"""Most values the aliases of one YAML document may add once expanded (params.yaml has none)."""


class ParamsModel(BaseModel):
    """Strict, closed and immutable: a typo is an error, never a silently ignored key; `.inf` and
    `.nan` are refused in every float (no size, price or rate is infinite)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True,
                              allow_inf_nan=False)


class StudyParams(ParamsModel):
    """The section of one study: every study can be switched off in a project where it does not apply."""

    enabled: bool = True
    """false: the study's stages write their outputs as skipped (empty tables, placeholder plots,
    metrics `{"skipped": reason}`) without running, e.g. in an experiment whose data the study
    does not use; the frontier shows what ran."""


def dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


class YAMLRefused(yaml.YAMLError):
    """A YAML document that is not read: its message says why, with the line where one is known."""


class DuplicateKeyError(YAMLRefused):
    def __init__(self, key: Any, first_line: int, second_line: int):
        super().__init__(f"key {short_repr(key)} appears twice in one mapping: line {first_line} and line {second_line}")


class AliasExpansionError(YAMLRefused):
    pass


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: yaml.Node) -> tuple[int, int]:
    """(values with every alias expanded, distinct nodes) of a composed document, in one pass over
    the distinct nodes (an aliased node is counted once and its size reused); a node that contains
    itself through an alias is refused."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
        elif key in open_nodes:
            raise AliasExpansionError(f"line {node.start_mark.line + 1}: an alias refers to a value that contains it "
                                      "(a recursive alias expands without end)")
        elif key not in sizes:
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))
    return sizes[id(root)], len(sizes)


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key repeated in one mapping (plain PyYAML keeps the last) and
    aliases that expand the document by more than MAX_ALIAS_VALUES values."""

    first_alias: yaml.Mark | None = None

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.first_alias is None and self.check_event(yaml.AliasEvent):
            self.first_alias = self.peek_event().start_mark
        return super().compose_node(parent, index)

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None and self.first_alias is not None:
            total, distinct = expanded_size(node)
            if total - distinct > MAX_ALIAS_VALUES:
                raise AliasExpansionError(
                    f"line {self.first_alias.line + 1}: its aliases expand the document to {total:.3g} values, "
                    f"{total - distinct:.3g} more than written (at most {MAX_ALIAS_VALUES:,} are allowed); "
                    "write the values out or use fewer aliases")
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` may override merged keys
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKeyError(key, seen[key], line)
            except TypeError:  # an unhashable key: SafeLoader reports it below
                continue
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_config_text(path: Path) -> str:
    """The UTF-8 text of a params file, profile or game spec; ConfigError naming the file when it is
    missing, a folder, unreadable or not UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), ["file not found"]) from None
    except UnicodeDecodeError as e:
        raise ConfigError(str(path), [f"not UTF-8 text (byte {e.start + 1} cannot be read); save it as UTF-8"]) from None
    except IsADirectoryError:
        raise ConfigError(str(path), ["is a folder, not a YAML file"]) from None
    except OSError as e:
        raise ConfigError(str(path), [f"cannot be read ({e.strerror or type(e).__name__})"]) from None


def load_yaml(text: str) -> Any:
    """The YAML document `text` read by UniqueKeyLoader; YAMLRefused, one line with the line number
    where known, for anything that is not read (bad syntax, a repeated key, an alias bomb, nesting
    deeper than Python's recursion limit, an integer past its 4,300-digit limit)."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except YAMLRefused:
        raise
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise YAMLRefused(f"{where}not valid YAML ({getattr(e, 'problem', None) or e})") from None
    except RecursionError:
        raise YAMLRefused("nested too deeply to read (more levels than Python's recursion limit)") from None
    except ValueError as e:
        raise YAMLRefused(f"a value cannot be read ({str(e)[:200]})") from None
