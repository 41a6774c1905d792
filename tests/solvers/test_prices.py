"""Prices with sources: a solver's price read from a named table (or a file in a table's layout) when
params load, a key no table holds refused at params check, explicit prices as before, and the price
source and the token estimate flag on every replayed answer."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from delegation_lab.params.root import ConfigError, load_params, read_yaml
from delegation_lab.solvers import price_tables
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.solvers.price_tables import PRICE_TABLES, PriceTableError, lookup, table_models
from delegation_lab.solvers.pricing import cost_usd, estimate_tokens

from tests.conftest import BIN, REPO, run
from tests.replay.test_replay import MIX, ROUTELLM_ROWS, extra, item, replay_solver, write_routellm_csv

TABLES_DIR = REPO / "src" / "delegation_lab" / "solvers" / "price_tables"
ROUTERARENA_COMMIT = "4714a9ad73e897a1241e73a86c9297fed2e871d8"


def price_error(data: dict) -> tuple[tuple, str]:
    """Where and why `data` is refused as a price."""
    with pytest.raises(ValidationError) as caught:
        Price.model_validate(data)
    (err,) = caught.value.errors()
    return err["loc"], err["msg"]


def params_with_price(tmp_path: Path, price: dict) -> Path:
    """The repository's params.yaml with its first solver priced by `price`."""
    raw = read_yaml(REPO / "params.yaml")
    first = next(iter(raw["solvers"]))
    raw["solvers"][first]["price"] = price
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# ------------------------------------------------------------------------------ table lookups


def test_a_registered_table_fills_both_prices_and_a_source_naming_table_file_commit_and_key():
    price = Price.model_validate({"table": "routerarena", "model": "gpt-4o"})
    assert (price.input_usd_per_mtok, price.output_usd_per_mtok) == (2.5, 10.0)
    for part in ("routerarena", "routerarena_cost.json", "github.com/RouteWorks/RouterArena", ROUTERARENA_COMMIT,
                 "model_cost/cost.json", "key 'gpt-4o'"):
        assert part in price.source
    gemma = Price.model_validate({"table": "llmrouter", "model": "gemma-2-9b-it"})
    assert (gemma.input_usd_per_mtok, gemma.output_usd_per_mtok) == (0.1, 0.1)
    assert "github.com/ulab-uiuc/LLMRouter@4e7a796942ce26e9d5f2b93191c7c2585c99c2e3" in gemma.source
    opus = Price.model_validate({"table": "provider", "model": "claude-3-opus-20240229"})
    assert (opus.input_usd_per_mtok, opus.output_usd_per_mtok) == (15.0, 75.0)
    assert opus.source.endswith("key 'claude-3-opus-20240229': https://www.anthropic.com/pricing (2024-09-24)")
    # a dumped table price validates to itself (params are dumped and read again)
    assert Price.model_validate(price.model_dump()) == price


def test_the_published_tables_are_shipped_byte_for_byte_with_the_sha256_source_md_states():
    source_md = (TABLES_DIR / "SOURCE.md").read_text()
    for name in ("routerarena", "llmrouter"):
        shipped = PRICE_TABLES.get(name)
        digest = hashlib.sha256(shipped.path().read_bytes()).hexdigest()
        row = next(line for line in source_md.splitlines() if line.startswith(f"| `{name}` |"))
        assert row.rstrip(" |").endswith(digest), f"{shipped.file}: sha256 {digest} is not the one in SOURCE.md"
        assert re.search(r"\(`(LICENSE\.\w+)`\)", row) and (TABLES_DIR / re.search(r"\(`(LICENSE\.\w+)`\)", row)[1]).is_file()
    assert len(table_models("routerarena")) == 45 and len(table_models("llmrouter")) == 14


def test_a_model_no_table_holds_fails_params_check_naming_the_key_and_the_table(tmp_path):
    path = params_with_price(tmp_path, {"table": "routerarena", "model": "gpt-4o-2024-05-13"})
    with pytest.raises(ConfigError) as caught:
        load_params(path)
    (problem,) = caught.value.problems
    assert re.match(r"solvers\.\w+\.price\.model: 'gpt-4o-2024-05-13' is not in table routerarena "
                    r"\(its models: gpt-3\.5-turbo, gpt-3\.5-turbo-1106, ", problem), problem
    assert "glm-4-plus" in problem  # every key the table holds, so the right one can be picked
    # the command a user runs: exit 2, one line naming the key
    proc = run([str(BIN / "dlab"), "params", "check", "--path", str(path)], cwd=tmp_path, check=False)
    assert proc.returncode == 2 and ".price.model: 'gpt-4o-2024-05-13' is not in table routerarena" in proc.stderr + proc.stdout


