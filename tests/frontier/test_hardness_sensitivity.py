"""hardness_weight sets the oracle's accuracy, not the solvers' own (the table in docs/studies/coordinator.md)."""

from __future__ import annotations

import yaml

from delegation_lab.params.root import load_params
from delegation_lab.data.arith import generate
from delegation_lab.coordinator.hardness import hardness_table, markdown

from tests.conftest import REPO


def test_params_yaml_states_every_simulated_solvers_hardness_weight():
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    weights = {name: s["simulated"]["hardness_weight"] for name, s in raw["solvers"].items() if s["backend"] == "simulated"}
    assert weights == {"A": 0.7, "B": 0.7, "C": 0.7}


def test_a_larger_hardness_weight_lowers_the_oracle_not_the_solvers():
    params = load_params(REPO / "params.yaml")
    items = generate(params.data.arith, 1500, params.data.seed)
    table = hardness_table(params, items, (0.0, 0.5, 0.9))
    oracle = table["oracle_accuracy"].to_list()
    assert oracle[0] > oracle[1] > oracle[2]  # more shared hardness, fewer items someone gets right
    for solver in ("A", "B", "C"):
        acc = table[f"accuracy_{solver}"]
        assert acc.max() - acc.min() < 0.03, solver  # the marginal accuracy stays calibrated
        assert (table["oracle_accuracy"] >= acc).all()
    assert markdown(table).count("\n") == 4
