"""Nested dicts (metrics files, params) as flat keys: the one walk every caller shares.

`leaves` yields (key path, leaf); `flatten` joins the paths, e.g. {"a": {"b": 1}} -> {"a.b": 1}
(MLflow params and metrics, the metrics-file checks) or with `sep="/"` (MLflow metric names).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any


def is_number(value: Any) -> bool:
    """An int or float, not a bool (a bool is an int to Python, never a figure)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def leaves(tree: Any, skip: Collection[str] = (), path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(key path, value) of every leaf: anything but a mapping (a pydantic model is dumped first;
    a list is a leaf). An empty mapping has no leaves; a subtree under a key in `skip` is left out."""
    if hasattr(tree, "model_dump"):
        tree = tree.model_dump()
    if not isinstance(tree, Mapping):
        yield path, tree
        return
    for key, value in tree.items():
        if str(key) not in skip:
            yield from leaves(value, skip, (*path, str(key)))


def flatten(tree: Any, sep: str = ".", prefix: str = "", numbers_only: bool = False,
            skip: Collection[str] = ()) -> dict[str, Any]:
    """{"a": {"b": 1}} -> {prefix + "a.b": 1}; `numbers_only` keeps int and float leaves only."""
    return {prefix + sep.join(path): value for path, value in leaves(tree, skip)
            if not numbers_only or is_number(value)}
