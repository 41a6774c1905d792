"""CLI misuse answered with a short error and exit 2, never a traceback (issue 42): calibrate targets
that are not accuracies, frontier-table on a file of another shape, serve's --log-level, and a
params file that is not UTF-8 text or is a folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app

from tests.conftest import REPO


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.output.strip()


@pytest.mark.parametrize("target", ["A=2", "A=nan", "A=abc", "A=0", "A"])
def test_calibrate_refuses_a_target_that_is_not_an_accuracy(target: str):
    out = invoke("calibrate", target, "--params", str(REPO / "params.yaml"))
    assert out.splitlines() == [out] and repr(target) in out and "between 0 and 1" in out


def test_frontier_table_on_an_empty_object(tmp_path: Path):
    for text in ("{}", '{"methods": {"m": {}}}', "[1, 2]"):
        (tmp_path / "f.json").write_text(text)
        out = invoke("frontier-table", str(tmp_path / "f.json"))
        assert out.splitlines() == [out] and "not a frontier metrics file" in out


def test_serve_refuses_an_unknown_log_level_before_starting():
    out = invoke("serve", "--log-level", "bogus")
    assert out == "error: --log-level 'bogus': one of critical, error, warning, info, debug, trace"


def test_params_check_on_a_file_that_is_not_utf8_or_a_folder(tmp_path: Path):
    bad = tmp_path / "params.yaml"
    bad.write_bytes(b"project:\n  name: caf\xe9\n")
    out = invoke("params", "check", "--path", str(bad))
    assert str(bad) in out and "not UTF-8" in out and "Traceback" not in out
    out = invoke("params", "check", "--path", str(tmp_path))
    assert str(tmp_path) in out and "folder" in out
