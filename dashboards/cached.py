"""What every page shares: the project root, one cached read-only DuckDB connection per state of
the result files, cached query results, and the friendly "no results yet" message."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import streamlit as st

from dashboards import queries
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.store import connect

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
    """Per study, its paper-vs-ours rows; on replayed answers `calibrated` solver rows say they were not fitted."""
    simulated = _run_query(root, stamp, "answers_simulated", {})
    return {study: queries.mark_not_fitted(t, simulated) for study, t in queries.paper_tables(Path(root) / "metrics").items()}


@st.cache_data(max_entries=16, show_spinner=False)
def frontier_summary(root: str, stamp: str) -> dict | None:
    return queries.metrics_json(Path(root) / "metrics" / "frontier.json")


def no_results(p: Project, what: str) -> None:
    st.info(NO_RESULTS.format(root=f"`{p.root}`", what=what), icon=":material/info:")


# ---------------------------------------------------------------------------------------------
# Filters kept in the URL (st.query_params), so a view can be shared by its address


def url_choice(key: str, options: list, default: Any = None, multi: bool = False, cast: Any = str) -> None:
    """Seed the widget state `key` from the URL on first use (else `default`); drop a value the
    options no longer offer. A URL value this project does not offer gets a notice and the default,
    never silently another choice or an empty one. The widget itself is created with `key=key` and
    no default."""
    fallback = default if default in options else (options[0] if options else None)
    if key in st.session_state:
        value = st.session_state[key]
        if multi:  # a list none of whose values is offered any more (another dataset): back to the default
            kept = [v for v in value if v in options]
            st.session_state[key] = kept if kept or not value else [v for v in (default or []) if v in options]
        elif value not in options:
            st.session_state[key] = fallback
        return
    if key not in st.query_params:
        st.session_state[key] = [v for v in (default or []) if v in options] if multi else fallback
        return
    raw = st.query_params.get_all(key) if multi else [st.query_params[key]]
    wanted = [_cast(v, cast) for v in raw]
    unknown = [r for r, v in zip(raw, wanted, strict=True) if v not in options]
    if multi:
        kept = [v for v in wanted if v in options]
        chosen = kept if kept else [v for v in (default or []) if v in options]
    else:
        chosen = fallback if unknown else wanted[0]
    if unknown:
        unknown_note(key, unknown, chosen)
    st.session_state[key] = chosen


def url_value(key: str, default: Any, cast: Any = str, valid: Any = None) -> None:
    """`url_choice` for a free value (a text filter, a number, a slider): seed the widget state `key`
    from the URL on first use, else `default`. A URL value that does not cast, or that `valid` rejects
    (out of the widget's range), gets a notice and the default. The widget is created with `key=key`
    and no default."""
    if key in st.session_state:
        return
    if key not in st.query_params:
        st.session_state[key] = default
        return
    raw = st.query_params[key]
    value = _cast(raw, cast)
    if value is None or (valid is not None and not valid(value)):
        st.warning(f"The address asks for {key} = {url_text(raw)}, which this page cannot show; "
                   f"showing {_shown(default)} instead.", icon=":material/link_off:")
        value = default
    st.session_state[key] = value


def follow_default(key: str, default: Any) -> None:
    """Let the widget state `key` follow a default computed from other widgets (the breakdown's points
    from the highlight and budget): while it still holds the default applied last (the user has not
    changed it), a new default replaces it; once the user picks, the pick stays. Call before
    `url_choice` / `url_value` and the widget."""
    marker = f"_default_of_{key}"
    if key in st.session_state and st.session_state[key] == st.session_state.get(marker):
        st.session_state[key] = default
    st.session_state[marker] = default


def restart_when_changed(key: str, scope: Any) -> None:
    """Forget the widget state `key` (and its URL value) when `scope` (what it pages through) changed
    since the last run: a new filter starts at its first page. The first run keeps the URL's value."""
    marker = f"_scope_of_{key}"
    if marker in st.session_state and st.session_state[marker] != scope:
        st.session_state.pop(key, None)
        st.query_params.pop(key, None)
    st.session_state[marker] = scope


def unknown_note(key: str, unknown: list, shown: Any) -> None:
    """The notice for a URL value the project does not offer (a stale or mistyped link); whatever the
    address holds, it reads as inert text (`url_text`)."""
    listed = ", ".join(url_text(v) for v in unknown[:SHOWN_VALUES])
    if len(unknown) > SHOWN_VALUES:
        listed += f" and {len(unknown) - SHOWN_VALUES:,} more"
    st.warning(f"The address asks for {key} = {listed}, which this project does not have; "
               f"showing {_shown(shown)} instead.", icon=":material/link_off:")


def _shown(value: Any) -> str:
    if isinstance(value, list):
        if not value:
            return "none"
        return ", ".join(url_text(v) for v in value) if len(value) <= SHOWN_VALUES else f"{len(value)} values"
    return url_text(value)


SHOWN_VALUES = 6  # values of one key listed in a notice, the rest counted
URL_TEXT_CHARS = 200  # characters of one value echoed from the address, the rest counted
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def url_text(value: Any, limit: int = URL_TEXT_CHARS) -> str:
    """`value` (from the address, or typed by the user) as Markdown that shows it and does nothing else,
    for st.warning / st.info / st.caption / st.markdown: an inline code span, inside which Markdown,
    HTML, autolinks and Streamlit's colour and icon directives are not interpreted. Its fence is one
    backtick longer than any run of backticks in the value, so no backtick closes it early; control
    characters (a newline would end the span's paragraph) are shown escaped; a value over `limit`
    characters is cut there, with a notice giving its length; an empty one reads (empty)."""
    text = str(value)
    if not text:
        return "(empty)"  # an empty code span cannot be written: two backticks are a fence
    cut = text[:limit]
    cut = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), cut)
    fence = "`" * (max(map(len, re.findall(r"`+", cut)), default=0) + 1)
    # CommonMark strips one space from each end of a span's text when both ends have one: padding lets a
    # value start or end with a backtick, or keep its own spaces at both ends (a span of spaces only is kept)
    pad = " " if cut[0] == "`" or cut[-1] == "`" or (cut[0] == cut[-1] == " " and cut.strip(" ")) else ""
    span = f"{fence}{pad}{cut}{pad}{fence}"
    return span if len(text) <= limit else f"{span} (truncated, {len(text):,} characters)"


