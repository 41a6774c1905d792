"""The file layouts a price table can have, each read into {model key: TableEntry}; a file given by
path is recognised by its layout. Every entry is checked: both prices finite and >= 0, a provider
entry with its page and date. A bad entry fails naming the file and the key."""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, field_validator

from delegation_lab.errors import InputError
from delegation_lab.json_input import loads
from delegation_lab.params.model import ParamsModel, UniqueKeyLoader, dotted


class PriceTableError(InputError):
    """A price table that cannot be read, or a key it does not hold; the message names the file or key."""


@dataclass(frozen=True)
class TableEntry:
    """One model's prices in US$ per 1M tokens, and where a provider table read them (else None)."""

    input_usd_per_mtok: float
    output_usd_per_mtok: float
    url: str | None = None
    date: str | None = None


_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


class ProviderEntry(ParamsModel):
    """One model of a `provider` table: its list price, the page it was read from and the date."""

    input_usd_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    """US$ per 1M input tokens."""
    output_usd_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    """US$ per 1M output tokens."""
    url: str
    """The provider's price page the numbers were read from."""
    date: str | datetime.date
    """When the price was in force on that page: YYYY-MM-DD or YYYY-MM."""
    note: str | None = None
    """Anything a reader needs to trust the number (which tier, which snapshot, what corroborates it)."""

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"url must be the provider's page (http:// or https://), got {url!r}")
        return url

    @field_validator("date")
    @classmethod
    def _day_or_month(cls, date: str | datetime.date) -> str:
        text = date.isoformat() if isinstance(date, datetime.date) else date
        if not _DATE.match(text):
            raise ValueError(f"date must be YYYY-MM-DD or YYYY-MM, got {text!r}")
        return text


def _price(value: Any, file: Path, key: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PriceTableError(f"price table {file}: model {key!r}: {field} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise PriceTableError(f"price table {file}: model {key!r}: {field} must be finite and >= 0, got {value!r}")
    return float(value)


def _json_entries(file: Path, input_field: str, output_field: str) -> dict[str, TableEntry]:
    data = _load_json(file)
    out = {}
    for key, entry in data.items():
        if not isinstance(entry, dict) or input_field not in entry or output_field not in entry:
            raise PriceTableError(f"price table {file}: model {key!r} needs {input_field} and {output_field}")
        out[key] = TableEntry(
            _price(entry[input_field], file, key, input_field), _price(entry[output_field], file, key, output_field)
        )
    return out


def read_routerarena(file: Path) -> dict[str, TableEntry]:
    """RouterArena's `model_cost/cost.json`: {model: {input_token_price_per_million, output_token_price_per_million}}."""
    return _json_entries(file, "input_token_price_per_million", "output_token_price_per_million")


def read_llmrouter(file: Path) -> dict[str, TableEntry]:
    """LLMRouter's `llm_candidates/default_llm.json`: {model: {input_price, output_price, ...}}, US$ per 1M tokens."""
    return _json_entries(file, "input_price", "output_price")


def read_provider(file: Path) -> dict[str, TableEntry]:
    """Our own YAML: `models: {model: {input_usd_per_mtok, output_usd_per_mtok, url, date, note}}`."""
    try:
        data = yaml.load(file.read_text(), Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        raise PriceTableError(f"price table {file}: not valid YAML ({e})") from None
    if not isinstance(data, dict) or set(data) != {"models"} or not isinstance(data["models"], dict):
        raise PriceTableError(f"price table {file}: expected one top-level key `models:`, a mapping of model -> entry")
    out = {}
    for key, raw in data["models"].items():
        try:
            entry = ProviderEntry.model_validate(raw)
        except ValidationError as e:
            problems = "; ".join(f"{dotted(err['loc']) or '(entry)'}: {err['msg']}" for err in e.errors())
            raise PriceTableError(f"price table {file}: model {key!r}: {problems}") from None
        out[str(key)] = TableEntry(entry.input_usd_per_mtok, entry.output_usd_per_mtok, entry.url, str(entry.date))
    return out


FORMATS: dict[str, Callable[[Path], dict[str, TableEntry]]] = {
    "routerarena": read_routerarena,
    "llmrouter": read_llmrouter,
    "provider": read_provider,
}
"""Layout name -> reader. The shipped tables are one file each of these layouts."""


def detect_format(file: Path) -> str:
    """The layout of a table given by path: YAML is a provider table; JSON is told by its entries' fields."""
    if file.suffix in (".yaml", ".yml"):
        return "provider"
    if file.suffix != ".json":
        raise PriceTableError(f"price table {file}: not a known layout (a .json from RouterArena or LLMRouter, or a provider .yaml)")
    entries = list(_load_json(file).values())
    first = entries[0] if entries and isinstance(entries[0], dict) else {}
    if "input_token_price_per_million" in first:
        return "routerarena"
    if "input_price" in first:
        return "llmrouter"
    raise PriceTableError(
        f"price table {file}: neither RouterArena's layout (input_token_price_per_million) nor LLMRouter's (input_price)"
    )


def _load_json(file: Path) -> dict[str, Any]:
    try:
        data = loads(file.read_text(), f"price table {file}", PriceTableError, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError) as e:
        if isinstance(e, PriceTableError):
            raise
        raise PriceTableError(f"price table {file}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or not data:
        raise PriceTableError(f"price table {file}: expected a non-empty JSON object of model -> prices")
    return data


def _no_constant(name: str) -> Any:
    # json accepts NaN and Infinity by default: a price must be a plain number
    raise ValueError(f"{name} is not a price")
