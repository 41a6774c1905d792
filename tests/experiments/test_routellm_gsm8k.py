"""Real data: RouteLLM's GSM8K answers (Mixtral-8x7B, GPT-4) replayed onto the official GSM8K test
split, their labels against our programmatic relabel, and the answer parsers on real texts.

`pytest -s` prints the relabel summary; it is also written to a temp file (path printed).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from delegation_lab.data import build_items
from delegation_lab.data.items import Item
from delegation_lab.data.params import DataParams, Gsm8kParams
from delegation_lab.parsing import CALC_ANNOTATION, NUMBER, NUMBER_LIST, numbers_match, parse_gsm8k_gold, parse_number_answer
from delegation_lab.solvers.base import Answer, Solver
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.solvers.replay.cache import load_cache

MIX = "mistralai/Mixtral-8x7B-Instruct-v0.1"
GPT = "gpt-4-1106-preview"
# RouteLLM's own labels, measured on gsm8k_responses.csv: 842 / 1319 and 1130 / 1319.
IMPORTED_ACCURACY = {MIX: 63.8, GPT: 85.7}
MIN_AGREEMENT = 0.95


@pytest.fixture(scope="module")
def routellm_csv(shared_data: Path) -> Path:
    path = shared_data / "routellm_gsm8k" / "gsm8k_responses.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


@pytest.fixture(scope="module")
def gsm8k_test_items(shared_data: Path) -> list[Item]:
    params = DataParams(
        dataset="gsm8k", gsm8k=Gsm8kParams(path=str(shared_data / "gsm8k")),
        ability_size=1000, train_size=None, test_size=None,
    )
    return [i for i in build_items(params) if i.split == "test"]


@pytest.fixture(scope="module")
def replayed(routellm_csv: Path, gsm8k_test_items: list[Item]) -> dict[str, list[Answer]]:
    out = {}
    for name, model in (("mixtral", MIX), ("gpt4", GPT)):
        params = SolverParams(
            backend="replay", model=model, price=Price(input_usd_per_mtok=0.0, output_usd_per_mtok=0.0, free=True),
            replay=ReplayParams(path=str(routellm_csv), format="routellm_csv", source_model=model),
        )
        out[model] = Solver(name, params, ReplayBackend(params.replay, params.price)).solve(gsm8k_test_items)
    return out


def imported(answer: Answer) -> bool:
    return json.loads(answer.extra)["imported_correct"]


def test_every_test_item_matches_for_both_models(replayed, gsm8k_test_items):
    assert len(gsm8k_test_items) == 1319
    for model, answers in replayed.items():
        errors = [a.error for a in answers if a.error is not None]
        assert len(answers) == 1319 and not errors, f"{model}: {len(errors)} unmatched, e.g. {errors[:1]}"
        assert all(a.answer_text for a in answers)
        assert all(json.loads(a.extra)["tokens_estimated"] for a in answers)  # the CSV has no token counts
        assert len({a.item_id for a in answers}) == 1319


def test_imported_accuracy_matches_routellm(replayed):
    for model, answers in replayed.items():
        accuracy = 100 * sum(imported(a) for a in answers) / len(answers)
        print(f"{model}: imported accuracy {accuracy:.2f} %")
        assert round(accuracy, 1) == IMPORTED_ACCURACY[model]


# ------------------------------------------------------------------------- relabel agreement


def _last_number_token(text: str) -> str | None:
    found = NUMBER.findall(CALC_ANNOTATION.sub("", text))
    return found[-1] if found else None


def _digit_runs(text: str) -> list[str]:
    return re.findall(r"\d+", text.replace(",", ""))


def categorise(response: str, ours: str | None, gold: str, theirs: bool) -> str:
    """Why our relabel and RouteLLM's label disagree on one answer (ordered rules)."""
    runs = _digit_runs(response)
    last_run = runs[-1] if runs else None
    if theirs:  # they say right, we say wrong
        if ours is not None and abs(float(ours)) == abs(float(gold)):
            return "their label lenient: sign ignored (answer -N, gold N)"
        token = _last_number_token(response) or ""
        if re.search(r"\d\.\d", token) and last_run == gold.lstrip("-"):
            return "their label lenient: decimal point ignored (answer 0.5 / 7.8 read as 5 / 8)"
        if "####" not in response:
            return "no '####': the last number is not the final answer"
        return "other (their label True)"
    # we say right, they say wrong
    if last_run is not None and set(last_run) == {"0"}:
        return "their label strict: cents written out ('7.00', '$20.00' read as 00)"
    if "####" in response and re.search(r"####[^\n]*[A-Za-z%:]", response):
        return "their label strict: text after '####' (units, alternatives, times)"
    return "other (their label False)"


def relabel_summary(replayed: dict[str, list[Answer]], items: dict[str, Item]) -> tuple[str, dict[str, dict]]:
    lines, stats = ["RouteLLM GSM8K labels vs our programmatic relabel (parse_number_answer + numbers_match)"], {}
    for model, answers in replayed.items():
        categories: Counter[str] = Counter()
        examples: dict[str, str] = {}
        agree = their_rule = 0
        for a in answers:
            gold = items[a.item_id].gold
            ours_ok = numbers_match(parse_number_answer(a.answer_text), gold)
            theirs = imported(a)
            runs = _digit_runs(a.answer_text)
            their_rule += (bool(runs) and runs[-1] == gold.lstrip("-")) == theirs
            if ours_ok == theirs:
                agree += 1
                continue
            cat = categorise(a.answer_text, parse_number_answer(a.answer_text), gold, theirs)
            categories[cat] += 1
            examples.setdefault(cat, f"gold {gold}, ours {parse_number_answer(a.answer_text)}: "
                                     f"...{' '.join(a.answer_text[-90:].split())}")
        n = len(answers)
        stats[model] = {"n": n, "agreement": agree / n, "their_rule": their_rule / n, "categories": categories}
        lines += [
            f"\n{model}: agreement {agree}/{n} = {100 * agree / n:.1f} %; {n - agree} disagreements",
            f"  their labels equal 'last run of digits == |gold|' on {their_rule}/{n} answers "
            "(sign, decimal point and cents ignored)",
        ]
        for cat, k in categories.most_common():
            lines += [f"  {k:4d}  {cat}", f"        e.g. {examples[cat]}"]
    return "\n".join(lines), stats