def test_an_unknown_table_and_a_half_given_table_are_refused_naming_the_key():
    loc, msg = price_error({"table": "routerarna", "model": "gpt-4o"})
    assert loc == ("table",) and msg == "'routerarna' is neither a registered price table (routerarena, llmrouter, provider) nor a file"
    loc, msg = price_error({"table": "routerarena"})
    assert loc == ("model",) and "needs `model`" in msg
    loc, msg = price_error({"model": "gpt-4o", "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0})
    assert loc == ("table",) and "set `table` too" in msg


def test_numbers_or_a_source_given_with_a_table_must_be_the_tables():
    loc, msg = price_error({"table": "routerarena", "model": "gpt-4o", "input_usd_per_mtok": 5.0})
    assert loc == ("input_usd_per_mtok",) and "5.0 is not table routerarena's 2.5 for 'gpt-4o'" in msg
    loc, _ = price_error({"table": "routerarena", "model": "gpt-4o", "source": "my own note"})
    assert loc == ("source",)
    same = Price.model_validate({"table": "routerarena", "model": "gpt-4o", "output_usd_per_mtok": 10})
    assert same.output_usd_per_mtok == 10.0


def test_a_stand_in_price_says_so_in_its_source_and_survives_a_dump():
    """A model no table prices may borrow another entry's price only as a declared stand-in."""
    price = Price.model_validate({"table": "routerarena", "model": "meta-llama/Llama-3-70b-chat-hf",
                                  "stand_in": "Athene-70B: a fine-tune of the same Llama-3-70B weights"})
    own = Price.model_validate({"table": "routerarena", "model": "meta-llama/Llama-3-70b-chat-hf"})
    assert (price.input_usd_per_mtok, price.output_usd_per_mtok) == (own.input_usd_per_mtok, own.output_usd_per_mtok)
    assert price.source == f"STAND-IN (Athene-70B: a fine-tune of the same Llama-3-70B weights): {own.source}"
    assert Price.model_validate(price.model_dump()) == price


# ------------------------------------------------------------------------------ tables by path


def test_a_path_to_a_file_in_a_known_layout_is_a_table_named_with_its_sha256(tmp_path):
    arena = tmp_path / "cost.json"
    arena.write_text(json.dumps({"m-1": {"input_token_price_per_million": 1, "output_token_price_per_million": 4}}))
    llmrouter = tmp_path / "llms.json"
    llmrouter.write_text(json.dumps({"m-2": {"input_price": 0.3, "output_price": 0.5, "size": "7B"}}))
    provider = tmp_path / "ours.yaml"
    provider.write_text("models:\n  m-3: {input_usd_per_mtok: 2, output_usd_per_mtok: 6, "
                        "url: https://example.com/pricing, date: 2024-06}\n")
    a = Price.model_validate({"table": str(arena), "model": "m-1"})
    assert (a.input_usd_per_mtok, a.output_usd_per_mtok) == (1.0, 4.0)
    assert a.source == (f"price table file {arena} (routerarena layout, sha256 "
                        f"{hashlib.sha256(arena.read_bytes()).hexdigest()}), key 'm-1'")
    b = Price.model_validate({"table": str(llmrouter), "model": "m-2"})
    assert (b.input_usd_per_mtok, b.output_usd_per_mtok) == (0.3, 0.5) and "llmrouter layout" in b.source
    c = Price.model_validate({"table": str(provider), "model": "m-3"})
    assert c.input_usd_per_mtok == 2.0 and c.source.endswith("key 'm-3': https://example.com/pricing (2024-06)")
    loc, msg = price_error({"table": str(arena), "model": "m-2"})
    assert loc == ("model",) and msg == f"'m-2' is not in table {arena} (its models: m-1)"
    # an edited file is read again, not served from the cache of the first read
    arena.write_text(json.dumps({"m-1": {"input_token_price_per_million": 7, "output_token_price_per_million": 8.5}}))
    assert Price.model_validate({"table": str(arena), "model": "m-1"}).output_usd_per_mtok == 8.5


def test_a_file_in_no_known_layout_is_refused_naming_the_file(tmp_path):
    other = tmp_path / "prices.json"
    other.write_text(json.dumps({"m": {"prompt": 1, "completion": 2}}))
    loc, msg = price_error({"table": str(other), "model": "m"})
    assert loc == ("table",) and msg.startswith(f"price table {other}: neither RouterArena's layout")
    csv = tmp_path / "prices.csv"
    csv.write_text("model,in,out\n")
    assert price_error({"table": str(csv), "model": "m"})[1].startswith(f"price table {csv}: not a known layout")


# ------------------------------------------------------------------------------ the provider table


@pytest.mark.parametrize(("entry", "complaint"), [
    ("{input_usd_per_mtok: 1, output_usd_per_mtok: 2, date: 2024-09-24}", "url: Field required"),
    ("{input_usd_per_mtok: 1, output_usd_per_mtok: 2, url: https://x.example/p}", "date: Field required"),
    ("{input_usd_per_mtok: 1, output_usd_per_mtok: 2, url: x.example/p, date: 2024-09}", "url must be the provider's page"),
    ("{input_usd_per_mtok: 1, output_usd_per_mtok: 2, url: https://x.example/p, date: last year}", "date must be YYYY-MM-DD or YYYY-MM"),
    ("{input_usd_per_mtok: 1, output_usd_per_mtok: 2, url: https://x.example/p, date: 2024-09, price: 3}", "price: Extra inputs"),
])
def test_every_provider_entry_needs_its_page_and_date(tmp_path, entry, complaint):
    path = tmp_path / "provider.yaml"
    path.write_text(f"models:\n  good: {{input_usd_per_mtok: 1, output_usd_per_mtok: 2, url: https://x.example/p, date: 2024-09}}\n"
                    f"  bad: {entry}\n")
    loc, msg = price_error({"table": str(path), "model": "good"})  # one bad entry fails the whole table
    assert loc == ("table",) and msg.startswith(f"price table {path}: model 'bad': ") and complaint in msg


def test_the_shipped_provider_table_cites_a_page_and_a_date_for_every_entry():
    shipped = PRICE_TABLES.get("provider").path()
    entries = yaml.safe_load(shipped.read_text())["models"]
    assert len(entries) == len(table_models("provider")) >= 16
    for key in entries:
        source = lookup("provider", key).source
        assert re.search(rf"key '{re.escape(key)}': https://\S+ \(\d{{4}}-\d{{2}}(-\d{{2}})?\)$", source), source


# ------------------------------------------------------------------------------ explicit numbers


def test_explicit_prices_work_as_before():
    price = Price(input_usd_per_mtok=0.6, output_usd_per_mtok=0.6, source="Together AI list price (together.ai/pricing, 2024)")
    assert (price.input_usd_per_mtok, price.output_usd_per_mtok, price.table, price.model) == (0.6, 0.6, None, None)
    assert price.source == "Together AI list price (together.ai/pricing, 2024)" and not price.free
    assert Price(input_usd_per_mtok=0, output_usd_per_mtok=0).is_zero
    with pytest.raises(ValidationError, match="needs `price.free: true`"):  # a replay solver is never silently free
        SolverParams(backend="replay", model="m", price=Price(input_usd_per_mtok=0, output_usd_per_mtok=0),
                     replay=ReplayParams(path="x.csv", source_model="m"))


@pytest.mark.parametrize("text", [".inf", "-.inf", ".nan", "-0.5"])
def test_a_non_finite_or_negative_price_is_refused(text):
    raw = yaml.safe_load(f"{{input_usd_per_mtok: {text}, output_usd_per_mtok: 1, source: s}}")
    loc, msg = price_error(raw)
    assert loc == ("input_usd_per_mtok",) and ("finite" in msg or "greater than or equal to 0" in msg)


@pytest.mark.parametrize("value", ["Infinity", "NaN", "-1", "\"1\"", "true"])
def test_a_table_entry_that_is_not_a_finite_non_negative_number_fails_naming_file_and_key(tmp_path, value):
    path = tmp_path / "cost.json"
    path.write_text('{"ok": {"input_token_price_per_million": 1, "output_token_price_per_million": 2}, '
                    f'"bad": {{"input_token_price_per_million": {value}, "output_token_price_per_million": 2}}}}')
    with pytest.raises(PriceTableError) as caught:
        lookup(str(path), "ok")
    assert str(caught.value).startswith(f"price table {path}: ")
    assert "model 'bad'" in str(caught.value) or "not valid JSON" in str(caught.value)


# ------------------------------------------------------------------------------ answers carry the source


def test_a_table_price_and_the_token_estimate_flag_reach_every_replayed_answer(tmp_path):
    cache = write_routellm_csv(tmp_path / "routellm.csv", ROUTELLM_ROWS)
    price = Price.model_validate({"table": "routerarena", "model": "mistralai/mixtral-8x7b-instruct"})
    solver = replay_solver(cache, "routellm_csv", MIX, price=price)
    (answer,) = solver.solve([item(ROUTELLM_ROWS[0]["prompt"])])
    assert extra(answer)["price_source"] == price.source and "key 'mistralai/mixtral-8x7b-instruct'" in price.source
    assert extra(answer)["tokens_estimated"] is True  # the CSV has no token counts
    assert answer.tokens_out == estimate_tokens(ROUTELLM_ROWS[0]["mix"])
    assert answer.cost_usd == pytest.approx(cost_usd(answer.tokens_in, answer.tokens_out, price))
    assert answer.cost_usd == pytest.approx((answer.tokens_in + answer.tokens_out) * 0.6 / 1e6)


# ------------------------------------------------------------------------------ the committed price maps


def price_map(name: str) -> dict[str, dict]:
    return yaml.safe_load((REPO / "docs" / "prices" / name).read_text())["models"]


@pytest.mark.parametrize(("name", "models", "priced"), [("price_map_zeroeval.yaml", 42, 33), ("price_map_llmrouter.yaml", 9, 9)])
def test_every_model_of_a_price_map_is_priced_by_a_table_or_says_why_not(name, models, priced):
    entries = price_map(name)
    assert len(entries) == models
    resolved = {model: Price.model_validate(e["price"]) for model, e in entries.items() if "price" in e}
    assert len(resolved) == priced
    for model, entry in entries.items():
        assert ("price" in entry) != ("unpriced" in entry), model
        assert "unpriced" not in entry or len(entry["unpriced"]) > 20, model  # a reason, not a placeholder
        for other in entry.get("also_in", []):
            table, key = other.split(":", 1)
            lookup(table, key)  # a key that exists
        if "nearest" in entry:
            Price.model_validate(entry["nearest"])
    assert all(p.source and not p.is_zero for p in resolved.values())


UNPRICED = [m for m, e in yaml.safe_load((REPO / "docs" / "prices" / "price_map_zeroeval.yaml").read_text())["models"].items()
            if "unpriced" in e]


@pytest.mark.parametrize("model", UNPRICED)
def test_an_unpriced_model_of_the_map_fails_params_check_naming_the_key(tmp_path, model):
    assert len(UNPRICED) == 9
    for table in PRICE_TABLES.names():  # "unpriced" is true: no registered table holds the model's key
        assert model not in table_models(table), f"{model} is in table {table}: price it in the map"
    path = params_with_price(tmp_path, {"table": "provider", "model": model})
    with pytest.raises(ConfigError) as caught:
        load_params(path)
    (problem,) = caught.value.problems
    assert re.match(rf"solvers\.\w+\.price\.model: '{re.escape(model)}' is not in table provider \(its models: ", problem), problem


def test_a_solver_with_no_price_at_all_fails_params_check_naming_its_price_key(tmp_path):
    raw = read_yaml(REPO / "params.yaml")
    first = next(iter(raw["solvers"]))
    del raw["solvers"][first]["price"]  # never priced 0 by default
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(ConfigError) as caught:
        load_params(path)
    assert caught.value.problems == [f"solvers.{first}.price: required key is missing"]


def test_the_price_maps_name_exactly_the_models_of_the_caches(shared_data):
    zeroeval = {p.stem for p in (shared_data / "zeroeval_gsm" / "gsm").glob("*.json")}
    assert set(price_map("price_map_zeroeval.yaml")) == zeroeval and len(zeroeval) == 42
    scores = json.loads((shared_data / "llmrouter" / "data" / "dcrouter_preprocessed" / "test.json").read_text())[0]["scores"]
    assert set(price_map("price_map_llmrouter.yaml")) == set(scores)


def test_price_tables_package_lists_the_registered_names():
    assert PRICE_TABLES.names() == ("routerarena", "llmrouter", "provider")
    assert price_tables.PRICE_TABLES is PRICE_TABLES
