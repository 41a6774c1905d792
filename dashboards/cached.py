"""What every page shares: the project root, one cached read-only DuckDB connection per state of
the result files, cached query results, and the friendly "no results yet" message."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import streamlit as st

from dashboards import queries
from delegation_lab.store import connect
from delegation_lab.tables import Layout

NO_RESULTS = "No results yet — run `dvc repro` in {root} to build {what}, then reload this page."


@dataclass(frozen=True)
class Project:
    root: Path
    stamp: str  # fingerprint of the result files: part of every cache key

    @property
    def key(self) -> tuple[str, str]:
        return str(self.root), self.stamp

    def query(self, name: str, **kwargs: Any) -> Any:
        """Run `queries.<name>(con, **kwargs)` through the cache."""
        return _run_query(str(self.root), self.stamp, name, kwargs)


def project_root() -> Path:
    """`DLAB_ROOT`, else the current working directory."""
    return Path(os.environ.get("DLAB_ROOT") or os.getcwd()).expanduser().resolve()


def project() -> Project:
    root = project_root()
    return Project(root, queries.fingerprint(root))


@st.cache_resource(max_entries=4, show_spinner=False)
def _connection(root: str, stamp: str) -> duckdb.DuckDBPyConnection:
    """Views over the Parquet files as they are now; a new stamp (new results) gets new views."""
    con = connect(Layout(Path(root)))
    con.execute("SET lock_configuration = true")
    return con


@st.cache_data(max_entries=512, show_spinner=False)
def _run_query(root: str, stamp: str, name: str, kwargs: dict[str, Any]) -> Any:
    cursor = _connection(root, stamp).cursor()  # one cursor per query: sessions run in threads
    try:
        return getattr(queries, name)(cursor, **kwargs)
    finally:
        cursor.close()


@st.cache_data(max_entries=16, show_spinner=False)
def paper_tables(root: str, stamp: str) -> dict:
    return queries.paper_tables(Path(root) / "metrics")


@st.cache_data(max_entries=16, show_spinner=False)
def frontier_summary(root: str, stamp: str) -> dict | None:
    return queries.frontier_summary(Path(root) / "metrics" / "frontier.json")


def no_results(p: Project, what: str) -> None:
    st.info(NO_RESULTS.format(root=f"`{p.root}`", what=what), icon=":material/info:")
