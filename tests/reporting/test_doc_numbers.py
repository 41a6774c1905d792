"""Every number a doc quotes from metrics/ (an `<!-- m:STUDY:KEY[:FMT] -->VALUE<!-- /m -->` span)
matches the metrics file; `dlab docs numbers` lists stale spans by file:line, --write refreshes."""

import json
from pathlib import Path

from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.reporting.doc_numbers import lookup, problems, refresh, scan

REPO = Path(__file__).resolve().parents[2]


def test_every_doc_number_matches_the_metrics():
    spans = scan(REPO)
    assert problems(spans) == [], "run `dlab docs numbers --write` (or fix the key)"


def _project(tmp_path: Path, doc: str) -> Path:
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "demo.json").write_text(json.dumps(
        {"table1": {"gain_at_1": 90.7123, "rows": [{"acc": 0.5}]}, "label": "ok", "dotted": {"lambda=0.2": 3}}))
    (tmp_path / "docs" / "studies").mkdir(parents=True)
    (tmp_path / "docs" / "studies" / "demo.md").write_text(doc)
    (tmp_path / "README.md").write_text("no spans here\n")
    return tmp_path


def test_stale_spans_are_named_by_file_and_line_and_refreshed(tmp_path):
    doc = ("# Demo\n\nGain@1 <!-- m:demo:table1.gain_at_1:.1f -->91.7<!-- /m --> % and "
           "<!-- m:demo:table1.rows.0.acc:.0% -->50%<!-- /m -->;\n"
           "default <!-- m:demo:table1.gain_at_1 -->1<!-- /m -->, <!-- m:demo:label -->ok<!-- /m -->\n"
           "`<!-- m:STUDY:KEY -->example<!-- /m -->` is code, not a quote\n")
    root = _project(tmp_path, doc)
    result = CliRunner().invoke(app, ["docs", "numbers", "--root", str(root)])
    assert result.exit_code == 1
    assert "docs/studies/demo.md:3: m:demo:table1.gain_at_1: the doc says '91.7', the metrics give '90.7'" in result.output
    assert "docs/studies/demo.md:4: m:demo:table1.gain_at_1: the doc says '1', the metrics give '90.71'" in result.output
    assert "2 of 4 doc numbers" in result.output

    assert CliRunner().invoke(app, ["docs", "numbers", "--root", str(root), "--write"]).exit_code == 0
    text = (root / "docs" / "studies" / "demo.md").read_text()
    assert "-->90.7<!-- /m --> % and" in text and "-->90.71<!-- /m -->, " in text and "`<!-- m:STUDY:KEY -->example" in text
    assert CliRunner().invoke(app, ["docs", "numbers", "--root", str(root)]).exit_code == 0


def test_a_missing_key_is_an_error_naming_file_and_line_and_nothing_is_written(tmp_path):
    doc = "a <!-- m:demo:table1.gain_at_1 -->0<!-- /m -->\nb <!-- m:demo:table1.nope -->0<!-- /m -->\nc <!-- m:absent:x -->1<!-- /m -->\n"
    root = _project(tmp_path, doc)
    found = problems(scan(root))
    assert found[0].startswith("docs/studies/demo.md:1: m:demo:table1.gain_at_1: the doc says '0'")
    assert found[1].startswith("docs/studies/demo.md:2: m:demo:table1.nope: metrics/demo.json has no key 'table1.nope'")
    assert found[2].startswith("docs/studies/demo.md:3: m:absent:x: metrics/absent.json cannot be read")
    result = CliRunner().invoke(app, ["docs", "numbers", "--root", str(root), "--write"])
    assert result.exit_code == 1 and "nothing written" in result.output
    assert (root / "docs" / "studies" / "demo.md").read_text() == doc
    try:
        refresh(root, scan(root))
    except ValueError as e:
        assert "demo.md:2" in str(e)
    else:
        raise AssertionError("refresh wrote despite a missing key")


def test_lookup_takes_keys_that_hold_dots():
    assert lookup({"a": {"lambda=0.2": {"x": 1}}}, "a.lambda=0.2.x") == 1
    assert lookup({"rho": {"0": 5}}, "rho.0") == 5
