"""Errors that mean bad input rather than a bug: stages print them without a traceback and exit
non-zero (2 for params, 1 for data), leaving no half-written output behind."""

from __future__ import annotations

import reprlib
from typing import Any

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 60, 60, 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = _SHORT.maxfrozenset = 5


class ConfigError(Exception):
    """Invalid params: the message lists every offending dotted key and how to fix it."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: invalid configuration\n" + "\n".join(f"  {p}" for p in problems))


class InputError(ValueError):
    """Bad input data or an impossible request; the message names the file, line, key or item."""

    exit_code: int = 1
    """The exit code a command ends with on this error: 1, or 2 for input refused outright (a file that
    is not a regular file, JSON nested too deep, an integer too long: `json_input.refused`)."""


def short_repr(value: Any, width: int = 80) -> str:
    """`repr(value)` cut to `width` characters, built from a few elements of each container and the
    first characters of each string only: an error message never formats unbounded input (the repr
    of a YAML alias bomb runs to gigabytes; `f"{value!r:.80}"` builds all of it before cutting)."""
    try:
        text = _SHORT.repr(value)
    except ValueError:  # an int past Python's 4,300-digit conversion limit
        text = f"<{type(value).__name__}>"
    return text if len(text) <= width else text[: width - 3] + "..."


def decode_utf8(raw: bytes, path: Any, error: type[InputError] = InputError) -> str:
    """`raw` (the bytes of `path`) as UTF-8 text; a bad byte fails as `error`, naming the file, the
    line and the byte offset (Python's own UnicodeDecodeError names neither file nor line)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise error(f"{path}: line {line}: not UTF-8 text (byte {e.start}: {e.reason})") from None
