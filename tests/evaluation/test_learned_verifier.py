"""The `learned` verifier (evaluation.learned): fitted on the train split's answers only, calibrated,
its FP / FN measured per split, priced as agreement, deterministic, and its params checked."""

import json
import shutil

import numpy as np
import polars as pl
import pytest

from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation import VERIFIERS, VerifierParams, build_verifier, error_rates
from delegation_lab.evaluation.learned import AnswerScorer, answer_features, from_answers, question_embeddings
from delegation_lab.params.root import parse_params, read_yaml
from delegation_lab.pipeline.layout import Layout

from tests.conftest import REPO

SOLVERS = ["cheap", "mid", "ref1", "ref2"]
SKILL = {"cheap": 0.45, "mid": 0.7, "ref1": 0.85, "ref2": 0.8}
COST = {"cheap": 1e-5, "mid": 1e-4, "ref1": 1e-3, "ref2": 5e-4}


def answers_table(n: int = 200, seed: int = 0) -> pl.DataFrame:
    """Numeric items (gold = 100 + i); a right answer is gold, a wrong one a near miss that other wrong
    answers share half the time (so agreement is informative but not gold); wrong replies run longer."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        gold, split = str(100 + i), "train" if i < n // 2 else "test"
        for s in SOLVERS:
            right = rng.random() < SKILL[s]
            parsed = gold if right else str(100 + i + (1 if rng.random() < 0.5 else int(rng.integers(2, 50))))
            rows.append({"solver": s, "item_id": f"q{i:03d}", "correct": right, "parsed_answer": parsed,
                         "answer_text": "x" * int(rng.integers(100, 200) * (1 if right else 2)) + f" answer {parsed}",
                         "error": None, "tokens_out": int(rng.integers(50, 100)), "cost_usd": COST[s] * rng.uniform(0.9, 1.1),
                         "extra": json.dumps({}), "split": split, "gold": gold, "choices": None, "answer_format": None})
    return pl.DataFrame(rows, schema_overrides={"choices": pl.List(pl.String)})


def learned(answers: pl.DataFrame | None = None, **params):
    return from_answers(VerifierParams(kind="learned", models=["ref1", "ref2"], **params),
                        answers_table() if answers is None else answers)


def accepted(v, answers: pl.DataFrame) -> np.ndarray:
    return v.accepts(answers["solver"].to_numpy(), answers["item_id"].to_numpy(), np.zeros(answers.height, bool), 0)


def test_verdicts_are_fitted_on_the_train_split_only():
    table = answers_table()
    poisoned = table.with_columns(pl.when(pl.col("split") == "test").then(~pl.col("correct")).otherwise(pl.col("correct")).alias("correct"))
    v, w = learned(table), learned(poisoned)
    assert np.array_equal(accepted(v, table), accepted(w, table))
    # the control: the same flip on train answers moves the verdicts
    leaked = table.with_columns(pl.when(pl.col("split") == "train").then(~pl.col("correct")).otherwise(pl.col("correct")).alias("correct"))
    assert not np.array_equal(accepted(v, table), accepted(learned(leaked), table))
    # and the rates it reports on test are measured against the labels it was given
    assert v.describe()["measured"]["test"]["all"] != w.describe()["measured"]["test"]["all"]


def test_verdicts_repeat_and_follow_agreement_and_threshold():
    table = answers_table()
    v = learned(table)
    assert v.verdicts == learned(table).verdicts  # a pure function of params and data
    assert v.name == "learned(ref1,ref2;p>=0.5)" and v.kind == "learned" and v.deployable
    # every seed sees the same verdicts
    assert np.array_equal(v.accepts("cheap", ["q150"], np.ones(1, bool), 3), v.accepts("cheap", ["q150"], np.zeros(1, bool), 0))
    everyone, no_one = learned(table, threshold=0.0), learned(table, threshold=1.0)
    assert accepted(everyone, table).all() and not accepted(no_one, table).any()
    loose, strict = accepted(learned(table, threshold=0.3), table), accepted(learned(table, threshold=0.8), table)
    assert (strict <= loose).all() and strict.sum() < loose.sum()


def test_its_probabilities_are_calibrated_and_beat_the_base_rate_on_test():
    v = learned(answers_table(n=600))
    test = v.describe()["calibration"]["test"]
    y = answers_table(n=600).filter(pl.col("split") == "test")["correct"].to_numpy()
    assert test["answers"] == y.size
    assert test["ece"] < 0.05
    assert test["brier"] < 0.8 * y.mean() * (1 - y.mean())  # better than predicting the base rate


def test_scorer_reproduces_sklearns_calibrated_probabilities():
    """`AnswerScorer.predict` computes from the saved arrays what CalibratedClassifierCV.predict_proba gives."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    table = answers_table()
    items = table["item_id"].unique().sort().to_list()
    features = answer_features(table, items, SOLVERS, ("ref1", "ref2"))
    correct = table.pivot(on="solver", index="item_id", values="correct").sort("item_id").select(SOLVERS).to_numpy()
    present = np.ones(correct.shape, bool)
    scorer = AnswerScorer().fit(features, None, correct, present)
    x = scorer.design(features, None).reshape(-1, scorer.design(features, None).shape[2])
    groups = np.repeat(np.arange(len(items)), len(SOLVERS))
    folds = list(GroupKFold(5).split(x, correct.ravel(), groups))
    reference = CalibratedClassifierCV(make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)), method="sigmoid",
                                       cv=folds, ensemble=False).fit(x, correct.ravel())
    assert np.allclose(scorer.predict(features, None).ravel(), reference.predict_proba(x)[:, 1], atol=1e-9)
    assert np.array_equal(AnswerScorer.from_arrays(scorer.arrays()).predict(features, None), scorer.predict(features, None))


