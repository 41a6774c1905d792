"""k chosen by cross-validation on the selection split (`delegation_lab.portfolio.crossval`): a model
that helps on train by chance is added by the greedy train-optimal choice and not by the CV choice;
folds are deterministic and disjoint; each fold's pick is the whole selection rerun without it."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from delegation_lab.errors import ConfigError
from delegation_lab.params.root import PortfolioParams, parse_params, read_yaml
from delegation_lab.portfolio.crossval import CvPoint, assign_folds, one_se_choice
from delegation_lab.portfolio.report import arrangement_label, portfolio_table
from delegation_lab.portfolio.selection import build_portfolio

from tests.conftest import REPO
from tests.portfolio.test_portfolio import GOLD, params, table
from tests.portfolio.test_portfolio_routers import embeddings, with_knn


def lucky_table(n: int = 200, noise_models: int = 20, luck: float = 0.03, seed: int = 7) -> pl.DataFrame:
    """`a` (cost 1) right on ~80 % of items; `n00..` (cost 50 each) right, on train only, on each item
    `a` misses with probability `luck`: the best of them behind `a` gains a few items on train (the
    most of 20 draws), one in 170 on items it was not chosen on, none on test."""
    rng = np.random.default_rng(seed)
    rows = []
    for split in ("train", "test"):
        a_right = rng.random(n) < 0.8
        rows += [{"split": split, "item_id": f"{split}{i:03d}", "solver": "a", "cost_usd": 1.0, "correct": bool(a_right[i])}
                 for i in range(n)]
        for j in range(noise_models):
            lucky = (rng.random(n) < luck) & (split == "train")
            rows += [{"split": split, "item_id": f"{split}{i:03d}", "solver": f"n{j:02d}", "cost_usd": 50.0,
                      "correct": bool(lucky[i] and not a_right[i])} for i in range(n)]
    return pl.DataFrame(rows)


def test_cv_keeps_the_single_where_greedy_adds_a_model_that_helped_on_train_by_chance():
    out = build_portfolio(lucky_table(), params(max_k=3), GOLD)  # seeds 0-9 of lucky_table: CV keeps k = 1 on 9
    cv = out["cross_validation"]
    greedy, chosen = cv["greedy_choice"], cv["cv_choice"]
    assert greedy["k"] > 1 and greedy["select_accuracy"] > out["portfolios"]["1"]["select_accuracy"]  # luck on train
    assert chosen["k"] == 1 and chosen["models"] == ["a"]
    assert greedy["accuracy"] == pytest.approx(chosen["accuracy"])  # no gain on test ...
    assert greedy["cost_per_item_usd"] > 5 * chosen["cost_per_item_usd"]  # ... at several times the cost
    assert cv["better_on_test"] == "cv: as accurate, cheaper"
    assert cv["cv_minus_greedy"]["accuracy"]["difference"] == pytest.approx(0.0)
    assert cv["cv_minus_greedy"]["cost_per_item_usd"]["ci_high"] < 0
    # the held-out gain of k = 2 is what the luck is worth on items it was not chosen on: below one SE
    one, two = cv["curve"]["1"], cv["curve"]["2"]
    assert two["accuracy"] - one["accuracy"] < max(one["se"], two["se"]) and one["within_one_se"]
    assert "cv choice: k=1 single: a" in portfolio_table(out) and "greedy choice: k=" in portfolio_table(out)


def test_a_model_penalty_can_only_lower_the_chosen_k():
    chosen = {pen: build_portfolio(table(), params(model_penalty=pen), GOLD)["cross_validation"]["cv_choice"]["k"]
              for pen in (0.0, 0.5)}
    assert chosen[0.0] == 2  # a > b is right everywhere, every single on at most 16 of 20
    assert chosen[0.5] == 1  # half a point of accuracy per added model: a > b's gain does not pay for b


def point(k: int, right_of_100: int, cost: float) -> CvPoint:
    right = np.arange(100) < right_of_100
    return CvPoint(k, right * 1.0, np.full(100, cost), np.arange(100) % 5, [f"pick {k}"] * 5)


def test_one_se_rule_takes_the_fewest_models_within_one_standard_error_over_items():
    curve = [point(1, 70, 1.0), point(2, 84, 3.0), point(3, 85, 0.5)]
    k, threshold = one_se_choice(curve, 0.0)
    assert curve[2].se == pytest.approx(np.sqrt(0.85 * 0.15 * 100 / 99) / 10)
    assert threshold == pytest.approx(0.85 - curve[2].se)  # 0.814
    assert k == 2  # 1 is outside; 2 the fewest models inside, dearer than 3 notwithstanding
    assert one_se_choice(curve, 0.15)[0] == 1  # scores 0.70, 0.69, 0.55: the penalty makes 1 the best
    assert one_se_choice([point(1, 50, 1.0), point(2, 50, 1.0)], 0.0)[0] == 1  # equal: the fewer
    assert curve[0].by_fold(curve[0].right) == [0.7] * 5


def test_folds_are_deterministic_disjoint_and_balanced():
    ids = [f"q{i:03d}" for i in range(53)]
    folds = assign_folds(ids, 5)
    assert sorted(np.bincount(folds).tolist()) == [10, 10, 11, 11, 11]  # every item in exactly one fold, sizes within one
    shuffled = list(np.random.default_rng(0).permutation(ids))
    again = dict(zip(shuffled, assign_folds(shuffled, 5).tolist(), strict=True))
    assert again == dict(zip(ids, folds.tolist(), strict=True))  # the same items in any order: the same folds
    assert folds.tolist() != (np.arange(53) % 5).tolist()  # by hash, not by position
    assert assign_folds(ids, 2).tolist() == assign_folds(ids, 2).tolist()


@pytest.mark.parametrize("router", [None, "knn"])
def test_each_fold_is_the_selection_rerun_without_it_and_scored_on_it(router):
    """Fold f's row of the curve is what `build_portfolio` gives with the other folds as the selection
    split and fold f as the reported one: the same pick per k, the same accuracy and cost."""
    p = with_knn(params(), router=router)
    out = build_portfolio(table(), p, GOLD, embeddings())
    train = table().filter(pl.col("split") == "train")
    ids = sorted(train["item_id"].unique().to_list())
    fold = pl.DataFrame({"item_id": ids, "fold": assign_folds(ids, 5)})
    for f in range(5):
        as_split = train.join(fold, on="item_id").with_columns(
            split=pl.when(pl.col("fold") == f).then(pl.lit("test")).otherwise(pl.lit("train"))).drop("fold")
        rerun = build_portfolio(as_split, p, GOLD, embeddings())["portfolios"]
        for k, c in out["cross_validation"]["curve"].items():
            assert c["fold_picks"][f] == arrangement_label(rerun[k]), (f, k)
            assert c["fold_accuracy"][f] == pytest.approx(rerun[k]["accuracy"])
            assert c["fold_cost_per_item_usd"][f] == pytest.approx(rerun[k]["cost_per_item_usd"])


def test_cv_params_are_validated_with_the_key_named():
    raw = read_yaml(REPO / "params.yaml")
    for overlay, message in (({"cv_folds": 1}, "portfolio.cv_folds"), ({"model_penalty": -0.1}, "portfolio.model_penalty"),
                             ({"cv_folds": 1_000_000}, "portfolio.cv_folds 1000000 > the ")):
        with pytest.raises(ConfigError) as refused:
            parse_params({**raw, "portfolio": overlay})
        assert any(message in line for line in refused.value.problems), refused.value.problems
    with pytest.raises(ConfigError, match="portfolio.cv_folds: 21 folds of split 'train', which has 20 items"):
        build_portfolio(table(), params().model_copy(update={"portfolio": PortfolioParams(max_k=3, cv_folds=21)}), GOLD)
