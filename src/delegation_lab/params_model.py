"""The base class every params.yaml section model derives from, and the error that names bad keys.

Kept apart from `config.py` so study packages can define their own section models without
importing the root model (which imports them).
"""

from __future__ import annotations

from typing import Any

import yaml

from pydantic import BaseModel, ConfigDict

from delegation_lab.errors import ConfigError

__all__ = ["ConfigError", "DuplicateKeyError", "ParamsModel", "StudyParams", "UniqueKeyLoader", "dotted"]


class ParamsModel(BaseModel):
    """Strict, closed and immutable: a typo is an error, never a silently ignored key."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True)


class StudyParams(ParamsModel):
    """The section of one study: every study can be switched off in a project where it does not apply."""

    enabled: bool = True
    """false: the study's stages write their outputs as skipped (empty tables, placeholder plots,
    metrics `{"skipped": reason}`) without running, e.g. in an experiment whose data the study
    does not use; the frontier shows what ran."""


def dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: Any, first_line: int, second_line: int):
        super().__init__(f"key {key!r} appears twice in one mapping: line {first_line} and line {second_line}")


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key repeated in one mapping (plain PyYAML keeps the last)."""

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
