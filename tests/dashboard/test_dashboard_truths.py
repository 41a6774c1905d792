"""The dashboard's small truths: one p-value formatter, no `None` in a link column, the Portfolio's
best single model named with its split and its cost change arrowed the right way, and the note that
a point, or a study on the Studies page, rests on a verifier no deployment could run."""

from __future__ import annotations

import polars as pl
import pytest

from dashboards.cached import readable
from dashboards.paired import p_value_text, summary_table
from dashboards.portfolio import best_single_label, cost_delta, k_range_text, verifier_note
from dashboards.queries import consults_verifier, study_verifier_notes, verifier_notes

JUDGE = "judge(fp=0.04,fn=0.03)"
SUMMARY = {"verifier": {"name": JUDGE},
           "verifiers": {JUDGE: {"deployable": False, "not_deployable": "simulated verifier: not deployable", "role": "main"}},
           "methods": {"always-A": {"kind": "single"}, "cascade:B>A": {"kind": "cascade"}, "coord/dqn": {"kind": "study"}}}


@pytest.mark.parametrize(("p", "resamples", "text"), [(0.0, 1000, "< 0.001"), (0.0, 2000, "< 0.0005"),
                                                      (0.0123456, 1000, "0.0123"), (1.0, 1000, "1"), (None, 1000, "—")])
def test_a_p_value_reads_alike_everywhere(p: float | None, resamples: int, text: str) -> None:
    assert p_value_text(p, resamples) == text


def test_the_compare_table_shows_its_p_values_through_the_same_formatter() -> None:
    summary = pl.DataFrame({"quantity": ["accuracy", "cost"], "A − B": [0.1, -0.001], "p-value": [0.0, 0.25]})
    assert summary_table(summary, 1000)["p-value"].to_list() == ["< 0.001", "0.25"]


def test_no_link_column_reads_none() -> None:
    frame = pl.DataFrame({"item_id": ["a", "b"], "note": [None, "x"], "follow A": ["?page=1", "?page=2"],
                          "follow B": pl.Series([None, None], dtype=pl.String)})
    shown = readable(frame, links=("follow A", "follow B"))
    assert "follow B" not in shown.columns  # a side without trajectories has no column of `None`s
    assert shown["follow A"].to_list() == ["?page=1", "?page=2"] and shown["note"].to_list() == ["—", "x"]
    partly = readable(frame.with_columns(pl.Series("follow A", ["?page=1", None])), links=("follow A",))
    assert partly["follow A"].to_list() == ["?page=1", ""]  # a cell without a link is blank, not `None`


def test_the_portfolio_names_the_split_its_best_single_was_chosen_on() -> None:
    metrics = {"best_single": {"model": "llama"}, "select_split": "train", "max_k": 5, "solvers": 3}
    assert best_single_label(metrics) == "Best single model: llama (chosen on train)"
    assert k_range_text(metrics) == "k = 1 .. 3 of 3 models"  # capped at the number of models
    assert k_range_text({**metrics, "solvers": 9}) == "k = 1 .. 5 of 9 models"


@pytest.mark.parametrize(("fraction", "starts", "arrow"), [(0.4, "-60%", "down"), (1.5, "+50%", "up"), (1.0, "+0%", "off")])
def test_only_a_cost_increase_gets_an_up_arrow(fraction: float, starts: str, arrow: str) -> None:
    text, got = cost_delta(fraction)
    assert text.startswith(starts) and got == arrow
    assert cost_delta(None) == (None, "off")


def test_a_simulated_verifier_is_named_not_deployable_where_points_rest_on_it() -> None:
    assert verifier_note({"verifier": {"name": JUDGE, "kind": "judge", "deployable": False}}) == "simulated verifier: not deployable"
    assert verifier_note({"verifier": {"name": "agreement", "kind": "agreement", "deployable": True}}) is None
    rows = {"A": {"study": "baselines", "method": "cascade:B>A", "verifier": JUDGE},
            "B": {"study": "baselines", "method": "always-A", "verifier": JUDGE}}
    assert verifier_notes(rows, SUMMARY) == [f"A rests on the verifier `{JUDGE}`: simulated verifier: not deployable — no deployment could run it."]
    rows["B"] = {"study": "coord", "method": "dqn", "verifier": JUDGE}
    assert verifier_notes(rows, SUMMARY)[0].startswith("A and B rest on")
    assert verifier_notes(rows, {**SUMMARY, "verifiers": {JUDGE: {"deployable": True}}}) == []


def test_the_studies_page_says_when_a_study_rests_on_a_simulated_verifier(tmp_path) -> None:
    notes = study_verifier_notes("routers", [JUDGE], SUMMARY)
    assert notes == [f"`routers`'s accept decisions rest on the verifier `{JUDGE}`: simulated verifier: not deployable — its "
                     "curves and rows are what a deployment with that verifier would see, and no deployment could run it."]
    assert study_verifier_notes("routers", ["agreement(a,b)"], SUMMARY) == []  # a verifier the frontier does not mark
    assert study_verifier_notes("margent", [JUDGE], SUMMARY, consulted=False) == []  # its rows carry it, no method asks it
    (tmp_path / "margent.json").write_text('{"verifier": {"name": "j", "used_for_acceptance": false}}')
    (tmp_path / "routers.json").write_text('{"verifier": {"name": "j"}}')
    assert not consults_verifier(tmp_path / "margent.json")
    assert consults_verifier(tmp_path / "routers.json") and consults_verifier(tmp_path / "absent.json")
