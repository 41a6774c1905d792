"""JSON from outside (replay caches, dataset files, price tables, model replies) decoded so that every
way it can defeat the decoder is one line naming where, never a traceback: nesting deeper than the
decoder's recursion allows (a 100k-deep `[[[...` raised RecursionError) is refused with its depth, and
an integer past Python's 4,300-digit conversion limit with its line. Plus `regular_file`: a path is
checked to be a regular file before it is opened, since opening a FIFO waits for a writer forever and
reading /dev/zero never ends.

Refusals carry `exit_code` 2 (a command prints them as one line and exits 2). A decode error of
ordinary bad JSON is left to the caller (`json.JSONDecodeError`), which names its line its own way."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from delegation_lab.errors import InputError

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
_LONG_INT = re.compile(r"-?\d{4301,}")


def refused(error: type[InputError], message: str) -> InputError:
    """`error(message)` marked as input refused outright (exit 2)."""
    exc = error(message)
    exc.exit_code = 2
    return exc


def json_depth(text: str, start: int = 0) -> int:
    """The deepest nesting of `[` / `{` in JSON text from `start`, brackets inside strings not counted;
    one linear scan (the decoder, failing, says nothing of where or how deep)."""
    depth = deepest = 0
    for m in _TOKENS.finditer(text, start):
        token = m.group(0)
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
            if depth <= 0 and start:
                break  # the value that began at `start` is closed
    return deepest


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _refusal(e: Exception, text: str, start: int, where: str, error: type[InputError]) -> InputError | None:
    """The one-line refusal for a decoder failure that is not ordinary bad JSON, else None."""
    if isinstance(e, RecursionError):
        return refused(error, f"{where}: JSON nested {json_depth(text, start)} levels deep, deeper than can be read "
                              f"(about {sys.getrecursionlimit()} levels at most)")
    if isinstance(e, ValueError) and not isinstance(e, json.JSONDecodeError) and "integer string conversion" in str(e):
        m = _LONG_INT.search(text, start)
        line = f"line {_line_of(text, m.start())}: " if m else ""
        digits = len(m.group(0).lstrip("-")) if m else "more than 4300"
        return refused(error, f"{where}: {line}an integer of {digits} digits (at most {sys.get_int_max_str_digits()} "
                              "can be read)")
    return None


def loads(text: str, where: str, error: type[InputError] = InputError, **kwargs: Any) -> Any:
    """`json.loads(text, **kwargs)`; too deep a nesting or too long an integer is `error`, naming `where`
    (a file, or a file and line) and the depth or digits, with exit code 2."""
    try:
        return json.loads(text, **kwargs)
    except (RecursionError, ValueError) as e:
        refusal = _refusal(e, text, 0, where, error)
        if refusal is None:
            raise
        raise refusal from None


def raw_decode(decoder: json.JSONDecoder, text: str, start: int, where: str,
               error: type[InputError] = InputError) -> tuple[Any, int]:
    """`decoder.raw_decode(text, start)` with the refusals of `loads`."""
    try:
        return decoder.raw_decode(text, start)
    except (RecursionError, ValueError) as e:
        refusal = _refusal(e, text, start, where, error)
        if refusal is None:
            raise
        raise refusal from None


def regular_file(path: Path | str, error: type[InputError] = InputError) -> Path:
    """`path`, checked with stat before anything opens it: a missing file, a folder, a FIFO or a device is
    `error` naming it, with exit code 2 for what is not a regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror or e})") from None
    if not stat.S_ISREG(mode):
        kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "not a regular file")
        raise refused(error, f"{path}: {kind}, not a regular file; name a file")
    return Path(path)
