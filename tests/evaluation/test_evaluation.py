"""The shared verifier and statistics (src/delegation_lab/evaluation)."""

import json

import numpy as np
import polars as pl
import pytest

from delegation_lab.params.root import parse_params, read_yaml
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation import (
    EvaluationParams,
    ItemBootstrap,
    VerifierParams,
    build_verifier,
    paired_bootstrap,
    seed_interval,
    uniforms,
    wilson_interval,
)
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA
from delegation_lab.pipeline.tables import read_outcomes

ITEMS = [f"item{i}" for i in range(20_000)]


def test_uniforms_are_common_random_numbers():
    a = uniforms("A", ITEMS, 3)
    assert np.array_equal(a, uniforms("A", ITEMS, 3))  # same triple, same number
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.01
    assert not np.array_equal(a, uniforms("B", ITEMS, 3))
    assert not np.array_equal(a, uniforms("A", ITEMS, 4))
    assert abs(np.corrcoef(a, uniforms("A", ITEMS, 4))[0, 1]) < 0.03  # seeds are independent streams


def test_judge_verifier_has_its_rates_and_repeats_verdicts():
    v = build_verifier(VerifierParams(false_positive_rate=0.1, false_negative_rate=0.2))
    right = np.arange(len(ITEMS)) % 2 == 0
    got = v.accepts("A", ITEMS, right, 0)
    assert abs(got[~right].mean() - 0.1) < 0.015  # false positives
    assert abs(1 - got[right].mean() - 0.2) < 0.015  # false negatives
    assert np.array_equal(got, v.accepts("A", ITEMS, right, 0))
    table = v.table(["A", "B"], ITEMS[:50], np.column_stack([right[:50], right[:50]]), [0, 1])
    assert table.shape == (2, 50, 2) and np.array_equal(table[0, :, 0], got[:50])
    assert v.name == "judge(fp=0.1000,fn=0.2000)" and v.source == "configured"


def test_gold_and_cached_verifiers():
    right = np.array([True, False, True])
    assert np.array_equal(build_verifier(VerifierParams(kind="gold")).accepts("A", ITEMS[:3], right, 5), right)
    labels = pl.DataFrame({"solver": ["A"] * 3, "item_id": ITEMS[:3], "judge_verdict": [False, False, True],
                           "judge_model": ["j"] * 3})
    cached = build_verifier(VerifierParams(kind="cached"), labels=labels)
    assert cached.accepts("A", ITEMS[:3], right, 0).tolist() == [False, False, True]
    with pytest.raises(ValueError, match="no judge verdict"):
        cached.accepts("B", ITEMS[:1], right[:1], 0)


def test_measured_rates_come_from_the_label_metrics(tmp_path):
    with pytest.raises(ConfigError, match="evaluation.verifier.rates_from"):
        build_verifier(VerifierParams(), tmp_path)
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "labels.json").write_text(json.dumps({"agreement": {"all": {"judge_fp_rate": 0.04, "judge_fn_rate": 0.03}}}))
    v = build_verifier(VerifierParams(), tmp_path)
    assert (v.false_positive_rate, v.false_negative_rate) == (0.04, 0.03) and v.source.startswith("measured")


def test_bad_evaluation_params_name_the_key():
    raw = read_yaml(__import__("pathlib").Path("params.yaml"))
    raw["evaluation"] = {"verifier": {"kind": "oracle"}}
    with pytest.raises(ConfigError, match="evaluation.verifier.kind"):
        parse_params(raw)
    raw["evaluation"] = {"verifier": {"false_positive_rate": 0.6, "false_negative_rate": 0.5}}
    with pytest.raises(ConfigError, match="evaluation.verifier"):
        parse_params(raw)
    raw["evaluation"] = {"intervals": {"resamplez": 10}}
    with pytest.raises(ConfigError, match="evaluation.intervals.resamplez: unknown key"):
        parse_params(raw)
    assert EvaluationParams().intervals.confidence == 0.95


def test_only_a_verifier_a_deployment_could_run_is_deployable():
    labels = pl.DataFrame({"solver": ["A"], "item_id": ITEMS[:1], "judge_verdict": [True], "judge_model": ["j"]})
    judge = build_verifier(VerifierParams(false_positive_rate=0.1, false_negative_rate=0.1))
    gold = build_verifier(VerifierParams(kind="gold"))
    cached = build_verifier(VerifierParams(kind="cached"), labels=labels)
    assert (judge.deployable, gold.deployable, cached.deployable) == (False, False, True)
    assert judge.not_deployable_reason == "simulated verifier: not deployable"
    assert gold.not_deployable_reason == "gold verifier: upper bound, not deployable"
    assert cached.not_deployable_reason is None
    assert judge.describe()["deployable"] is False and cached.describe()["deployable"] is True
    # (agreement: tests/evaluation/test_agreement_verifier.py)


