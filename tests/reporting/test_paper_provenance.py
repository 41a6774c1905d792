"""Every paper-vs-ours row carries its provenance (computed | calibrated | setting) from the metrics
file's `provenance` block; `dlab report` shows it, --format json emits it, --headline keeps only
computed rows as results; `dlab report --timings` prints the stage timings with their shares."""

import json

import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.errors import InputError
from delegation_lab.reporting.paper import paper_vs_ours, read_all

METRICS = {
    "always_a": {"accuracy": 0.83, "paper": {"accuracy": 0.84}},
    "dqn": {"return": 27.2, "paper": {"return": 27.6}},
    "ablation": {"scale": 0.74, "paper": {"scale": 0.74}},
    "provenance": {
        "always_a.accuracy": {"kind": "calibrated", "why": "the simulated skill was set to give the paper's accuracy"},
        "ablation.scale": {"kind": "setting", "why": "blank_rescue_scale 0.75 read back"},
    },
}


def test_rows_carry_their_provenance():
    rows = {r["metric"]: r for r in paper_vs_ours(METRICS)}
    assert set(rows) == {"always_a.accuracy", "dqn.return", "ablation.scale"}
    assert rows["always_a.accuracy"]["provenance"] == "calibrated" and rows["dqn.return"]["provenance"] == "computed"
    assert rows["ablation.scale"]["why"] == "blank_rescue_scale 0.75 read back"


@pytest.mark.parametrize("block, message", [
    ({"dqn.return": {"kind": "guessed", "why": "x"}}, "metrics/demo.json: provenance['dqn.return']: kind 'guessed' is not one of computed, calibrated, setting"),
    ({"dqn.retrun": {"kind": "setting", "why": "x"}}, "metrics/demo.json: provenance['dqn.retrun']: no paper-vs-ours row or metric has this key"),
    ({"dqn.return": {"kind": "setting"}}, "provenance['dqn.return']: a setting row needs a `why` sentence"),
])
def test_a_bad_provenance_block_names_the_file_and_key(block, message):
    with pytest.raises(InputError) as e:
        paper_vs_ours({**METRICS, "provenance": block}, "metrics/demo.json")
    assert message in str(e.value)


def _metrics_dir(tmp_path, metrics=METRICS):
    (tmp_path / "demo.json").write_text(json.dumps(metrics))
    (tmp_path / "timings").mkdir()
    (tmp_path / "timings" / "embed.json").write_text(json.dumps({"seconds": 10.0, "cpu_seconds": 30.0, "phases": {"encode": 9.0}}))
    (tmp_path / "timings" / "routers.json").write_text(json.dumps({"seconds": 12.0, "cpu_seconds": 10.0, "phases": {}}))
    return tmp_path


def test_report_json_and_markdown_show_the_provenance(tmp_path):
    d = _metrics_dir(tmp_path)
    got = CliRunner().invoke(app, ["report", "--metrics-dir", str(d), "--format", "json"])
    assert got.exit_code == 0
    rows = json.loads(got.output)
    assert {r["provenance"] for r in rows} <= {"computed", "calibrated", "setting"}
    assert {(r["study"], r["key"], r["provenance"]) for r in rows} >= {("demo", "always_a.accuracy", "calibrated"), ("demo", "dqn.return", "computed")}
    assert all({"study", "key", "paper", "ours", "provenance", "difference", "why"} <= set(r) for r in rows)
    md = CliRunner().invoke(app, ["report", "--metrics-dir", str(d)]).output
    assert "| metric | paper | ours | difference | provenance | why |" in md and "| setting | blank_rescue_scale" in md


def test_the_headline_lists_computed_rows_as_results_and_names_the_calibrated_inputs(tmp_path):
    md = CliRunner().invoke(app, ["report", "--metrics-dir", str(_metrics_dir(tmp_path)), "--headline"]).output
    table, _, listed = md.partition("Not results")
    assert "dqn.return" in table and "always_a.accuracy" not in table and "ablation.scale" not in table
    assert "- **demo** — calibrated: `always_a.accuracy`; setting: `ablation.scale`" in listed
    assert "demo `always_a.accuracy` (calibrated): the simulated skill" in listed and "`ablation.scale` (setting)" in listed


def test_a_bad_block_fails_the_report_naming_the_file(tmp_path):
    d = _metrics_dir(tmp_path, {**METRICS, "provenance": {"nope": {"kind": "setting", "why": "x"}}})
    got = CliRunner().invoke(app, ["report", "--metrics-dir", str(d)])
    assert got.exit_code == 1 and "demo.json: provenance['nope']" in got.output
    with pytest.raises(InputError):
        read_all(d)


def test_report_timings_gives_each_stage_its_share_and_the_total(tmp_path):
    got = CliRunner().invoke(app, ["report", "--metrics-dir", str(_metrics_dir(tmp_path)), "--timings"])
    assert got.exit_code == 0
    lines = got.output.splitlines()
    assert lines[2].startswith("| embed | 10.0 | 30.0 | 75.0 % | encode 9.0 |")
    assert "| routers | 12.0 | 10.0 | 25.0 % |" in got.output and "| **total** | 22.0 | 40.0 | 100 % |" in got.output


def test_a_marked_value_without_a_paper_figure_is_a_row_of_its_own():
    metrics = {**METRICS, "setup": {"learning_starts": 1000},
               "provenance": {**METRICS["provenance"], "setup.learning_starts": {"kind": "setting", "why": "our addition"}}}
    rows = {r["metric"]: r for r in paper_vs_ours(metrics)}
    assert rows["setup.learning_starts"] == {"metric": "setup.learning_starts", "paper": None, "ours": 1000,
                                             "difference": None, "provenance": "setting", "why": "our addition"}


def test_the_committed_metrics_have_valid_provenance_and_the_rows_the_issue_names():
    from pathlib import Path

    rows = {(study, r["metric"]): r["provenance"] for study, rs in read_all(Path(__file__).parents[2] / "metrics").items() for r in rs}
    assert rows[("coordinator", "management.always_a.late_accuracy_mean")] == "calibrated"
    assert rows[("margent", "ablation.blank.correction")] == "setting"
    assert set(rows.values()) <= {"computed", "calibrated", "setting"}
