"""delegation-lab dashboard: `streamlit run dashboards/app.py` (or `dlab dashboard`).

Five pages over the project's results, all read-only through DuckDB views
(delegation_lab.pipeline.store.connect): Frontier, Studies, Trajectories, Compare, Paper vs reproduction.
Filters live in the URL (st.query_params), so a view can be shared by its address. The project
root is `DLAB_ROOT`, else the current working directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:  # `streamlit run` puts only dashboards/ on the path
    sys.path.insert(0, str(_REPO))

import duckdb  # noqa: E402
import streamlit as st  # noqa: E402

from dashboards.bind import refuse_unless_loopback  # noqa: E402
from dashboards.cached import project_root  # noqa: E402

st.set_page_config(page_title="delegation-lab", page_icon=":material/balance:", layout="wide")
refuse_unless_loopback()  # started from another folder, the project's config.toml was not read: every interface

PAGES = [
    st.Page("views/frontier.py", title="Frontier", icon=":material/scatter_plot:", default=True),
    st.Page("views/studies.py", title="Studies", icon=":material/science:", url_path="studies"),
    st.Page("views/trajectories.py", title="Trajectories", icon=":material/manage_search:", url_path="trajectories"),
    st.Page("views/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("views/paper.py", title="Paper vs reproduction", icon=":material/article:", url_path="paper"),
    st.Page("views/portfolio.py", title="Portfolio", icon=":material/stacks:", url_path="portfolio"),
]

page = st.navigation(PAGES)
with st.sidebar:
    st.caption(f"Project root: `{project_root()}`  \n(set `DLAB_ROOT` to look at another one)")
    st.radio("Figure download format", ["svg", "png"], key="download_format", horizontal=True,
             help="What the camera button of every chart saves.")
try:
    page.run()
except (duckdb.Error, OSError) as e:  # a file half-copied by hand, a permission problem: say so, no traceback
    st.error(f"Could not read the project's results under `{project_root()}`: {e}")