def _cast(value: str, cast: Any) -> Any:
    try:
        return cast(value)
    except (TypeError, ValueError):
        return None


def keep_in_url(**values: Any) -> None:
    """Write the page's filters to the URL (a None or empty value removes its key)."""
    for key, value in values.items():
        if value is None or value == []:
            st.query_params.pop(key, None)
        elif isinstance(value, list | tuple):
            st.query_params[key] = [str(v) for v in value]
        else:
            st.query_params[key] = str(value)


def show_chart(fig: Any, key: str, name: str, view: dict[str, Any] | None = None) -> None:
    """st.plotly_chart with the camera button downloading `name`.svg or .png (the sidebar's choice);
    `view` (the choices behind the chart) becomes its title, so the exported image says what it shows."""
    from dashboards.charts import plot_config, title_layout
    from dashboards.view_line import title

    if view is not None:
        heading, top = title_layout(title(view), fig.layout.margin.t or 30)
        fig.update_layout(title=heading, margin={"t": top})
    fmt = st.session_state.get("download_format", "svg")
    export = (fig.layout.meta or {}).get("export_width") if isinstance(fig.layout.meta, dict) else None
    st.plotly_chart(fig, width="stretch", key=key, config=plot_config(name, fmt, export, fig.layout.height))


@dataclass(frozen=True)
class Settings:
    intervals: Any  # evaluation.intervals of params.yaml: the compare page's bootstrap
    ui_url: str  # tracking.ui_url: where MLflow run links point
    tracking: bool = True  # tracking.enabled: false hides the MLflow section (no store to link to)
    ties: Any = None  # evaluation.ties: the compare page's tie tolerances (None: the models' defaults)


@st.cache_data(max_entries=16, show_spinner=False)
def settings(root: str, stamp: str) -> Settings:
    """What the dashboard reads from the project's params.yaml; the models' defaults when the file is
    absent or does not validate (a results folder copied without it)."""
    from delegation_lab.params.root import TrackingParams, load_params
    from delegation_lab.errors import ConfigError
    from delegation_lab.evaluation.params import IntervalParams, TieParams

    try:
        params = load_params(Path(root) / "params.yaml")
        return Settings(params.evaluation.intervals, params.tracking.ui_url, params.tracking.enabled, params.evaluation.ties)
    except (ConfigError, OSError):
        return Settings(IntervalParams(), TrackingParams().ui_url, TrackingParams().enabled, TieParams())


# ---------------------------------------------------------------------------------------------
# Tables as shown and as downloaded


def readable(frame: Any, links: tuple[str, ...] = ()) -> Any:
    """A polars frame for st.dataframe: text cells without a value read `—`, never `None`; a `links`
    column without any link is left out, and in one with some a cell without a link is empty (a
    LinkColumn shows a missing value as `None`, and `—` would be a link; an empty string it leaves
    blank)."""
    import polars as pl

    frame = frame.drop([c for c in links if c in frame.columns and frame[c].null_count() == frame.height])
    text = [c for c, t in frame.schema.items() if t == pl.String and c not in links]
    linked = [c for c in links if c in frame.columns]
    return frame.with_columns([pl.col(c).fill_null("—") for c in text] + [pl.col(c).fill_null("") for c in linked])


def download_name(p: Project, what: str, filters: dict[str, Any]) -> str:
    """`<project>_<what>_<key-value…>.csv`, safe for any file system."""
    parts = [p.root.name, what] + [f"{k}-{_flat(v)}" for k, v in filters.items() if v not in (None, "", [])]
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", "_".join(parts))[:180] + ".csv"


def download_csv(p: Project, frame: Any, what: str, view: dict[str, Any], key: str, named_by: tuple[str, ...] | None = None) -> None:
    """A download button for `frame` as CSV, named by project, table and the `named_by` values of
    the view (all of them when None), whose first line (a `#` comment) records the whole view
    (`dashboards.view_line`)."""
    name = download_name(p, what, view if named_by is None else {k: view.get(k) for k in named_by})
    st.download_button(f"Download {what} (CSV)", csv_text(p, frame, what, view), file_name=name,
                       mime="text/csv", key=key, icon=":material/download:")


def csv_text(p: Project, frame: Any, what: str, view: dict[str, Any]) -> str:
    """The CSV of `frame` under one `#` line naming the table, the project (by folder name, never
    the absolute path) and every value of `view`."""
    from dashboards.view_line import describe, project_name

    return f"# {describe(project_name(p.root), what, view)}\n" + frame.write_csv()


def _flat(value: Any) -> str:
    return "+".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
