"""The one nested-dict flattener: dotted keys, another separator, a prefix, numbers only, skipped
subtrees, tuple paths, pydantic models; and the MLflow metric names built on it."""

from pydantic import BaseModel

from delegation_lab.flatten import flatten, is_number, leaves
from delegation_lab.tracking.tracker import metric_names

TREE = {"a": {"b": 1, "c": [1, 2], "d": {}}, "e": 3.5, "f": True, "g": "text", "paper": {"x": 9}}


def test_dotted_keys_keep_every_leaf_lists_as_values():
    assert flatten(TREE) == {"a.b": 1, "a.c": [1, 2], "e": 3.5, "f": True, "g": "text", "paper.x": 9}


def test_separator_prefix_numbers_only_and_skip():
    got = flatten(TREE, "/", prefix="run/", numbers_only=True, skip={"paper"})
    assert got == {"run/a/b": 1, "run/e": 3.5}  # no bool, list, text, or paper subtree


def test_tuple_paths_and_a_bare_leaf():
    assert dict(leaves({"a": {"b": 1}, 2: "x"})) == {("a", "b"): 1, ("2",): "x"}
    assert flatten(5) == {"": 5}


def test_a_pydantic_model_is_dumped():
    class Inner(BaseModel):
        lr: float = 0.1

    class Outer(BaseModel):
        inner: Inner = Inner()
        seeds: int = 3

    assert flatten(Outer()) == {"inner.lr": 0.1, "seeds": 3}


def test_is_number_refuses_bools():
    assert is_number(1) and is_number(2.5) and not is_number(True) and not is_number("1")


def test_metric_names_replace_what_mlflow_refuses_and_leave_the_paper_out():
    metrics = {"p_sweep": {"p=0.5": {"accuracy": 0.7}}, "fixed_orders": {"A>B": {"cost": 1}},
               "m": {"paper": {"accuracy": 0.9}, "accuracy": 0.8, "note": "x"}}
    assert metric_names(metrics) == {"p_sweep/p_0.5/accuracy": 0.7, "fixed_orders/A_B/cost": 1, "m/accuracy": 0.8}
