"""Paper vs reproduction: every paper figure of metrics/<study>.json beside our measurement, by
provenance (computed / calibrated to the paper / a setting read back)."""

import polars as pl
import streamlit as st

from dashboards import charts, queries
from dashboards.cached import no_results, paper_tables, project, show_chart

p = project()
st.title("Paper vs reproduction")
tables = paper_tables(*p.key)
if not tables:
    no_results(p, "metrics/<study>.json files with paper figures (keys under `paper`)")
    st.stop()

st.caption(
    "A paper's figure sits at the same key path as ours with one extra `paper` segment "
    "(e.g. `management.paper.dqn_map.late_return_mean` beside `management.dqn_map.late_return_mean`). "
    "Difference = ours − paper. Provenance: **computed** — measured by our run; **calibrated** — an input chosen "
    "to match the paper (agreement is by construction); **setting** — a configured value read back; "
    "**paper's value, not fitted** — on a project replaying real answers, a row the default project calibrates "
    "(solver A's accuracy and price) compares these answers with the paper's setting, to which nothing was fitted. "
    "Charted: comparable quantities only (no std, p-values or counts; no zero or worded paper values), "
    "on a symmetric-log axis (linear near 0, logarithmic beyond), so one large difference does not flatten the rest."
)
rows = []
for study, table in tables.items():
    n, m = queries.within_summary(table)
    kinds = table["provenance"].value_counts().sort("provenance")
    rows.append({"study": study, f"computed within {queries.WITHIN:.0f} %": f"{n} of {m}",
                 **{k: c for k, c in kinds.iter_rows()}, "rows": table.height})
st.dataframe(pl.DataFrame(rows), hide_index=True, width="stretch", key="paper_overview")

for study, table in tables.items():
    n, m = queries.within_summary(table)
    st.subheader(f"{study}  ·  metrics/{study}.json  ·  {n} of {m} within {queries.WITHIN:.0f} %")
    numeric = table.filter(pl.col("paper").is_not_null())
    shown = numeric.drop("paper (as given)", "ours (as given)")
    st.dataframe(shown, hide_index=True, width="stretch", key=f"paper_table_{study}",
                 column_config={"relative difference %": st.column_config.NumberColumn(format="%+.1f")})
    if numeric.filter(pl.col("charted")).height:
        show_chart(charts.paper_figure(numeric), f"paper_chart_{study}", f"paper_vs_ours_{study}",
                   view={"paper vs reproduction": f"metrics/{study}.json"})
    worded = table.filter(pl.col("paper").is_null())
    if worded.height:
        st.caption("Worded paper claims (and values that are not a number), with ours beside them:")
        ours = [o if o is not None else (f"{v:.4g}" if v is not None else "—")
                for o, v in worded.select("ours (as given)", "ours").iter_rows()]
        st.dataframe(pl.DataFrame({"metric": worded["metric"], "provenance": worded["provenance"],
                                   "the paper says": worded["paper (as given)"], "ours": ours}),
                     hide_index=True, width="stretch", key=f"paper_worded_{study}")