def test_agreement_features_are_the_agreement_verifiers_comparisons():
    table = answers_table(n=20)
    items = table["item_id"].unique().sort().to_list()
    f = answer_features(table, items, SOLVERS, ("ref1", "ref2"))
    parsed = {(r["solver"], r["item_id"]): r["parsed_answer"] for r in table.iter_rows(named=True)}
    for i, item in enumerate(items):
        for j, s in enumerate(SOLVERS):
            for k, m in enumerate(("ref1", "ref2")):
                expected = 0 if m == s else (1 if parsed[(s, item)] == parsed[(m, item)] else -1)
                assert f.agree[i, j, k] == expected, (item, s, m)
    assert (f.own[..., 0] == 1).all() and (f.own[..., 3] == 1).all()  # a final answer, tokens known


def test_fp_and_fn_are_measured_per_split_and_test_is_the_headline():
    table = answers_table()
    v = learned(table)
    d = v.describe()
    for split in ("train", "test"):
        assert d["measured"][split] == error_rates(v, table.filter(pl.col("split") == split))
    assert d["false_positive_rate"] == d["measured"]["test"]["all"]["false_positive_rate"] and d["rates_split"] == "test"
    assert d["threshold"] == 0.5 and "agrees_with:ref1" in d["features"] and "solver:cheap" in d["features"]
    assert "sigmoid" in d["calibration_method"] and "min_agree" not in d


def test_its_checks_are_paid_like_agreement():
    table = answers_table(n=20)
    v = learned(table)
    costs = v.check_costs("cheap", ["q001", "q002"])
    assert set(costs) == {"ref1", "ref2"}
    ref1 = dict(table.filter(pl.col("solver") == "ref1").select("item_id", "cost_usd").iter_rows())
    assert costs["ref1"].tolist() == [ref1["q001"], ref1["q002"]]
    assert set(v.check_costs("ref1", ["q001"])) == {"ref2"}  # a model is not its own witness


