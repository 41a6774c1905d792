"""Frontier: cost per item vs accuracy on one dataset at a time, the Pareto front of the points
shown, the oracle, a method picker that highlights, and a budget slider (best method under a cost)."""

import polars as pl
import streamlit as st

from dashboards import charts, queries
from dashboards.cached import frontier_summary, keep_in_url, no_results, project, show_chart, url_choice

p = project()
title_slot = st.empty()  # the title names the dataset and split chosen below
options = p.query("frontier_options")
if not options["study"]:
    st.title("Cost–accuracy frontier")
    no_results(p, "the frontier (results/frontier.parquet)")
    st.stop()

summary = frontier_summary(*p.key) or {}
split = summary.get("split", "test")
main_dataset = summary.get("dataset")
url_choice("dataset", options["dataset"], main_dataset if main_dataset in options["dataset"] else options["dataset"][0])
c1, c2 = st.columns([1, 1])
dataset = c1.selectbox("Dataset", options["dataset"], key="dataset",
                       help="One task at a time: costs and accuracies of different tasks do not share a front. "
                            f"Default: the cached answers' dataset ({main_dataset}).")
here = p.query("frontier_dataset_options", dataset=dataset)
main_verifier = (summary.get("verifier") or {}).get("name")
url_choice("verifier", here["verifier"], main_verifier if main_verifier in here["verifier"] else (here["verifier"] or [None])[0])
verifier = c2.selectbox("Verifier", here["verifier"], key="verifier",
                        help="The verifier behind the points' accept decisions; each verifier has its own Pareto set.")
title_slot.title(f"Cost–accuracy frontier · {dataset} · {split} split")

c3, c4 = st.columns([1, 2])
url_choice("solvers", here["solver_set"], here["solver_set"], multi=True)
solver_sets = c3.multiselect("Solver set", here["solver_set"], key="solvers")
url_choice("studies", here["study"], here["study"], multi=True)
studies = c4.multiselect("Study", here["study"], key="studies")

points = p.query("frontier_points", dataset=dataset, verifier=verifier or queries.NONE_LABEL,
                 solver_sets=solver_sets, studies=studies)
drawn, study_oracles = queries.chart_points(points)
labels = sorted({charts.point_label(s, m) for s, m in drawn.filter(pl.col("kind") != "mixture").select("study", "method").iter_rows()})
url_choice("highlight", labels, [], multi=True)
highlight = st.multiselect("Highlight methods", labels, key="highlight",
                           help="Enlarge and name these methods' points; the rest are dimmed.")
keep_in_url(dataset=dataset, verifier=verifier, solvers=solver_sets if solver_sets != here["solver_set"] else None,
            studies=studies if studies != here["study"] else None, highlight=highlight)
if drawn.is_empty():
    st.warning("No frontier point matches these filters.")
    st.stop()

oracle = drawn.filter(pl.col("kind") == "oracle")
a, b, c, d = st.columns(4)
a.metric("Points shown", drawn.height)
b.metric("On the Pareto front", int(drawn["on_pareto"].sum()))
if oracle.height:
    c.metric("Oracle accuracy", f"{oracle['accuracy'][0]:.2%}")
    d.metric("Oracle cost per item", f"${oracle['cost_per_item_usd'][0]:.3g}")

colors = charts.study_colors(options["study"])  # the same colour for a study on every dataset
title = f"{dataset} · {split} split · verifier {verifier}"
show_chart(charts.frontier_figure(drawn, highlight=set(highlight), colors=colors, title=title), "frontier_chart", f"frontier_{dataset}")
zero_cost = drawn.filter(pl.col("cost_per_item_usd") <= 0).height
st.caption(
    "Colour: study (baselines in black and grey). Markers: ■ always one solver, ▲ cascade, small ● random mixtures, "
    "● a study's operating points, ★ oracle — the cheapest correct solver per item, an upper bound no router reaches. "
    "Error bars: the item-level bootstrap interval. Dashed step line: the Pareto front of the points shown "
    "(recomputed when a filter removes points; oracle excluded). Hover a point for its operating point, seeds and MLflow runs."
    + (f" {zero_cost} point(s) with zero cost cannot be drawn on the log axis." if zero_cost else "")
    + (f" Not drawn: {study_oracles.height} study oracle point(s) "
       f"({', '.join(sorted(set(study_oracles['study'] + '/' + study_oracles['method'])))}), the same upper bound." if study_oracles.height else "")
)

# ---------------------------------------------------------------------------------------------
st.subheader("Best method under a budget")
steps = queries.budget_steps(drawn)
if steps:
    url_choice("budget", steps, steps[-1], cast=float)
    budget = st.select_slider("Budget (US$ per item)", options=steps, key="budget", format_func=queries.budget_label,
                              help="The most accurate point (oracle excluded) costing at most this much per item.")
    keep_in_url(budget=repr(budget))
    best = queries.best_under_budget(drawn, budget)
    if best is None:
        st.caption("No point is that cheap.")
    else:
        name = charts.point_label(best["study"], best["method"])
        lo, hi = best["accuracy_ci_low"], best["accuracy_ci_high"]
        b1, b2, b3 = st.columns([2, 1, 1])
        b1.metric("Best under budget", name + ("" if best["operating_point"] == "default" else f" @ {best['operating_point']}"))
        b2.metric("Its accuracy", f"{best['accuracy']:.2%}",
                  help="95 % item-level bootstrap interval below (none when the study wrote no item outcomes).")
        b3.metric("Its cost per item", f"${best['cost_per_item_usd']:.3g}")
        st.caption(f"Accuracy interval: {'(none: no item-level outcomes)' if lo is None else f'[{lo:.2%}, {hi:.2%}]'}; "
                   f"cost interval: {charts.interval_text(best, 'cost', '.3g')}. Study `{best['study']}`, kind `{best['kind']}`.")

# ---------------------------------------------------------------------------------------------
if summary and dataset == main_dataset:
    st.subheader(f"Summary per method · {dataset}")
    keys = {queries.frontier_key(s, m) for s, m in drawn.select("study", "method").iter_rows()}
    table = queries.frontier_methods_table(summary, keys)
    interval = summary.get("cost_interval_usd") or [None, None]
    st.caption(
        f"On `{dataset}` ({split} split) only. AIQ: mean accuracy of the method's concave hull over the cost interval of the "
        f"single solvers (RouterBench). APGR / CPT: RouteLLM's performance-gap recovered with weak = "
        f"`{summary.get('weak_solver')}`, strong = `{summary.get('strong_solver')}`; CPT(x) = the least cost, "
        f"as a fraction of the strong solver's, that recovers x of the gap."
        + (f" Cost interval: ${interval[0]:.3g} – ${interval[1]:.3g} per item." if None not in interval else "")
    )
    if table.height:
        st.dataframe(table, hide_index=True, width="stretch", key="methods_table", height=min(36 * (table.height + 1) + 3, 720),
                     column_config={c: st.column_config.NumberColumn(format="%.4f") for c in ("AIQ", "APGR", "best accuracy")})
elif not summary:
    st.caption("metrics/frontier.json is absent: the per-method summary (AIQ, APGR, CPT) appears once the frontier stage ran.")
else:
    st.caption(f"The per-method summary (AIQ, APGR, CPT) of metrics/frontier.json covers `{main_dataset}` only.")

with st.expander(f"Frontier points ({drawn.height})"):
    st.dataframe(drawn, hide_index=True, width="stretch", key="points_table")
