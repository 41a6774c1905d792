"""The committed frontier tables (docs/frontier.md for the default project, experiments/<name>/frontier.md)
are `dlab frontier-table` of the committed metrics/frontier.json: regenerating the metrics without the
table fails here instead of leaving a stale table for a reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app

REPO = Path(__file__).resolve().parents[2]
TABLES = {"default": (REPO / "metrics" / "frontier.json", REPO / "docs" / "frontier.md")}
TABLES |= {p.parent.name: (p.parent / "metrics" / "frontier.json", p) for p in sorted(REPO.glob("experiments/*/frontier.md"))}


@pytest.mark.parametrize("project", sorted(TABLES))
def test_the_committed_frontier_table_is_current(project: str) -> None:
    metrics, table = TABLES[project]
    out = CliRunner().invoke(app, ["frontier-table", str(metrics)])
    assert out.exit_code == 0, out.output
    assert out.output == table.read_text(), f"{table.relative_to(REPO)} is stale: `dlab frontier-table {metrics.relative_to(REPO)} > {table.relative_to(REPO)}`"
