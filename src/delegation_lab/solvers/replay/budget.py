"""The memory a replay cache import may take, checked before any file is read.

Readers hold a whole file (and the normalised frame) in memory, so a large cache is refused up
front with an estimate rather than discovered by the out-of-memory killer: estimate = the files'
text size (a `.gz` file's uncompressed size from its gzip trailer) x the format's measured
expansion (`CacheFormat.expansion`, peak resident memory over text size). The budget is
`DEFAULT_BUDGET_GB`, or `dlab import --max-memory-gb`, or the `BUDGET_ENV` environment variable
(which the solve and data stages, which replay caches too, also read). See docs/scaling.md.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from delegation_lab.solvers.replay.records import ReplayError

DEFAULT_BUDGET_GB = 2.0
"""Memory a cache import may use by default (GB, 10^9 bytes)."""
BUDGET_ENV = "DLAB_IMPORT_MAX_MEMORY_GB"
"""Environment variable that changes the budget (a positive number of GB)."""


def budget_gb(override: float | None = None) -> float:
    """The budget: `override` (the command line's) if given, else the environment's, else the default."""
    if override is not None:
        return override
    raw = os.environ.get(BUDGET_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_BUDGET_GB
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ReplayError(f"{BUDGET_ENV}={raw[:40]!r}: expected a positive number of GB")
    return value


def text_bytes(path: Path) -> int:
    """The size a file's reader sees: a gzip file's uncompressed size (its trailer's ISIZE, which
    is modulo 4 GiB, hence at least the file's own size), any other file's size."""
    size = path.stat().st_size
    if path.suffix != ".gz" or size < 18:
        return size
    with path.open("rb") as f:
        f.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(f.read(4), "little"))


def check_budget(spec: str, fmt: str, files: list[Path], expansion: float, override: float | None = None) -> None:
    """Refuse a cache whose estimated memory is over the budget, naming the estimate and the fix."""
    limit = budget_gb(override)
    text = sum(text_bytes(p) for p in files)
    estimate = text * expansion
    if estimate > limit * 1e9:
        raise ReplayError(
            f"{spec}: importing this {fmt} cache would take about {estimate / 1e9:.2f} GB of memory "
            f"({len(files)} file(s), {text / 1e6:.1f} MB of text x {expansion:g}, the measured expansion of a {fmt} "
            f"read), over the budget of {limit:g} GB: raise it with --max-memory-gb (dlab import) or {BUDGET_ENV}, "
            "or split the cache into smaller files"
        )
