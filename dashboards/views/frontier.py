"""Frontier: cost per item vs accuracy of every method, with filters, the Pareto front and the oracle."""

import polars as pl
import streamlit as st

from dashboards import charts, queries
from dashboards.cached import frontier_summary, no_results, project

p = project()
st.title("Cost–accuracy frontier")
options = p.query("frontier_options")

if not options["study"]:
    no_results(p, "the frontier (results/frontier.parquet)")
    st.stop()

left, middle, right = st.columns(3)
datasets = left.multiselect("Dataset", options["dataset"], default=options["dataset"])
solver_sets = middle.multiselect("Solver set", options["solver_set"], default=options["solver_set"])
studies = right.multiselect("Study", options["study"], default=options["study"])

points = p.query("frontier_points", datasets=datasets, solver_sets=solver_sets, studies=studies)
if points.is_empty():
    st.warning("No frontier point matches these filters.")
    st.stop()

oracle = points.filter(pl.col("kind") == "oracle")
a, b, c, d = st.columns(4)
a.metric("Points shown", points.height)
b.metric("On the Pareto front", int(points["on_pareto"].sum()))
if oracle.height:
    c.metric("Oracle accuracy", f"{oracle['accuracy'][0]:.2%}")
    d.metric("Oracle cost per item", f"${oracle['cost_per_item_usd'][0]:.3g}")

st.plotly_chart(charts.frontier_figure(points), width="stretch", key="frontier_chart")
zero_cost = points.filter(pl.col("cost_per_item_usd") <= 0).height
st.caption(
    "Markers: ■ always one solver, ▲ cascade, ● study (small ● random mixtures), ★ oracle — the cheapest "
    "correct solver per item, an upper bound no router reaches. Error bars: ± 1 std over seeds. "
    "Dashed step line: the Pareto front (oracle excluded). Hover a point for its operating point, "
    "seeds and MLflow runs."
    + (f" {zero_cost} point(s) with zero cost cannot be drawn on the log axis." if zero_cost else "")
)

summary = frontier_summary(*p.key)
if summary:
    st.subheader("Summary per method")
    keys = {queries.frontier_key(s, m) for s, m in points.select("study", "method").iter_rows()}
    table = queries.frontier_methods_table(summary, keys)
    interval = summary.get("cost_interval_usd") or [None, None]
    st.caption(
        f"AIQ: mean accuracy of the method's concave hull over the cost interval of the single solvers "
        f"(RouterBench). APGR / CPT: RouteLLM's performance-gap recovered with weak = "
        f"`{summary.get('weak_solver')}`, strong = `{summary.get('strong_solver')}`; CPT(x) = the least cost, "
        f"as a fraction of the strong solver's, that recovers x of the gap."
        + (f" Cost interval: ${interval[0]:.3g} – ${interval[1]:.3g} per item." if None not in interval else "")
    )
    if table.height:
        st.dataframe(table, hide_index=True, width="stretch", key="methods_table", height=min(36 * (table.height + 1) + 3, 720),
                     column_config={c: st.column_config.NumberColumn(format="%.4f") for c in ("AIQ", "APGR", "best accuracy")})
else:
    st.caption("metrics/frontier.json is absent: the per-method summary (AIQ, APGR, CPT) appears once the frontier stage ran.")

with st.expander(f"Frontier points ({points.height})"):
    st.dataframe(points, hide_index=True, width="stretch", key="points_table")
