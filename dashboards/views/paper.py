"""Paper vs reproduction: every paper figure of metrics/<study>.json beside our measurement."""

import polars as pl
import streamlit as st

from dashboards import charts
from dashboards.cached import no_results, paper_tables, project

p = project()
st.title("Paper vs reproduction")
tables = paper_tables(*p.key)
if not tables:
    no_results(p, "metrics/<study>.json files with paper figures (keys under `paper`)")
    st.stop()

st.caption(
    "A paper's figure sits at the same key path as ours with one extra `paper` segment "
    "(e.g. `management.paper.dqn_map.late_return_mean` beside `management.dqn_map.late_return_mean`). "
    "Difference = ours − paper; bars: relative difference (green within 5 %, red beyond 20 %)."
)
for study, table in tables.items():
    st.subheader(f"{study}  ·  metrics/{study}.json")
    text_columns = [c for c in ("paper (as given)", "ours (as given)") if table[c].null_count() < table.height]
    shown = table.drop(c for c in ("paper (as given)", "ours (as given)") if c not in text_columns)
    st.dataframe(shown, hide_index=True, width="stretch", key=f"paper_table_{study}",
                 column_config={"relative difference %": st.column_config.NumberColumn(format="%+.1f")})
    if table.filter(pl.col("relative difference %").is_not_null()).height:
        st.plotly_chart(charts.paper_figure(table), width="stretch", key=f"paper_chart_{study}")