def test_the_question_embedding_adds_principal_components_fitted_on_train():
    table = answers_table()
    items = table["item_id"].unique().sort().to_list()
    rng = np.random.default_rng(1)
    emb = pl.DataFrame({"item_id": items, "vector": rng.normal(size=(len(items), 16)).tolist()})
    v = from_answers(VerifierParams(kind="learned", models=["ref1"], question_embedding=True, embedding_dims=3), table,
                     embeddings=emb)
    assert [f for f in v.features if f.startswith("question_pc")] == ["question_pc1", "question_pc2", "question_pc3"]
    with pytest.raises(ConfigError, match=r"question_embedding: 1 train / test items have no embedding"):
        from_answers(VerifierParams(kind="learned", models=["ref1"], question_embedding=True), table, embeddings=emb[1:])
    # the embed stage leaves the ability bank out: its answers are still judged
    ability = table.with_columns(pl.when(pl.col("item_id") == items[0]).then(pl.lit("ability")).otherwise(pl.col("split")).alias("split"))
    v = from_answers(VerifierParams(kind="learned", models=["ref1"], question_embedding=True), ability, embeddings=emb[1:])
    assert ("cheap", items[0]) in v.verdicts and "ability" in v.describe()["measured"]


def test_a_missing_embeddings_table_names_the_embed_stage(tmp_path):
    with pytest.raises(ConfigError, match=r"evaluation\.verifier\.question_embedding: .*embed"):
        question_embeddings(tmp_path)


@pytest.mark.parametrize(("verifier", "complaint"), [
    ({"kind": "learned"}, r"evaluation\.verifier: .*kind learned needs `models`"),
    ({"kind": "learned", "models": ["A"], "threshold": 1.5}, r"evaluation\.verifier\.threshold: .*less than or equal to 1"),
    ({"kind": "learned", "models": ["A"], "threshold": -0.1}, r"evaluation\.verifier\.threshold: .*greater than or equal to 0"),
    ({"kind": "agreement", "models": ["A"], "threshold": 0.7}, r"evaluation\.verifier: .*threshold: for kind learned"),
    ({"kind": "judge", "question_embedding": True}, r"evaluation\.verifier: .*question_embedding: for kind learned"),
])
def test_bad_params_fail_in_one_line_naming_the_key(verifier, complaint):
    raw = read_yaml(REPO / "params.yaml")
    raw["evaluation"] = {"verifier": verifier}
    with pytest.raises(ConfigError, match=complaint) as e:
        parse_params(raw)
    assert len(str(e.value).strip().splitlines()) == 2  # the file, then one problem


def test_an_unknown_model_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"evaluation\.verifier\.models: nobody not among the solvers"):
        from_answers(VerifierParams(kind="learned", models=["nobody"]), answers_table(n=20))


def test_one_class_of_training_answers_is_refused():
    table = answers_table(n=20).with_columns(pl.lit(True).alias("correct"))
    with pytest.raises(InputError, match="all 20 training answers are right"):
        from_answers(VerifierParams(kind="learned", models=["ref1"]), table.filter(pl.col("solver").is_in(["cheap", "ref1"])))


def test_the_registered_builder_reads_the_project(tmp_path):
    assert VERIFIERS.get("learned").__name__ == "learned_verifier"
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    layout = Layout(tmp_path)
    table = answers_table(n=60)
    layout.answers_dir.mkdir(parents=True)
    for (solver,), part in table.group_by("solver"):
        part.select("solver", "item_id", "parsed_answer", "answer_text", "error", "tokens_out", "cost_usd", "extra").with_columns(
            request_hash=pl.lit("h")).write_parquet(layout.answers(solver))
    table.select("solver", "item_id", "correct").with_columns(request_hash=pl.lit("h")).write_parquet(layout.labels)
    layout.items_dir.mkdir()
    items = table.filter(pl.col("solver") == "cheap").select("item_id", "split", "gold", "choices")
    for split in ("ability", "train", "test"):
        items.filter(pl.col("split") == split).write_parquet(layout.items(split))
    v = build_verifier(VerifierParams(kind="learned", models=["ref1", "ref2"]), tmp_path)
    assert v.verdicts == learned(table).verdicts