def compare_problem(verifier: dict, compared: list[dict]) -> str:
    """The whole message params.yaml gets for `evaluation` (ConfigError's lines after its first)."""
    raw = read_yaml(__import__("pathlib").Path("params.yaml"))
    raw["evaluation"] = {"verifier": verifier, "compare_verifiers": compared}
    with pytest.raises(ConfigError) as caught:
        parse_params(raw)
    lines = str(caught.value).splitlines()
    assert len(lines) == 2, lines  # the file, then one line naming the key
    return lines[1].strip()


def test_compared_verifiers_are_checked_naming_the_key():
    vote = {"name": "vote", "kind": "agreement", "models": ["A", "B", "C"], "min_agree": 2}
    judge = {"kind": "judge", "false_positive_rate": 0.1, "false_negative_rate": 0.1}
    assert compare_problem(judge, [vote, {**vote, "min_agree": 3}]) == \
        "evaluation: compare_verifiers: name 'vote' is used twice; each verifier needs its own name"
    assert compare_problem(judge, [{**judge, "name": "same"}]) == \
        "evaluation: compare_verifiers: 'same' is evaluation.verifier itself; compare another verifier"
    assert compare_problem(judge, [{k: v for k, v in vote.items() if k != "name"}]) == \
        "evaluation.compare_verifiers.0.name: required key is missing"
    assert compare_problem(judge, [{**vote, "min_agree": 4}]) == "evaluation.compare_verifiers.0: min_agree 4 is more than the 3 models"
    assert compare_problem(judge, [{**vote, "name": "a vote"}]).startswith("evaluation.compare_verifiers.0.name: String should match")
    raw = read_yaml(__import__("pathlib").Path("params.yaml"))
    raw["evaluation"] = {"verifier": judge, "compare_verifiers": [vote, {"name": "gold", "kind": "gold"}]}
    assert [v.name for v in parse_params(raw).evaluation.compare_verifiers] == ["vote", "gold"]


def test_item_bootstrap_covers_the_truth_and_pairs_methods():
    rng = np.random.default_rng(0)
    hits = 0
    for trial in range(60):
        x = (rng.random(400) < 0.7).astype(float)
        lo, hi = ItemBootstrap(400, resamples=400, seed=trial).interval(x)
        hits += lo <= 0.7 <= hi
    assert hits >= 51  # ~95 % coverage (binomial slack)
    boot = ItemBootstrap(500, resamples=500)
    a = (rng.random(500) < 0.6).astype(float)
    b = a.copy()
    b[:25] = 1 - b[:25]  # differs from a on 25 items only
    seeds = np.stack([a, a, b])
    assert boot.interval(seeds)[0] <= seeds.mean() <= boot.interval(seeds)[1]
    same = paired_bootstrap(boot, a, a)
    assert same["difference"] == 0 and same["ci_low"] == same["ci_high"] == 0 and same["p_value"] == 1.0
    better = a.copy()
    better[a == 0][:0] = 1
    better[np.flatnonzero(a == 0)[:40]] = 1  # 40 more right answers: a clear paired win
    test = paired_bootstrap(boot, better, a)
    assert test["ci_low"] > 0 and test["p_value"] < 0.01
    with pytest.raises(ValueError, match="items"):
        boot.draws(np.zeros(3))


def test_seed_interval_and_wilson():
    got = seed_interval([1.0, 2.0, 3.0])
    assert got["mean"] == 2.0 and got["std"] == 1.0 and got["low"] < 2 - 1.9 and got["high"] > 2 + 1.9  # t, not z
    assert seed_interval([5.0])["low"] == 5.0
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and 0.25 < hi < 0.35


def test_outcomes_table_contract(tmp_path):
    layout = Layout(tmp_path)
    rows = pl.DataFrame({"study": ["s", "s"], "method": ["m", "m"], "operating_point": ["d", "d"], "seed": [0, 0],
                         "split": ["test", "test"], "dataset": ["arith"] * 2, "verifier": ["gold"] * 2,
                         "item_id": ["a", "b"], "correct": [True, False], "cost_usd": [0.1, 0.2]})
    write_outcomes(layout, "s", rows)
    back = read_outcomes(Layout(tmp_path))
    assert back.schema == pl.Schema(OUTCOME_SCHEMA) and back["correct"].to_list() == [1.0, 0.0]
    with pytest.raises(InputError, match="duplicate"):
        write_outcomes(layout, "s", pl.concat([rows, rows]))
    with pytest.raises(InputError, match="other studies"):
        write_outcomes(layout, "t", rows)


def test_unmeasured_rates_say_how_to_configure_them(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "labels.json").write_text(json.dumps({"agreement": {"all": {"judge_fp_rate": None, "judge_fn_rate": None}}}))
    with pytest.raises(ConfigError, match="judged no answer.*false_positive_rate and false_negative_rate"):
        build_verifier(VerifierParams(), tmp_path)
