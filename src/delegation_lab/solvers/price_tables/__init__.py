"""Price tables: where a solver's `price: {table, model}` is read from, when params load.

A table is a registered name in `PRICE_TABLES` (a file shipped in this folder, with its upstream
repository, path and commit; SOURCE.md gives licences and sha256) or a path to a file in one of
their layouts (`formats.FORMATS`). `lookup(table, model)` returns the model's prices and a `source`
line naming the table, its file, the upstream commit and the key; a key the table does not hold is
an error listing the keys it does hold, never a price of 0. Adding a table: docs/registries.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from delegation_lab.registry import Registry
from delegation_lab.solvers.price_tables.formats import FORMATS, PriceTableError, TableEntry, detect_format

__all__ = ["PRICE_TABLES", "ModelNotInTable", "PriceTableError", "ShippedTable", "TablePrice", "lookup", "table_models"]


class ModelNotInTable(PriceTableError):
    """A model key the table does not hold; the message lists the keys it does hold."""


@dataclass(frozen=True)
class ShippedTable:
    """A table shipped in this package: its file here, its layout, and where upstream it comes from."""

    file: str
    format: str
    upstream: str | None  # "github.com/<owner>/<repo>@<commit> <path>"; None: this repository's own table

    def path(self) -> Path:
        return Path(str(resources.files(__name__).joinpath(self.file)))


ROUTERARENA = ShippedTable(
    "routerarena_cost.json", "routerarena",
    "github.com/RouteWorks/RouterArena@4714a9ad73e897a1241e73a86c9297fed2e871d8 model_cost/cost.json",
)
LLMROUTER = ShippedTable(
    "llmrouter_default_llm.json", "llmrouter",
    "github.com/ulab-uiuc/LLMRouter@4e7a796942ce26e9d5f2b93191c7c2585c99c2e3 data/example_data/llm_candidates/default_llm.json",
)
PROVIDER = ShippedTable("provider.yaml", "provider", None)  # each entry names its provider page and date

PRICE_TABLES: Registry[ShippedTable] = Registry("price table", "solvers.<name>.price.table")
PRICE_TABLES.register("routerarena", "delegation_lab.solvers.price_tables:ROUTERARENA")
PRICE_TABLES.register("llmrouter", "delegation_lab.solvers.price_tables:LLMROUTER")
PRICE_TABLES.register("provider", "delegation_lab.solvers.price_tables:PROVIDER")


@dataclass(frozen=True)
class TablePrice:
    """A model's prices as a table gives them, with the `source` line recorded on its answers."""

    input_usd_per_mtok: float
    output_usd_per_mtok: float
    source: str


def lookup(table: str, model: str) -> TablePrice:
    """`model`'s prices in `table` (a registered name or a path): ModelNotInTable for a key it does not
    hold, PriceTableError for a table that is neither registered nor a readable file."""
    entries, describe = _open(table)
    entry = entries.get(model)
    if entry is None:
        raise ModelNotInTable(f"{model!r} is not in table {table} (its models: {', '.join(entries)})")
    source = f"{describe}, key {model!r}"
    if entry.url:
        source += f": {entry.url} ({entry.date})"
    return TablePrice(entry.input_usd_per_mtok, entry.output_usd_per_mtok, source)


def table_models(table: str) -> tuple[str, ...]:
    """Every key `table` holds, in file order."""
    return tuple(_open(table)[0])


def _open(table: str) -> tuple[dict[str, TableEntry], str]:
    """The table's entries and how a source line names it."""
    if table in PRICE_TABLES:
        shipped = PRICE_TABLES.get(table)
        entries = _read(str(shipped.path()), shipped.format, *_stamp(shipped.path()))
        origin = f"= {shipped.upstream}" if shipped.upstream else "in this repository"
        return entries, f"price table {table} (delegation_lab/solvers/price_tables/{shipped.file} {origin})"
    file = Path(table)
    if not file.is_file():
        raise PriceTableError(
            f"{table!r} is neither a registered price table ({', '.join(PRICE_TABLES.names())}) nor a file"
        )
    fmt = detect_format(file)
    mtime, size = _stamp(file)
    entries = _read(str(file), fmt, mtime, size)
    sha = hashlib.sha256(file.read_bytes()).hexdigest()
    return entries, f"price table file {table} ({fmt} layout, sha256 {sha})"


def _stamp(file: Path) -> tuple[int, int]:
    stat = file.stat()
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=32)
def _read(file: str, fmt: str, mtime_ns: int, size: int) -> dict[str, TableEntry]:
    # keyed on the file's mtime and size too: an edited table is read again, an unchanged one once per process
    del mtime_ns, size
    return FORMATS[fmt](Path(file))
