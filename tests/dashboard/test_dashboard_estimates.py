"""The dashboard's per-method summary names the solvers whose estimated hidden reasoning tokens a
method's cost rests on (issue 43), and adds nothing where no cost is estimated."""

from __future__ import annotations

from dashboards import queries


def _summary(estimated: bool) -> dict:
    methods = {"always-o1": {"kind": "single", "aiq": 0.8, "cost_rests_on_estimated_tokens": ["o1"]},
               "always-b": {"kind": "single", "aiq": 0.7}}
    out = {"methods": methods}
    if estimated:
        out["estimated_reasoning_tokens"] = {"o1": {"reasoning_tokens_per_item": 2000, "source": "ESTIMATE: x"}}
    return out


def test_the_methods_table_names_estimated_costs():
    table = queries.frontier_methods_table(_summary(True))
    rows = dict(zip(table["method"], table["cost rests on estimated tokens of"], strict=True))
    assert rows == {"always-o1": "o1", "always-b": None}


def test_no_column_where_nothing_is_estimated():
    assert "cost rests on estimated tokens of" not in queries.frontier_methods_table(_summary(False)).columns
