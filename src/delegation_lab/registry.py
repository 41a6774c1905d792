"""Name -> implementation tables, loaded lazily: one pattern for every family that params pick by
name (datasets, solver backends, replay formats, routers, verifiers).

An implementation is registered by a "module:attribute" string, so listing the names (params
validation, `dlab import --help`) imports nothing; the module is imported on the first `get` of
its name. docs/registries.md says where each family's table lives and how to add one.
"""

from __future__ import annotations

import importlib
from typing import Any, Generic, Literal, TypeVar

from delegation_lab.errors import InputError

T = TypeVar("T")


class UnknownNameError(InputError):
    """A name no implementation is registered under; the message lists the known ones."""


class Registry(Generic[T]):
    """Names, in registration order, each bound to the "module:attribute" that implements it."""

    def __init__(self, family: str, key: str):
        self.family = family  # what one implementation is, for messages: "dataset", "router", ...
        self.key = key  # the params key that names one: "data.dataset", "solvers.<name>.backend", ...
        self._targets: dict[str, str] = {}
        self._loaded: dict[str, T] = {}

    def register(self, name: str, target: str) -> None:
        module, sep, attribute = target.partition(":")
        if not (sep and module and attribute):
            raise ValueError(f"{self.family} {name!r}: target {target!r} is not 'module:attribute'")
        if name in self._targets:
            raise ValueError(f"{self.family} {name!r} is registered twice ({self._targets[name]}, {target})")
        self._targets[name] = target

    def names(self) -> tuple[str, ...]:
        return tuple(self._targets)

    def choices(self) -> Any:
        """`Literal[<every name>]`: the params field that names one validates against the table and
        its error lists the valid choices."""
        return Literal[self.names()]  # type: ignore[valid-type]

    def target(self, name: str) -> str:
        """Where `name` is implemented ("module:attribute"), without importing it."""
        self._check(name)
        return self._targets[name]

    def get(self, name: str) -> T:
        """The implementation registered as `name`, importing its module on first use."""
        if name not in self._loaded:
            module, _, attribute = self.target(name).partition(":")
            self._loaded[name] = getattr(importlib.import_module(module), attribute)
        return self._loaded[name]

    __getitem__ = get

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def _check(self, name: str) -> None:
        if name not in self._targets:
            raise UnknownNameError(f"{self.key}: unknown {self.family} {name!r}; known: {', '.join(self.names())}")

    def __repr__(self) -> str:
        return f"Registry({self.family!r}: {', '.join(self.names())})"