def test_programmatic_relabel_agrees_with_their_labels(replayed, gsm8k_test_items, tmp_path_factory):
    items = {i.item_id: i for i in gsm8k_test_items}
    text, stats = relabel_summary(replayed, items)
    out = tmp_path_factory.mktemp("relabel") / "routellm_gsm8k_relabel.txt"
    out.write_text(text + "\n")
    print("\n" + text + f"\n(summary written to {out})")
    for model, s in stats.items():
        assert s["agreement"] >= MIN_AGREEMENT, f"{model}: agreement {s['agreement']:.3f} < {MIN_AGREEMENT}"
        assert s["their_rule"] >= 0.99  # the explanation of their labels holds
        assert sum(s["categories"].values()) == round(s["n"] * (1 - s["agreement"]))
        assert s["categories"]["other (their label True)"] + s["categories"]["other (their label False)"] <= 5
    # GPT-4 rarely writes '####' and often writes cents: most disagreements are their strict '.00' reading
    assert stats[GPT]["categories"].most_common(1)[0][0].startswith("their label strict: cents")


# ---------------------------------------------------------------------------- parsers on real text


def test_every_gsm8k_test_gold_parses(shared_data):
    rows = [json.loads(line) for line in (shared_data / "gsm8k" / "test.jsonl").read_text().splitlines() if line]
    assert len(rows) == 1319
    golds = [parse_gsm8k_gold(r["answer"]) for r in rows]
    bad = [r["answer"][-60:] for r, g in zip(rows, golds, strict=True) if g is None]
    assert not bad, f"{len(bad)} golds do not parse, e.g. {bad[:2]}"
    assert all(float(g) == float(g) for g in golds)  # numeric strings


def test_parse_number_answer_finds_a_number_in_routellm_responses(routellm_csv):
    frame = load_cache(routellm_csv, "routellm_csv").frame
    for model in (MIX, GPT):
        responses = frame.filter(pl.col("model") == model)["response"].to_list()
        parsed = [parse_number_answer(r or "") for r in responses]
        rate = sum(p is not None for p in parsed) / len(parsed)
        print(f"{model}: a number parsed from {100 * rate:.2f} % of {len(parsed)} responses")
        assert len(parsed) == 1319 and rate >= 0.98
        # a number, or a list kept as a list (`#### 4, 6`: one Mixtral reply), never a list read as a number
        assert all(p is None or NUMBER_LIST.fullmatch(p) or float(p) == float(p) for p in parsed)


# Verbatim RouteLLM responses (gsm8k_responses.csv), with the value each commits to.
REAL_RESPONSES = [
    (MIX,  # calculator annotation, then '#### N'
     " Janet starts with 16 eggs per day.\nShe eats 3 for breakfast, so she has 16 - 3 = 13 eggs left.\n"
     "She uses 4 for baking, so she has 13 - 4 = 9 eggs left.\nShe sells these 9 eggs at the farmers' market "
     "for 9 * $2 = $<<9*2=18>>18.\n#### 18", "18"),
    (MIX,  # thousands separator before '#### N'
     " Jessica pays $300 + $200 + $500 = $<<300+200+500=1000>>1000 per month.\nShe pays 50% more, so she pays "
     "$1000 x 1.5 = $<<1000*1.5=1500>>1500 per month.\nIn a year, she pays $1500 x 12 = $<<1500*12=18000>>18,000."
     "\n#### 18000\n\n", "18000"),
    (MIX,  # annotation with spaces and a rounded decimal result
     " Shawnda made $((5*2)*0.25) + (3*0.25) + (1*0.25) = $<< (5*2)*0.25+(3*0.25)+(1*0.25) = 3.125>>3.13.\n"
     "#### 3.13\n\n", "3.13"),
    (GPT,  # no '####': the last number
     "The robe takes 2 bolts of blue fiber and half that amount of white fiber. So, for the white fiber, it takes "
     "2 / 2 = 1 bolt.\n\nTherefore, in total, it takes 2 bolts of blue fiber + 1 bolt of white fiber = 2 + 1 = 3 "
     "bolts.", "3"),
    (GPT,  # '#### $4.00': dollars and cents (RouteLLM labels this one wrong; gold is 4)
     "Carl buys 10 packs of cookies, with each pack containing 6 cookies, so he buys a total of 10 * 6 = 60 "
     "cookies.\n\nEach cookie costs $0.10, so the total cost for the cookies is 60 * $0.10 = $6.00.\n\nIf Carl "
     "pays with a $10 bill, the change he receives is $10 - $6 = $4.00.\n\n#### $4.00", "4"),
]


@pytest.mark.parametrize(("model", "text", "expected"), REAL_RESPONSES, ids=lambda v: str(v)[:12])
def test_hand_picked_real_responses_parse(model, text, expected, routellm_csv):
    frame = load_cache(routellm_csv, "routellm_csv").frame
    assert text in set(frame.filter(pl.col("model") == model)["response"].to_list())  # really verbatim
    assert parse_number_answer(text) == expected
