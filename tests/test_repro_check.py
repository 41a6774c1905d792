"""`dlab repro check`: a rerun's headline inside the committed interval, or named outside it."""

from delegation_lab.repro_check import compare, flatten


def test_flatten():
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": 3}) == {"a.b": 1, "a.c": [1, 2], "d": 3}


def test_compare_checks_every_value_with_an_interval():
    committed = {
        "methods": {"s/m": {"best_accuracy": 0.8, "accuracy_ci": [0.78, 0.82], "best_accuracy_cost_per_item_usd": 1e-4,
                            "cost_ci": [0.9e-4, 1.1e-4]}},
        "management": {"test_accuracy_mean": 0.9, "test_accuracy_mean_ci": [0.88, 0.92], "note": "x"},
    }
    rerun = {"methods": {"s/m": {"best_accuracy": 0.83, "best_accuracy_cost_per_item_usd": 1.05e-4}},
             "management": {"test_accuracy_mean": 0.905}}
    checks = {c.key: c for c in compare("f.json", committed, rerun)}
    assert set(checks) == {"methods.s/m.best_accuracy", "methods.s/m.best_accuracy_cost_per_item_usd", "management.test_accuracy_mean"}
    assert not checks["methods.s/m.best_accuracy"].inside  # 0.83 is outside [0.78, 0.82]
    assert checks["methods.s/m.best_accuracy_cost_per_item_usd"].inside
    assert checks["management.test_accuracy_mean"].inside
    missing = compare("f.json", committed, {})
    assert all(c.rerun is None and not c.inside for c in missing)
