"""The base class every params.yaml section model derives from, and the error that names bad keys.

Kept apart from `config.py` so study packages can define their own section models without
importing the root model (which imports them).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from delegation_lab.errors import ConfigError

__all__ = ["ConfigError", "ParamsModel", "dotted"]


class ParamsModel(BaseModel):
    """Strict, closed and immutable: a typo is an error, never a silently ignored key."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True)


def dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)
