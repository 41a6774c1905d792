"""metrics/replay_accuracy.json: a replayed solver's accuracy over the items its cache answers."""

from __future__ import annotations

import polars as pl
import pytest

from delegation_lab.labeling.labels import replay_accuracy


def test_accuracy_counts_only_answered_items_and_lists_only_replayed_solvers():
    joined = pl.DataFrame({
        "solver": ["r"] * 4 + ["s"] * 2,
        "model": ["m"] * 4 + ["sim"] * 2,
        "correct": [True, False, False, True, True, False],
        "error": [None, None, "no answer in replay cache x for this question", None, None, None],
    })
    out = replay_accuracy(joined, {"r": "replay", "s": "simulated"})
    assert list(out["solvers"]) == ["r"]
    r = out["solvers"]["r"]
    assert (r["n_items"], r["no_answer_in_cache"], r["model"]) == (3, 1, "m")
    assert r["accuracy"] == pytest.approx(2 / 3, abs=1e-6) and r["accuracy_every_item"] == 0.5
    assert r["accuracy_ci"][0] < 2 / 3 < r["accuracy_ci"][1]
    assert replay_accuracy(joined, {"s": "simulated"})["note"] == "no replayed solvers"
