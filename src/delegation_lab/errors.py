"""Errors that mean bad input rather than a bug: stages print them without a traceback and exit
non-zero (2 for params, 1 for data), leaving no half-written output behind."""

from __future__ import annotations


class ConfigError(Exception):
    """Invalid params: the message lists every offending dotted key and how to fix it."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: invalid configuration\n" + "\n".join(f"  {p}" for p in problems))


class InputError(ValueError):
    """Bad input data or an impossible request; the message names the file, line, key or item."""
