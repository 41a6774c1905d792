"""The train choice (frontier/choice.py): the cascade picked on the search split, reported on test
against the strongest single solver, with the goal's cost share."""

from __future__ import annotations

import numpy as np
import polars as pl

from delegation_lab.evaluation import IntervalParams, Verifier
from delegation_lab.frontier.build import build_frontier
from delegation_lab.params.root import FrontierParams

PARAMS = FrontierParams(mixture_points=1, cascade={"seeds": 1})


def answers(n: int, seed: int, split_of_a: float = 0.8) -> pl.DataFrame:
    """S strong and dear, W cheap and right on `split_of_a` of the items S gets right, X cheap and useless."""
    rng = np.random.default_rng(seed)
    strong = rng.random(n) < 0.9
    weak = strong & (rng.random(n) < split_of_a)
    useless = rng.random(n) < 0.05
    rows = []
    for solver, right, price in [("S", strong, 1.0), ("W", weak, 0.05), ("X", useless, 0.01)]:
        rows += [{"item_id": f"{seed}-{k:04d}", "solver": solver, "correct": bool(right[k]), "cost_usd": price} for k in range(n)]
    return pl.DataFrame(rows)


def test_the_cheapest_cascade_within_a_standard_error_on_train_is_reported_on_test():
    train, test = answers(400, 1), answers(300, 2)
    _, metrics = build_frontier(test, pl.DataFrame(), PARAMS, "x", verifier=Verifier("gold"),
                                intervals=IntervalParams(resamples=200), search_labeled=train)
    choice = metrics["train_choice"]["gold"]
    # under a perfect check a cheap start returns S's answer wherever it is wrong: at least S's accuracy, for less
    assert choice["against"] == "always-S" and choice["chosen"] in ("cascade:W>S", "cascade:X>W>S")
    assert choice["search_split"]["accuracy"] >= choice["search_split"]["bar"]
    t = choice["test"]
    assert t["accuracy"] >= t["strongest_single_accuracy"]  # a perfect check never loses S's right answers
    assert 0.2 < t["cost_share"] < 0.5 and choice["meets_goal"] and choice["not_worse"]
    assert t["vs_strongest_single"]["difference"] >= 0


def test_a_noisy_check_that_accepts_wrong_answers_fails_the_goal_on_test():
    train, test = answers(400, 1, 0.5), answers(300, 2, 0.5)
    judge = Verifier("judge", false_positive_rate=0.6, false_negative_rate=0.0)
    _, metrics = build_frontier(test, pl.DataFrame(), PARAMS, "x", verifier=judge,
                                intervals=IntervalParams(resamples=200), search_labeled=train)
    choice = metrics["train_choice"][judge.name]
    # every cascade that starts cheap keeps wrong answers: none is within a standard error of S on train
    assert choice["chosen"] in (None, "cascade:S") or not choice["meets_goal"]
    if choice["chosen"] is None:
        assert "no kept cascade" in choice["note"]


def test_no_search_split_no_choice():
    _, metrics = build_frontier(answers(100, 2), pl.DataFrame(), PARAMS, "x", verifier=Verifier("gold"),
                                intervals=IntervalParams(resamples=200))
    assert "train_choice" not in metrics


def test_the_frontier_table_says_what_was_chosen_on_train_and_whether_it_meets_the_goal():
    from delegation_lab.cli import _frontier_markdown
    from delegation_lab.tracking.compare import markdown_table

    _, metrics = build_frontier(answers(300, 2), pl.DataFrame(), PARAMS, "x", verifier=Verifier("gold"),
                                intervals=IntervalParams(resamples=200), search_labeled=answers(400, 1))
    text = _frontier_markdown({**metrics, "dataset": "x", "split": "test", "n_items": 300},
                              {"single", "cascade", "oracle"}, markdown_table)
    line = next(l for l in text.splitlines() if l.startswith("- under `gold`"))
    assert metrics["train_choice"]["gold"]["chosen"] in line and "against always-S" in line and line.endswith("met")
