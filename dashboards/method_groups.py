"""Methods of a study in families, so the Studies page shows related methods together (and a
study's separate domains apart, e.g. market's `chain-*` worlds beside its answer auctions) instead
of paging dozens of names alphabetically; plus the regex filter."""

from __future__ import annotations

import re

ALL = "(all)"


def family(method: str) -> str:
    """The first segment of a method name (split on @ . - _ /) without trailing digits:
    `chain-1p-md-N4` -> chain, `ccv-truthful@R0.5x` -> ccv, `m07` -> m, `1p-md@R2x` -> 1p."""
    first = re.split(r"[@.\-_/]", method, maxsplit=1)[0]
    return first.rstrip("0123456789") or first or method


def families(methods: list[str]) -> dict[str, list[str]]:
    """family -> its methods, in the methods' order; families sorted by name."""
    out: dict[str, list[str]] = {}
    for m in methods:
        out.setdefault(family(m), []).append(m)
    return dict(sorted(out.items()))


def default_group(methods: list[str], page: int) -> str:
    """ALL when every method fits one page or they form one family; else the first family."""
    groups = families(methods)
    return ALL if len(methods) <= page or len(groups) == 1 else next(iter(groups))


def matching(methods: list[str], pattern: str) -> list[str] | None:
    """The methods whose name matches the regex `pattern` (searched, case-insensitive); None when the
    pattern is not a valid regex."""
    if not pattern.strip():
        return methods
    try:
        rx = re.compile(pattern, re.IGNORECASE)
    except re.error:
        return None
    return [m for m in methods if rx.search(m)]
